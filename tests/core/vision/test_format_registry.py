"""The output-format registry: forcing a format, normalised-box (RT-DETR / 0..1 end2end) exports,
and the NMS-free formats' best-first order under ``max_det``."""

from __future__ import annotations

import subprocess
from pathlib import Path

import cv2
import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper
from support import cli
from support.models import bright_scene, make_format_detector

from edge_agent.adapters.runtime.onnx_model import OnnxModel
from edge_agent.core.vision.formats import NAMES, REGISTRY, decode_output, resolve_format
from edge_agent.core.vision.preprocess import Letterbox, letterbox
from edge_agent.errors import ConfigError, ModelError
from edge_agent.inference.pipeline import Detector, DetectorParams

HW = (48, 96)  # model input, high x wide


def _append(src: Path, dst: Path, nodes: list[onnx.NodeProto], inits: list[onnx.TensorProto],
            shape: list[int], meta: dict[str, str] | None = None) -> Path:  # fmt: skip
    """``src`` with its output renamed ``prev`` and ``nodes`` turning ``prev`` into a new ``output0``."""
    m = onnx.load(str(src))
    for n in m.graph.node:
        n.output[:] = ["prev" if o == "output0" else o for o in n.output]
    m.graph.node.extend(nodes)
    m.graph.initializer.extend(inits)
    del m.graph.output[:]
    m.graph.output.append(helper.make_tensor_value_info("output0", TensorProto.FLOAT, shape))
    for k, v in (meta or {}).items():
        m.metadata_props.append(onnx.StringStringEntryProto(key=k, value=v))
    onnx.checker.check_model(m)
    onnx.save(m, str(dst))
    return dst


def make_rtdetr(tmp: Path, k: int = 10, meta: dict[str, str] | None = None) -> Path:
    """The bright-patch detector as an RT-DETR export: its ``k`` best cells as rows of
    (cx, cy, w, h) / input size and the score, [1, k, 5], no NMS."""
    h, w = HW
    src = make_format_detector(tmp / "src-t.onnx", "yolov8t", imgsz_hw=HW)
    norm = np.array([1 / w, 1 / h, 1 / w, 1 / h, 1], np.float32)
    nodes = [
        helper.make_node("Mul", ["prev", "norm"], ["rows_n"]),
        helper.make_node("Squeeze", ["rows_n", "ax0"], ["rows2"]),  # [n, 5]
        helper.make_node("Slice", ["rows2", "c4", "c5", "ax1"], ["score_col"]),
        helper.make_node("Squeeze", ["score_col", "ax1"], ["score_1d"]),
        helper.make_node("TopK", ["score_1d", "kk"], ["_v", "top"], axis=0),
        helper.make_node("Gather", ["rows2", "top"], ["best"], axis=0),
        helper.make_node("Unsqueeze", ["best", "ax0"], ["output0"]),
    ]
    inits = [
        numpy_helper.from_array(norm, "norm"),
        numpy_helper.from_array(np.array([0], np.int64), "ax0"),
        numpy_helper.from_array(np.array([1], np.int64), "ax1"),
        numpy_helper.from_array(np.array([4], np.int64), "c4"),
        numpy_helper.from_array(np.array([5], np.int64), "c5"),
        numpy_helper.from_array(np.array([k], np.int64), "kk"),
    ]
    return _append(src, tmp / f"rtdetr{k}.onnx", nodes, inits, [1, k, 5], meta)


def make_end2end_normalised(tmp: Path) -> Path:
    """The end2end export with its boxes divided by the input size (some NMS-in-graph exports)."""
    h, w = HW
    src = make_format_detector(tmp / "src-e2e.onnx", "end2end", imgsz_hw=HW)
    norm = np.array([1 / w, 1 / h, 1 / w, 1 / h, 1, 1], np.float32)
    nodes = [helper.make_node("Mul", ["prev", "norm"], ["output0"])]
    return _append(src, tmp / "e2e-norm.onnx", nodes, [numpy_helper.from_array(norm, "norm")], [1, 10, 6])


def _sorted(boxes: np.ndarray) -> np.ndarray:
    return boxes[np.lexsort((boxes[:, 0], boxes[:, 1]))]


