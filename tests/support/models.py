"""Small ONNX models the tests build themselves (onnx.helper), so the suite runs on a fresh clone.

They are real models with hand-checkable behaviour, not random weights:
- a "bright patch" detector: per stride-8 cell, score = brightest channel mean of the cell (0..1),
  box = the cell's square, output [1, 4+1, N] exactly like an Ultralytics export;
- a colour classifier: logits = 10 x mean of each RGB channel (so a red crop says "red");
- a small conv net for quantization-kind tests.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def _save(model: onnx.ModelProto, path: Path, meta: dict[str, str]) -> Path:
    for k, v in meta.items():
        entry = model.metadata_props.add()
        entry.key, entry.value = k, v
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def make_bright_detector(
    path: Path, imgsz: int = 64, stride: int = 8, transposed: bool = False, dynamic_batch: bool = False
) -> Path:
    """Detector for bright square patches: each stride cell is an anchor scored by its brightness.
    ``dynamic_batch``: the batch axis is ``N`` (the boxes are expanded to the input's batch)."""
    g = imgsz // stride
    n = g * g
    ys, xs = np.meshgrid(np.arange(g), np.arange(g), indexing="ij")
    cx = (xs.reshape(-1) + 0.5) * stride
    cy = (ys.reshape(-1) + 0.5) * stride
    boxes = np.stack([cx, cy, np.full(n, stride), np.full(n, stride)]).astype(np.float32)[None]  # [1,4,N]
    nodes = [
        helper.make_node(
            "AveragePool", ["images"], ["pooled"], kernel_shape=[stride, stride], strides=[stride, stride]
        ),
        helper.make_node("ReduceMax", ["pooled", "axes1"], ["gray"], keepdims=1),
        helper.make_node("Reshape", ["gray", "score_shape"], ["scores"]),
        helper.make_node("Concat", ["boxes", "scores"], ["cat"], axis=1),
    ]
    inits = [
        numpy_helper.from_array(boxes, "boxes"),
        numpy_helper.from_array(np.array([1], np.int64), "axes1"),
        numpy_helper.from_array(np.array([1, 1, n], np.int64), "score_shape"),
    ]
    out_shape: list[Any] = [1, 5, n]
    batch: Any = 1
    if dynamic_batch:
        batch = out_shape[0] = "N"
        inits[2] = numpy_helper.from_array(np.array([0, 1, n], np.int64), "score_shape")  # 0: the input's N
        inits.append(numpy_helper.from_array(np.array([4, n], np.int64), "box_rest"))
        inits += [numpy_helper.from_array(np.array([v], np.int64), k) for k, v in (("z", 0), ("o", 1))]
        nodes[3:3] = [
            helper.make_node("Shape", ["images"], ["in_shape"]),
            helper.make_node("Slice", ["in_shape", "z", "o"], ["n_batch"]),
            helper.make_node("Concat", ["n_batch", "box_rest"], ["box_shape"], axis=0),
            helper.make_node("Expand", ["boxes", "box_shape"], ["boxes_n"]),
        ]
        nodes[-1] = helper.make_node("Concat", ["boxes_n", "scores"], ["cat"], axis=1)
    if transposed:
        nodes.append(helper.make_node("Transpose", ["cat"], ["output0"], perm=[0, 2, 1]))
        out_shape = [1, n, 5]
    else:
        nodes[-1].output[0] = "output0"
    graph = helper.make_graph(
        nodes,
        "bright",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, [batch, 3, imgsz, imgsz])],
        [helper.make_tensor_value_info("output0", TensorProto.FLOAT, out_shape)],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 9
    meta = {"names": "{0: 'bright'}", "imgsz": f"[{imgsz}, {imgsz}]", "stride": str(stride), "task": "detect"}
    return _save(model, path, meta)


