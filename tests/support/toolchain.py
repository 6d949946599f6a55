"""Builders shared by the tools tests (tests/tools): a small YOLO-like detector graph and synthetic scenes.

The detector is real arithmetic (fixed, seeded weights), shaped like an Ultralytics export:
Conv stem -> head Conv -> Reshape [1, 4+nc, N] -> Split(boxes, classes) -> boxes: Sigmoid * imgsz
(pixels), classes: Sigmoid -> Concat -> ``output0`` [1, 4+nc, N]. The pixel boxes (0..imgsz) next
to 0..1 scores in one Concat are exactly what naive whole-model quantization breaks.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cv2
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

IMGSZ = 64
NC = 3


def toy_detector_model(imgsz: int = IMGSZ, nc: int = NC, seed: int = 0, opset: int = 17) -> Any:
    rng = np.random.default_rng(seed)
    c1, c2 = 16, 24
    n = (imgsz // 4) ** 2

    def init(name: str, arr: np.ndarray) -> Any:
        return numpy_helper.from_array(arr.astype(np.float32), name)

    inits = [
        init("w1", rng.normal(0, 0.4, (c1, 3, 3, 3))),
        init("b1", rng.normal(0, 0.1, (c1,))),
        init("w2", rng.normal(0, 0.15, (c2, c1, 3, 3))),
        init("b2", rng.normal(0, 0.1, (c2,))),
        init("wh", rng.normal(0, 0.35, (4 + nc, c2, 1, 1))),
        init("bh", np.concatenate([np.zeros(4), np.full(nc, -0.5)])),
        numpy_helper.from_array(np.array([1, 4 + nc, n], np.int64), "shape"),
        init("imgsz", np.array([float(imgsz)])),
    ]
    if opset >= 13:  # Split takes its sizes as an input from opset 13, as an attribute before
        inits.append(numpy_helper.from_array(np.array([4, nc], np.int64), "split"))
        split = helper.make_node("Split", ["flat", "split"], ["box_raw", "cls_raw"], "head/split", axis=1)
    else:
        split = helper.make_node(
            "Split", ["flat"], ["box_raw", "cls_raw"], "head/split", axis=1, split=[4, nc]
        )
    nodes = [
        helper.make_node(
            "Conv", ["images", "w1", "b1"], ["c1"], "stem/conv", pads=[1, 1, 1, 1], strides=[2, 2]
        ),
        helper.make_node("Sigmoid", ["c1"], ["s1"], "stem/act/sig"),
        helper.make_node("Mul", ["c1", "s1"], ["a1"], "stem/act/mul"),
        helper.make_node("Conv", ["a1", "w2", "b2"], ["c2"], "body/conv", pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Relu", ["c2"], ["a2"], "body/act"),
        helper.make_node("Conv", ["a2", "wh", "bh"], ["h"], "head/conv"),
        helper.make_node("Reshape", ["h", "shape"], ["flat"], "head/reshape"),
        split,
        helper.make_node("Sigmoid", ["box_raw"], ["box_sig"], "head/box_sigmoid"),
        helper.make_node("Mul", ["box_sig", "imgsz"], ["box_px"], "head/box_scale"),
        helper.make_node("Sigmoid", ["cls_raw"], ["cls"], "head/cls_sigmoid"),
        helper.make_node("Concat", ["box_px", "cls"], ["output0"], "head/concat", axis=1),
    ]
    graph = helper.make_graph(
        nodes,
        "toy-yolo",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, imgsz, imgsz])],
        [helper.make_tensor_value_info("output0", TensorProto.FLOAT, [1, 4 + nc, n])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 9 if opset >= 13 else 7
    meta = {
        "names": str({i: f"c{i}" for i in range(nc)}),
        "imgsz": str([imgsz, imgsz]),
        "stride": "4",
        "task": "detect",
    }
    for k, v in meta.items():
        model.metadata_props.add(key=k, value=v)
    onnx.checker.check_model(model)
    return model


def build_toy_detector(path: Path, **kw: Any) -> Path:
    onnx.save(toy_detector_model(**kw), str(path))
    return path


def write_scenes(folder: Path, count: int, seed: int, size: tuple[int, int] = (96, 128)) -> list[Path]:
    """Textured backgrounds with a few coloured rectangles, as JPEGs."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    files = []
    for i in range(count):
        h, w = size
        img = cv2.GaussianBlur(rng.integers(0, 255, (h, w, 3), dtype=np.uint8), (5, 5), 0)
        for _ in range(3):
            x, y = int(rng.integers(0, w - 30)), int(rng.integers(0, h - 30))
            col = tuple(int(c) for c in rng.integers(0, 255, 3))
            cv2.rectangle(
                img, (x, y), (x + int(rng.integers(10, 30)), y + int(rng.integers(10, 30))), col, -1
            )
        p = folder / f"scene{i:03d}.jpg"
        cv2.imwrite(str(p), img)
        files.append(p)
    return files


def rename_all_nodes(model: Any, prefix: str = "n") -> dict[str, str]:
    """Give every node a new opaque name; returns old -> new."""
    mapping = {}
    for i, node in enumerate(model.graph.node):
        new = f"{prefix}{i:04d}_{(i * 7919) % 1000:03d}"
        mapping[node.name] = new
        node.name = new
    return mapping


CLASSES = ("red", "green", "blue")


def toy_classifier_model(size: int = 32) -> Any:
    """A colour classifier with fixed weights: 1x1 Conv (identity) + Relu -> global average pool ->
    Gemm (x8) -> Softmax over red/green/blue. Input RGB 0..1, so the dominant channel wins."""
    eye = np.eye(3, dtype=np.float32)
    inits = [
        numpy_helper.from_array(eye.reshape(3, 3, 1, 1), "wc"),
        numpy_helper.from_array(np.zeros(3, np.float32), "bc"),
        numpy_helper.from_array(eye * 8.0, "wg"),
        numpy_helper.from_array(np.zeros(3, np.float32), "bg"),
    ]
    nodes = [
        helper.make_node("Conv", ["images", "wc", "bc"], ["c"], "conv"),
        helper.make_node("Relu", ["c"], ["r"], "relu"),
        helper.make_node("GlobalAveragePool", ["r"], ["p"], "pool"),
        helper.make_node("Flatten", ["p"], ["f"], "flatten"),
        helper.make_node("Gemm", ["f", "wg", "bg"], ["logits"], "fc", transB=1),
        helper.make_node("Softmax", ["logits"], ["output0"], "softmax", axis=1),
    ]
    graph = helper.make_graph(
        nodes,
        "toy-cls",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, ["batch", 3, size, size])],
        [helper.make_tensor_value_info("output0", TensorProto.FLOAT, ["batch", 3])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    for k, v in {
        "names": str(dict(enumerate(CLASSES))),
        "imgsz": str([size, size]),
        "task": "classify",
    }.items():
        model.metadata_props.add(key=k, value=v)
    onnx.checker.check_model(model)
    return model


def write_colour_folders(root: Path, per_class: int, seed: int) -> None:
    """root/<red|green|blue>/*.png: noisy images whose dominant channel is the class (BGR on disk)."""
    rng = np.random.default_rng(seed)
    bgr_index = {"red": 2, "green": 1, "blue": 0}
    for name in CLASSES:
        d = root / name
        d.mkdir(parents=True, exist_ok=True)
        for i in range(per_class):
            img = rng.integers(0, 110, (40, 48, 3)).astype(np.uint8)
            img[:, :, bgr_index[name]] = rng.integers(120, 256, (40, 48)).astype(np.uint8)
            cv2.imwrite(str(d / f"{name}{i:02d}.png"), img)