def test_rtdetr_is_recognised_by_shape_and_by_metadata(tmp_path: Path) -> None:
    det = Detector(OnnxModel(make_rtdetr(tmp_path)))
    assert (det.format.fmt.name, det.format.num_classes, det.format.fmt.nms) == ("rtdetr", 1, False)
    # 30 queries against 96 cells is too many to tell by shape: the export's description says it
    tagged = make_rtdetr(tmp_path, 30, {"description": "Ultralytics rtdetr-l model trained on x.yaml"})
    assert Detector(OnnxModel(tagged)).format.fmt.name == "rtdetr"


def test_rtdetr_boxes_are_scaled_to_pixels(tmp_path: Path) -> None:
    """Same aspect as the input (stretch = letterbox, no padding): RT-DETR = the YOLOv8 export."""
    img = bright_scene(96, 192, [(64, 16, 32), (140, 50, 30)])
    ref = Detector(OnnxModel(make_format_detector(tmp_path / "v8.onnx", imgsz_hw=HW)), DetectorParams(0.5))
    got = Detector(OnnxModel(make_rtdetr(tmp_path)), DetectorParams(0.5)).detect(img).detections
    want = ref.detect(img).detections
    assert 4 <= len(got) == len(want) <= 10
    np.testing.assert_allclose(_sorted(got.boxes), _sorted(want.boxes), atol=1e-3)
    assert float(got.boxes.max()) > 100  # pixels, not 0..1


def test_rtdetr_input_is_stretched_like_its_predictor(tmp_path: Path) -> None:
    """Another aspect: RT-DETR's input is the image stretched to 96x48 (Ultralytics
    ``LetterBox(scale_fill=True)``), boxes mapped back per axis."""
    img = bright_scene(64, 192, [(64, 16, 32)])
    stretched = cv2.resize(img, (HW[1], HW[0]), interpolation=cv2.INTER_LINEAR)
    ref = Detector(OnnxModel(make_format_detector(tmp_path / "v8.onnx", imgsz_hw=HW)), DetectorParams(0.3))
    want = ref.detect(stretched).detections
    got = Detector(OnnxModel(make_rtdetr(tmp_path)), DetectorParams(0.3)).detect(img).detections
    assert len(got) == len(want) > 0
    scaled = want.boxes * np.array([192 / 96, 64 / 48, 192 / 96, 64 / 48], np.float32)
    np.testing.assert_allclose(_sorted(got.boxes), _sorted(scaled), atol=1e-3)


def test_rtdetr_decode_is_ultralytics_postprocess() -> None:
    """Ultralytics' RTDETRPredictor: xywh2xyxy, then x * orig_w, y * orig_h (input stretched)."""
    rows = np.array([[[0.5, 0.5, 0.2, 0.4, 0.9], [0.1, 0.1, 0.1, 0.1, 0.2], [0.3, 0.6, 0.2, 0.2, 0.95]]])
    resolved = resolve_format((1, 3, 5), 1, {"description": "rtdetr"}, (64, 64))
    _, lb = letterbox(np.zeros((100, 200, 3), np.uint8), (64, 64), stretch=True)
    dets, best = decode_output(rows.astype(np.float32), resolved, lb)
    assert best == pytest.approx(0.95)
    np.testing.assert_allclose(dets.boxes, [[40, 50, 80, 70], [80, 30, 120, 70]], atol=1e-3)
    np.testing.assert_allclose(dets.scores, [0.95, 0.9], atol=1e-6)  # best first


def test_end2end_with_normalised_boxes_is_scaled(tmp_path: Path, format_models: dict[str, Path]) -> None:
    img = bright_scene(64, 192, [(64, 16, 32)])
    pix = Detector(OnnxModel(format_models["end2end"])).detect(img).detections
    got = Detector(OnnxModel(make_end2end_normalised(tmp_path))).detect(img).detections
    assert len(got) == len(pix) == 4
    np.testing.assert_allclose(_sorted(got.boxes), _sorted(pix.boxes), atol=1e-3)