def make_color_classifier(
    path: Path, size: int = 32, dynamic_batch: bool = True, probs: bool = False
) -> Path:
    """Classifier whose logits are 10 x the mean of each RGB channel: names red, green, blue."""
    batch: object = "N" if dynamic_batch else 1
    nodes = [
        helper.make_node("GlobalAveragePool", ["images"], ["gap"]),
        helper.make_node("Flatten", ["gap"], ["flat"]),
        helper.make_node("Mul", ["flat", "ten"], ["logits" if probs else "output0"]),
    ]
    if probs:
        nodes.append(helper.make_node("Softmax", ["logits"], ["output0"], axis=1))
    graph = helper.make_graph(
        nodes,
        "color",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, [batch, 3, size, size])],
        [helper.make_tensor_value_info("output0", TensorProto.FLOAT, [batch, 3])],
        [numpy_helper.from_array(np.array([10.0], np.float32), "ten")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 9
    meta = {"names": "{0: 'red', 1: 'green', 2: 'blue'}", "imgsz": f"[{size}, {size}]", "task": "classify"}
    return _save(model, path, meta)


def make_conv_net(path: Path, size: int = 32, fp16: bool = False, seed: int = 0) -> Path:
    """Conv-Relu-Conv-GAP classifier-shaped net (used for quantization-kind and loading tests)."""
    rng = np.random.default_rng(seed)
    dt = np.float16 if fp16 else np.float32
    et = TensorProto.FLOAT16 if fp16 else TensorProto.FLOAT
    w1 = rng.normal(0, 0.3, (8, 3, 3, 3)).astype(dt)
    w2 = rng.normal(0, 0.3, (4, 8, 3, 3)).astype(dt)
    nodes = [
        helper.make_node("Conv", ["images", "w1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("GlobalAveragePool", ["c2"], ["gap"]),
        helper.make_node("Flatten", ["gap"], ["output0"]),
    ]
    graph = helper.make_graph(
        nodes,
        "convnet",
        [helper.make_tensor_value_info("images", et, [1, 3, size, size])],
        [helper.make_tensor_value_info("output0", et, [1, 4])],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return _save(model, path, {"task": "classify"})


def bright_scene(
    h: int, w: int, squares: list[tuple[int, int, int]], color: tuple[int, int, int] = (255, 255, 255)
) -> np.ndarray:
    """A black BGR image with filled squares (x, y, side) in ``color``."""
    img = np.zeros((h, w, 3), np.uint8)
    for x, y, s in squares:
        img[y : y + s, x : x + s] = color
    return img


def make_format_detector(
    path: Path,
    fmt: str = "yolov8",
    imgsz_hw: tuple[int, int] = (64, 64),
    stride: int = 8,
    k: int = 10,
    output_scale: float | None = None,
    end2end_meta: bool = True,
    swap_classes: bool = False,
    score_gain: float = 1.0,
) -> Path:
    """The bright-patch detector (score of a stride cell = its brightest channel mean, box = the cell)
    exported in each output format the agent understands, so all of them must agree:

    - ``yolov8``  [1, 5, N]; ``yolov8t`` [1, N, 5] (transposed);
    - ``yolov5``  [1, N, 7]: objectness sqrt(s) x class scores (sqrt(s), sqrt(s)/2) -> class 0 scores s;
    - ``end2end`` [1, k, 6]: the k best cells as (x1, y1, x2, y2, s, 0), no NMS needed.

    ``score_gain``: scores x gain (0: a float model whose scores are all zero).
    ``swap_classes`` (yolov5): class 1 is the bright one and the names say so ({0: 'dim', 1: 'bright'}).
    ``output_scale``: quantize the output with one (scale, zero point 0) pair -- the broken INT8
    export the load-time guard must catch when the scale is coarse.
    """
    h, w = imgsz_hw
    gh, gw = h // stride, w // stride
    n = gh * gw
    ys, xs = np.meshgrid(np.arange(gh), np.arange(gw), indexing="ij")
    cx = (xs.reshape(-1) + 0.5) * stride
    cy = (ys.reshape(-1) + 0.5) * stride
    half = np.full(n, stride / 2)
    cxcywh = np.stack([cx, cy, np.full(n, stride), np.full(n, stride)]).astype(np.float32)[None]
    xyxy = np.stack([cx - half, cy - half, cx + half, cy + half], axis=1).astype(np.float32)
    nodes = [
        helper.make_node(
            "AveragePool", ["images"], ["pooled"], kernel_shape=[stride, stride], strides=[stride, stride]
        ),
        helper.make_node("ReduceMax", ["pooled", "axes1"], ["gray0"], keepdims=1),
        helper.make_node("Mul", ["gray0", "gain"], ["gray"]),
        helper.make_node("Reshape", ["gray", "score_shape"], ["scores"]),
    ]
    inits = [
        numpy_helper.from_array(np.array([score_gain], np.float32), "gain"),
        numpy_helper.from_array(cxcywh, "boxes"),
        numpy_helper.from_array(xyxy, "boxes_xyxy"),
        numpy_helper.from_array(np.array([1], np.int64), "axes1"),
        numpy_helper.from_array(np.array([1, 1, n], np.int64), "score_shape"),
        numpy_helper.from_array(np.array([1, n], np.int64), "flat_shape"),
        numpy_helper.from_array(np.array([k], np.int64), "k"),
        numpy_helper.from_array(np.array([2], np.int64), "axes2"),
        numpy_helper.from_array(np.zeros((1, k, 1), np.float32), "cls0"),
        numpy_helper.from_array(np.array([0.5], np.float32), "half"),
    ]
    names = "{0: 'bright'}"
    if fmt in ("yolov8", "yolov8t"):
        nodes.append(helper.make_node("Concat", ["boxes", "scores"], ["cat"], axis=1))
        if fmt == "yolov8t":
            nodes.append(helper.make_node("Transpose", ["cat"], ["raw"], perm=[0, 2, 1]))
            out_shape = [1, n, 5]
        else:
            nodes.append(helper.make_node("Identity", ["cat"], ["raw"]))
            out_shape = [1, 5, n]
    elif fmt == "yolov5":
        names = "{0: 'dim', 1: 'bright'}" if swap_classes else "{0: 'bright', 1: 'dim'}"
        cls_cols = ["sq_half", "sq"] if swap_classes else ["sq", "sq_half"]
        nodes += [
            helper.make_node("Sqrt", ["scores"], ["sq"]),
            helper.make_node("Mul", ["sq", "half"], ["sq_half"]),
            helper.make_node("Concat", ["boxes", "sq", *cls_cols], ["cat"], axis=1),
            helper.make_node("Transpose", ["cat"], ["raw"], perm=[0, 2, 1]),
        ]
        out_shape = [1, n, 7]
    elif fmt == "end2end":
        nodes += [
            helper.make_node("Reshape", ["scores", "flat_shape"], ["s2"]),
            helper.make_node("TopK", ["s2", "k"], ["vals", "idx"], axis=1),
            helper.make_node("Gather", ["boxes_xyxy", "idx"], ["g"], axis=0),
            helper.make_node("Unsqueeze", ["vals", "axes2"], ["v3"]),
            helper.make_node("Concat", ["g", "v3", "cls0"], ["raw"], axis=2),
        ]
        out_shape = [1, k, 6]
    else:
        raise ValueError(fmt)
    if output_scale is None:
        nodes.append(helper.make_node("Identity", ["raw"], ["output0"]))
    else:
        inits += [
            numpy_helper.from_array(np.array(output_scale, np.float32), "out_scale"),
            numpy_helper.from_array(np.array(0, np.uint8), "out_zp"),
        ]
        nodes += [
            helper.make_node("QuantizeLinear", ["raw", "out_scale", "out_zp"], ["raw_q"]),
            helper.make_node("DequantizeLinear", ["raw_q", "out_scale", "out_zp"], ["output0"]),
        ]
    graph = helper.make_graph(
        nodes,
        f"bright-{fmt}",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, h, w])],
        [helper.make_tensor_value_info("output0", TensorProto.FLOAT, out_shape)],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 9
    meta = {"names": names, "imgsz": f"[{h}, {w}]", "stride": str(stride), "task": "detect"}
    if fmt == "end2end" and end2end_meta:
        meta["end2end"] = "True"
    return _save(model, path, meta)


def make_grid_classifier(
    path: Path,
    size: int = 224,
    classes: int = 16,
    seed: int = 0,
    meta: dict[str, str] | None = None,
    order: list[int] | None = None,
) -> Path:
    """A classifier that looks *where* things are: the input is average-pooled to a 4x4 grid of RGB
    means (48 features), centred per image, then a fixed random linear map gives ``classes`` logits.
    Crop geometry, channel order, scale and mean/std all move its top-1, so it tells preprocessing
    recipes apart the way a real ImageNet network does, without shipping one.
    ``order``: the output columns in this order (the same classifier with its classes listed otherwise)."""
    rng = np.random.default_rng(seed)
    k = size // 4
    w = rng.normal(0, 1, (48, classes)).astype(np.float32)
    if order is not None:
        w = w[:, order]
    nodes = [
        helper.make_node("AveragePool", ["images"], ["grid"], kernel_shape=[k, k], strides=[k, k]),
        helper.make_node("Flatten", ["grid"], ["flat"]),
        helper.make_node("ReduceMean", ["flat", "axis1"], ["mean"], keepdims=1),
        helper.make_node("Sub", ["flat", "mean"], ["centred"]),
        helper.make_node("MatMul", ["centred", "w"], ["output0"]),
    ]
    graph = helper.make_graph(
        nodes,
        "grid",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, size, size])],
        [helper.make_tensor_value_info("output0", TensorProto.FLOAT, [1, classes])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.array([1], np.int64), "axis1")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 9
    return _save(model, path, meta or {})


