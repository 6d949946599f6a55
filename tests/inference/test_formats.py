"""Every output format decodes to the same, hand-computed detections; anything else is refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from support.models import bright_scene, make_color_classifier, make_format_detector

from edge_agent.adapters.runtime.onnx_model import OnnxModel
from edge_agent.core.vision.formats import anchor_count, resolve_format
from edge_agent.errors import ModelError
from edge_agent.inference.pipeline import Detector, DetectorParams

# image 192 wide x 64 high into a model input 48 high x 96 wide: gain min(48/64, 96/192) = 0.5,
# content 96x32, 8 rows of padding on top. A white square at image (64..96, 16..48) lands on model
# (32..48, 16..32): four stride-8 cells scoring 1.0, whose boxes map back to tile the square exactly.
SQUARE = (64, 16, 32)
EXPECTED = np.array([[64, 16, 80, 32], [80, 16, 96, 32], [64, 32, 80, 48], [80, 32, 96, 48]], np.float32)


def _sorted(boxes: np.ndarray) -> np.ndarray:
    return boxes[np.lexsort((boxes[:, 0], boxes[:, 1]))]


@pytest.mark.parametrize("fmt", ["yolov8", "yolov8t", "yolov5", "end2end"])
def test_each_format_finds_the_square_at_its_true_place(format_models: dict[str, Path], fmt: str) -> None:
    det = Detector(OnnxModel(format_models[fmt]))
    assert det.format.fmt.name == ("yolov8" if fmt == "yolov8t" else fmt)
    out = det.detect(bright_scene(64, 192, [SQUARE])).detections
    assert len(out) == 4
    np.testing.assert_allclose(_sorted(out.boxes), EXPECTED, atol=1e-3)
    np.testing.assert_allclose(out.scores, 1.0, atol=1e-5)
    assert (out.class_ids == 0).all()


def test_formats_agree_on_a_busy_scene(format_models: dict[str, Path]) -> None:
    """Grey levels, partial cells, several squares: all formats give the YOLOv8 export's answer.
    (conf 0.5: the letterbox padding, 114/255 = 0.45, must not fill the end2end export's 10 slots)"""
    img = bright_scene(64, 192, [(8, 8, 40), (100, 30, 13)], (200, 90, 40))
    img[24:56, 120:170] = 170
    ref = (
        Detector(OnnxModel(format_models["yolov8"]), DetectorParams(conf_threshold=0.5))
        .detect(img)
        .detections
    )
    assert 4 <= len(ref) <= 10  # the end2end export returns its 10 best
    for fmt in ("yolov8t", "yolov5", "end2end"):
        got = (
            Detector(OnnxModel(format_models[fmt]), DetectorParams(conf_threshold=0.5)).detect(img).detections
        )
        order_r, order_g = np.lexsort(ref.boxes.T[::-1]), np.lexsort(got.boxes.T[::-1])
        np.testing.assert_allclose(got.boxes[order_g], ref.boxes[order_r], atol=1e-3, err_msg=fmt)
        np.testing.assert_allclose(got.scores[order_g], ref.scores[order_r], atol=1e-5, err_msg=fmt)


@pytest.mark.parametrize("fmt", ["yolov8", "yolov5", "end2end"])
def test_a_score_must_exceed_the_threshold(format_models: dict[str, Path], fmt: str) -> None:
    """Ultralytics keeps ``score > conf``: a cell scoring exactly conf is dropped, one ulp above kept."""
    img = np.zeros((64, 192, 3), np.uint8)
    img[16:32, 64:80] = 128  # one whole cell at 128/255
    probe = Detector(OnnxModel(format_models[fmt]), DetectorParams(conf_threshold=0.0))
    score = float(probe.detect(img).detections.scores.max())
    assert score == pytest.approx(128 / 255, abs=1e-3)
    at = Detector(OnnxModel(format_models[fmt]), DetectorParams(conf_threshold=score)).detect(img)
    below = np.nextafter(np.float32(score), np.float32(0))
    under = Detector(OnnxModel(format_models[fmt]), DetectorParams(conf_threshold=float(below))).detect(img)
    assert len(at.detections) == 0
    assert len(under.detections) == 1


def test_end2end_is_recognised_without_metadata_too(fmt_dir: Path) -> None:
    path = make_format_detector(fmt_dir / "e2e-nometa.onnx", "end2end", imgsz_hw=(48, 96), end2end_meta=False)
    det = Detector(OnnxModel(path))
    assert det.format.fmt.name == "end2end" and not det.format.fmt.nms


@pytest.mark.parametrize(
    ("shape", "names", "meta", "hw", "want"),
    [
        ((1, 84, 8400), 80, {}, (640, 640), ("yolov8", True, 80)),
        ((1, 8400, 84), 80, {}, (640, 640), ("yolov8", False, 80)),
        ((1, 84, 8400), 0, {}, (640, 640), ("yolov8", True, 80)),
        ((1, 5, 2100), 1, {}, (320, 320), ("yolov8", True, 1)),  # 1-class YOLO11n at 320
        ((1, 8400, 6), 0, {}, (640, 640), ("yolov8", False, 2)),  # 2 classes transposed, not end2end
        ((1, 25200, 85), 80, {}, (640, 640), ("yolov5", False, 80)),
        ((1, 25200, 85), 0, {}, (640, 640), ("yolov5", False, 80)),
        ((1, 25200, 6), 0, {}, (640, 640), ("yolov5", False, 1)),  # 1-class YOLOv5, not end2end
        ((1, 300, 6), 80, {"end2end": "True"}, (640, 640), ("end2end", False, 80)),
        ((1, 300, 6), 0, {}, (640, 640), ("end2end", False, None)),
        (("batch", 84, "anchors"), 80, {}, (640, 640), ("yolov8", True, 80)),
        ((1, "K", 6), 80, {}, (640, 640), ("end2end", False, 80)),  # ONNX NMS: K rows, dynamic
        ((1, 8400, 85), 80, {}, (640, 640), ("yolov5", False, 80)),  # one anchor per cell
        (("b", 7, "n"), 0, {}, (64, 64), ("yolov8", True, 3)),  # dynamic=True export, no names
        (("b", "n", 7), 0, {}, (64, 64), ("yolov8", False, 3)),  # the same, transposed
    ],
)
def test_format_table_from_shape_and_metadata(
    shape: tuple[object, ...], names: int, meta: dict[str, str], hw: tuple[int, int], want: tuple[object, ...]
) -> None:
    r = resolve_format(shape, names, meta, hw)
    assert (r.fmt.name, r.transposed, r.num_classes) == want


def test_anchor_counts() -> None:
    assert anchor_count((640, 640)) == 8400
    assert anchor_count((320, 320)) == 2100
    assert anchor_count((384, 640)) == 5040


@pytest.mark.parametrize("shape", [(1, 3), (1, 4, 4, 4), (1, 2, 3), (2, 84, 8400)])
def test_anything_else_is_one_line_naming_the_shape_and_the_understood_ones(shape: tuple[int, ...]) -> None:
    with pytest.raises(ModelError) as e:
        resolve_format(shape, 0, {}, (640, 640))
    msg = str(e.value)
    assert "\n" not in msg and str(list(shape)) in msg
    for name in ("yolov8", "yolov5", "end2end"):
        assert name in msg


def test_a_classifier_given_as_detector_is_refused_at_load(fmt_dir: Path) -> None:
    path = make_color_classifier(fmt_dir / "color.onnx")
    with pytest.raises(ModelError, match=r"output 'output0'.*\[.*3\].*understood"):
        Detector(OnnxModel(path))


@pytest.mark.shared
@pytest.mark.parametrize("fmt", ["yolov8t", "yolov5", "end2end"])
def test_the_real_yolov8n_in_every_format_gives_identical_detections(
    shared_dir: Path, tmp_path: Path, fmt: str
) -> None:
    """The shared YOLOv8n re-exported (in the graph) as transposed, YOLOv5-style and end2end with ONNX
    NonMaxSuppression: the same boxes, classes and scores as the original on the photos and crops."""
    import cv2
    from support.models import wrap_yolov8

    from edge_agent.core.vision.yolo import box_iou

    src = shared_dir / "models" / "yolov8n-coco-fp32.onnx"
    ref = Detector(OnnxModel(src))
    cand = Detector(OnnxModel(wrap_yolov8(src, tmp_path / f"{fmt}.onnx", fmt)))
    assert cand.format.fmt.name == ("yolov8" if fmt == "yolov8t" else fmt) and cand.format.num_classes == 80
    total = 0
    for name in ("bus.jpg", "zidane.jpg"):
        img = cv2.imread(str(shared_dir / "images" / name))
        h, w = img.shape[:2]
        for view in (img, img[:, ::-1].copy(), img[h // 6 :, w // 8 :].copy()):
            a, b = ref.detect(view).detections, cand.detect(view).detections
            assert len(a) == len(b) > 0
            iou = box_iou(a.boxes, b.boxes)
            j = iou.argmax(axis=1)
            assert (iou.max(axis=1) > 0.999).all() and (b.class_ids[j] == a.class_ids).all()
            np.testing.assert_allclose(b.scores[j], a.scores, atol=1e-5)
            total += len(a)
    assert total >= 20


def test_a_labels_file_of_the_wrong_length_is_warned_about(
    format_models: dict[str, Path], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    labels = tmp_path / "labels.txt"
    labels.write_text("a\nb\nc\n")
    det = Detector(OnnxModel(format_models["yolov8"], labels=labels))
    assert det.format.num_classes == 1
    assert "3 class names but the output has 1 classes" in caplog.text