def test_separate_boxes_and_scores_outputs_are_refused_in_one_line(tmp_path: Path) -> None:
    graph = helper.make_graph(
        [
            helper.make_node("ReduceMean", ["images"], ["m"], keepdims=0),
            helper.make_node("Expand", ["m", "s4"], ["boxes"]),
            helper.make_node("Expand", ["m", "s3"], ["scores"]),
        ],
        "detr",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, 32, 32])],
        [
            helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [1, 300, 4]),
            helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, 300, 3]),
        ],
        [
            numpy_helper.from_array(np.array([1, 300, 4], np.int64), "s4"),
            numpy_helper.from_array(np.array([1, 300, 3], np.int64), "s3"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / "detr.onnx"
    onnx.save(model, str(path))
    with pytest.raises(ModelError) as e:
        Detector(OnnxModel(path))
    msg = str(e.value)
    assert "\n" not in msg and "boxes [1, 300, 4] + scores [1, 300, 3]" in msg and "[1, Q, 4+nc]" in msg


def test_a_forced_format_is_used_and_checked(format_models: dict[str, Path]) -> None:
    det = Detector(OnnxModel(format_models["yolov8t"]), output_format="yolov8")
    assert (det.format.fmt.name, det.format.transposed) == ("yolov8", False)
    with pytest.raises(ModelError) as e:
        Detector(OnnxModel(format_models["yolov8"]), output_format="end2end")
    assert "\n" not in str(e.value) and "is not end2end" in str(e.value) and "output0" in str(e.value)
    with pytest.raises(ModelError) as e:
        Detector(OnnxModel(format_models["yolov8"]), output_format="yolo8")
    assert "unknown output format 'yolo8'; expected one of: rtdetr, end2end, yolov5, yolov8" in str(e.value)


def test_forcing_rtdetr_on_a_yolov8_shape_the_evidence_would_misread() -> None:
    """[1, 300, 84] at an unknown input size reads as YOLOv8 rows; forced, it is RT-DETR."""
    assert resolve_format((1, 300, 84), 80, {}, (0, 0)).fmt.name == "yolov8"
    assert resolve_format((1, 300, 84), 80, {}, (0, 0), "rtdetr").fmt.name == "rtdetr"
    assert resolve_format((1, 300, 84), 80, {}, (640, 640)).fmt.name == "rtdetr"
    # Objects365 (365 classes): more columns than queries; the names' class count tells
    assert resolve_format((1, 300, 369), 365, {}, (640, 640)).fmt.name == "rtdetr"
    assert resolve_format((1, 84, 8400), 0, {}, (640, 640)).fmt.name == "yolov8"


def test_config_key_is_validated_against_the_registry() -> None:
    from edge_agent.core.config.schema import parse_config

    with pytest.raises(ConfigError) as e:
        parse_config('[detector]\noutput_format = "yolo8"\n', "c.toml")
    msg = str(e.value)
    assert "detector.output_format" in msg and "\n" not in msg
    assert all(n in msg for n in NAMES)
    assert parse_config('[detector]\noutput_format = "YOLOv8"\n').detector.output_format == "yolov8"
    assert parse_config('[detector]\noutput_format = "auto"\n').detector.output_format is None
    assert parse_config("").detector.output_format is None


def test_the_config_key_reaches_the_detector(format_models: dict[str, Path]) -> None:
    from edge_agent.app.agent.modelset import ModelSet
    from edge_agent.core.config.schema import parse_config

    text = f'[detector]\nmodel = "{format_models["yolov8t"]}"\n'
    assert ModelSet.from_config(parse_config(text)).detector.format.fmt.name == "yolov8"
    with pytest.raises(ModelError, match="is not end2end"):
        ModelSet.from_config(parse_config(text + 'output_format = "end2end"\n'))


def test_infer_output_format_flag(tmp_path: Path, format_models: dict[str, Path]) -> None:
    img = tmp_path / "s.png"
    cv2.imwrite(str(img), bright_scene(64, 192, [(64, 16, 32)]))

    def infer(fmt: str) -> subprocess.CompletedProcess[str]:
        return cli(
            "infer", str(img), "--model", str(format_models["yolov8t"]), "--output-format", fmt, "--json"
        )

    assert infer("yolov8").returncode == 0
    bad = infer("bogus")
    assert bad.returncode != 0 and "Traceback" not in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1 and "expected one of: rtdetr" in bad.stderr


def test_every_format_is_in_the_registry_once_and_documented() -> None:
    docs = (Path(__file__).resolve().parents[3] / "docs" / "models.md").read_text(encoding="utf-8")
    assert len(NAMES) == len(REGISTRY) == len({type(f) for f in REGISTRY})
    for f in REGISTRY:
        assert f"`{f.name}`" in docs, f"docs/models.md does not describe {f.name}"
    assert "edge_agent/core/vision/formats.py" in docs


@pytest.mark.parametrize("fmt", ["end2end", "rtdetr"])
def test_nms_free_rows_are_kept_best_first_under_max_det(fmt: str) -> None:
    """Rows arrive in the model's order (not sorted): ``max_det`` keeps the best, best first."""
    scores = np.array([0.3, 0.9, 0.5, 0.8, 0.7], np.float32)
    xs = np.arange(5, dtype=np.float32) * 10 + 5
    if fmt == "end2end":
        rows = np.stack([xs - 2, xs - 2, xs + 2, xs + 2, scores, np.zeros(5, np.float32)], axis=1)
        hw = (64, 64)
    else:
        hw = (64, 64)
        rows = np.stack([xs / 64, xs / 64, np.full(5, 4 / 64), np.full(5, 4 / 64), scores], axis=1)
    resolved = resolve_format((1, 5, rows.shape[1]), 1, {"end2end": "True", "description": fmt}, hw, fmt)
    dets, _ = decode_output(
        rows[None].astype(np.float32), resolved, Letterbox(1, 1, 0, 0, 64, 64), 0.25, 0.45, 2
    )
    np.testing.assert_allclose(dets.scores, [0.9, 0.8])
    np.testing.assert_allclose(dets.boxes[:, 0], [13, 33], atol=1e-4)


@settings(max_examples=300, deadline=None)
@given(a=st.integers(5, 2000), extra=st.integers(1, 20000), names=st.sampled_from([0, None]))
def test_unknown_input_size_the_smaller_axis_is_the_row_width(a: int, extra: int, names: int | None) -> None:
    """Input size unknown (dynamic, no imgsz), class count unknown: anchors outnumber 4+nc, so the
    smaller of the two last axes is the row width: [1, a, b] with a < b is transposed to rows."""
    b = a + extra
    channels_first = resolve_format((1, a, b), names or 0, {}, (0, 0))
    channels_last = resolve_format((1, b, a), names or 0, {}, (0, 0))
    assert (channels_first.fmt.name, channels_first.transposed, channels_first.num_classes) == (
        "yolov8",
        True,
        a - 4,
    )
    assert (channels_last.fmt.name, channels_last.transposed, channels_last.num_classes) == (
        "yolov8",
        False,
        a - 4,
    )


def test_unknown_input_size_with_names_trusts_the_class_count() -> None:
    """With names, 4+nc decides even when it is the larger axis (a 1000-class head on 300 anchors)."""
    r = resolve_format((1, 1004, 300), 1000, {}, (0, 0))
    assert (r.fmt.name, r.transposed, r.num_classes) == ("yolov8", True, 1000)
    r = resolve_format((1, 300, 1004), 1000, {}, (0, 0))
    assert (r.fmt.name, r.transposed, r.num_classes) == ("yolov8", False, 1000)
    square = resolve_format((1, 84, 84), 0, {}, (0, 0))  # no way to tell: rows as given
    assert (square.transposed, square.num_classes) == (False, 80)


def test_quantize_calibration_and_bench_feed_rtdetr_its_stretched_input(tmp_path: Path) -> None:
    """Calibration ranges and bench timings come from the input the runtime really gives the model."""
    from edge_agent.tools.bench import _pipeline
    from edge_agent.tools.quantize import make_preprocess

    model = OnnxModel(make_rtdetr(tmp_path))
    img = bright_scene(64, 192, [(64, 16, 32)])
    runtime = np.array(Detector(model).prepare(img).blob)
    np.testing.assert_array_equal(make_preprocess(model)(img), runtime)
    np.testing.assert_array_equal(_pipeline(model, "detect")[0](img), runtime)
    letterboxed = make_preprocess(OnnxModel(make_format_detector(tmp_path / "v8.onnx", imgsz_hw=HW)))(img)
    assert not np.array_equal(letterboxed, runtime)  # the two preprocessings do differ on this image