def wrap_yolov8(src: Path, dst: Path, fmt: str) -> Path:
    """A real YOLOv8/YOLO11 export ([1, 4+nc, N]) re-exported in another output format, in the graph:

    - ``yolov8t``: [1, N, 4+nc] (a Transpose appended);
    - ``yolov5``: [1, N, 5+nc] with objectness = best class score and class scores divided by it,
      so objectness x class score is the original score;
    - ``end2end``: [1, K, 6] (x1, y1, x2, y2, score, class) after ONNX NonMaxSuppression (IoU 0.45,
      score 0.25, per class), as NMS-free / ``end2end`` exports deliver.
    """
    m = onnx.load(str(src))
    g = m.graph
    out = g.output[0].name
    nc = int(g.output[0].type.tensor_type.shape.dim[1].dim_value) - 4
    new_out = f"{fmt}_out"
    nodes: list[onnx.NodeProto] = [helper.make_node("Transpose", [out], ["w_t"], perm=[0, 2, 1])]
    inits = []
    if fmt == "yolov8t":
        nodes.append(helper.make_node("Identity", ["w_t"], [new_out]))
        shape: list[object] = [1, "N", 4 + nc]
    else:
        inits += [
            numpy_helper.from_array(np.array([4, nc], np.int64), "w_split"),
            numpy_helper.from_array(np.array([2], np.int64), "w_axes2"),
        ]
        nodes += [
            helper.make_node("Split", ["w_t", "w_split"], ["w_box", "w_cls"], axis=2),
        ]
        if fmt == "yolov5":
            inits.append(numpy_helper.from_array(np.array(1e-12, np.float32), "w_eps"))
            nodes += [
                helper.make_node("ReduceMax", ["w_cls", "w_axes2"], ["w_obj"], keepdims=1),
                helper.make_node("Max", ["w_obj", "w_eps"], ["w_obj_safe"]),
                helper.make_node("Div", ["w_cls", "w_obj_safe"], ["w_cls_n"]),
                helper.make_node("Concat", ["w_box", "w_obj", "w_cls_n"], [new_out], axis=2),
            ]
            shape = [1, "N", 5 + nc]
        elif fmt == "end2end":
            to_xyxy = np.array([[1, 0, 1, 0], [0, 1, 0, 1], [-0.5, 0, 0.5, 0], [0, -0.5, 0, 0.5]], np.float32)
            inits += [
                numpy_helper.from_array(to_xyxy, "w_xyxy_m"),
                numpy_helper.from_array(np.array([300], np.int64), "w_max"),
                numpy_helper.from_array(np.array([0.45], np.float32), "w_iou"),
                numpy_helper.from_array(np.array([0.25], np.float32), "w_thr"),
                numpy_helper.from_array(np.array([2], np.int64), "w_i2"),
                numpy_helper.from_array(np.array([1], np.int64), "w_i1"),
                numpy_helper.from_array(np.array([0], np.int64), "w_i0"),
                numpy_helper.from_array(np.array([3], np.int64), "w_i3"),
                numpy_helper.from_array(np.array([1], np.int64), "w_ax1"),
            ]
            nodes += [
                helper.make_node("MatMul", ["w_box", "w_xyxy_m"], ["w_xyxy"]),
                helper.make_node("Slice", [out, "w_i0", "w_i0", "w_ax1"], ["w_unused"]),
                helper.make_node("Transpose", ["w_cls"], ["w_scores"], perm=[0, 2, 1]),  # [1, nc, N]
                helper.make_node(
                    "NonMaxSuppression", ["w_xyxy", "w_scores", "w_max", "w_iou", "w_thr"], ["w_sel"]
                ),
                helper.make_node("Slice", ["w_sel", "w_i2", "w_i3", "w_ax1"], ["w_idx2"]),  # [K, 1]
                helper.make_node("Slice", ["w_sel", "w_i1", "w_i2", "w_ax1"], ["w_cls_i"]),  # [K, 1]
                helper.make_node("Squeeze", ["w_idx2", "w_ax1"], ["w_idx"]),
                helper.make_node("Squeeze", ["w_xyxy", "w_i0"], ["w_xyxy0"]),
                helper.make_node("Gather", ["w_xyxy0", "w_idx"], ["w_bsel"], axis=0),  # [K, 4]
                helper.make_node("GatherND", ["w_scores", "w_sel"], ["w_ssel"]),  # [K]
                helper.make_node("Unsqueeze", ["w_ssel", "w_ax1"], ["w_ssel2"]),
                helper.make_node("Cast", ["w_cls_i"], ["w_cls_f"], to=TensorProto.FLOAT),
                helper.make_node("Concat", ["w_bsel", "w_ssel2", "w_cls_f"], ["w_rows"], axis=1),
                helper.make_node("Unsqueeze", ["w_rows", "w_i0"], [new_out]),
            ]
            shape = [1, "K", 6]
        else:
            raise ValueError(fmt)
    g.node.extend(nodes)
    g.initializer.extend(inits)
    del g.output[:]
    g.output.append(helper.make_tensor_value_info(new_out, TensorProto.FLOAT, shape))
    if fmt == "end2end":
        m.metadata_props.add(key="end2end", value="True")
    onnx.save(m, str(dst))
    return dst


def make_square_detector(path: Path, imgsz: int = 64, side: int = 16, step: int = 4) -> Path:
    """Detector for one bright ``side`` square: a ``side`` window every ``step`` px, scored by its
    brightest channel mean, box = the window. A square on the ``step`` grid scores 1.0 in exactly one
    window (its neighbours score <= 0.75 and lose NMS or a 0.6 threshold), so a square moved ``step``
    px a frame is one detection a frame with IoU 0.6 to the last: the tracker follows it exactly."""
    g = (imgsz - side) // step + 1
    n = g * g
    ys, xs = np.meshgrid(np.arange(g), np.arange(g), indexing="ij")
    cx = xs.reshape(-1) * step + side / 2
    cy = ys.reshape(-1) * step + side / 2
    boxes = np.stack([cx, cy, np.full(n, side), np.full(n, side)]).astype(np.float32)[None]
    nodes = [
        helper.make_node(
            "AveragePool", ["images"], ["pooled"], kernel_shape=[side, side], strides=[step, step]
        ),
        helper.make_node("ReduceMax", ["pooled", "axes1"], ["gray"], keepdims=1),
        helper.make_node("Reshape", ["gray", "score_shape"], ["scores"]),
        helper.make_node("Concat", ["boxes", "scores"], ["output0"], axis=1),
    ]
    inits = [
        numpy_helper.from_array(boxes, "boxes"),
        numpy_helper.from_array(np.array([1], np.int64), "axes1"),
        numpy_helper.from_array(np.array([1, 1, n], np.int64), "score_shape"),
    ]
    graph = helper.make_graph(
        nodes,
        "square",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, imgsz, imgsz])],
        [helper.make_tensor_value_info("output0", TensorProto.FLOAT, [1, 5, n])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 9
    meta = {"names": "{0: 'square'}", "imgsz": f"[{imgsz}, {imgsz}]", "stride": str(step), "task": "detect"}
    return _save(model, path, meta)
