"""YOLO decode and NMS against hand-built outputs."""

from __future__ import annotations

import numpy as np
import pytest

from edge_agent.core.vision.defaults import CONF_THRESHOLD, IOU_THRESHOLD, MAX_DET
from edge_agent.core.vision.formats import decode_output, resolve_format
from edge_agent.core.vision.preprocess import Letterbox, letterbox
from edge_agent.core.vision.yolo import Detections, box_iou, nms, nms_cv2
from edge_agent.errors import ModelError


def decode(
    out: np.ndarray,
    lb: Letterbox,
    conf_threshold: float = CONF_THRESHOLD,
    iou_threshold: float = IOU_THRESHOLD,
    max_det: int = MAX_DET,
    classes: list[int] | None = None,
    num_classes: int | None = None,
) -> Detections:
    """The YOLOv8 path of the inference layer (format from the shape, as a model's would be)."""
    fmt = resolve_format(out.shape, num_classes or 0, {}, (0, 0))
    return decode_output(out, fmt, lb, conf_threshold, iou_threshold, max_det, classes)[0]


def _output(rows: list[tuple[float, float, float, float, list[float]]]) -> np.ndarray:
    """[1, 4+nc, N] from (cx, cy, w, h, class scores) rows."""
    cols = [[cx, cy, w, h, *scores] for cx, cy, w, h, scores in rows]
    return np.asarray(cols, np.float32).T[None]


IDENTITY = Letterbox(1.0, 1.0, 0, 0, 1000, 1000)


@pytest.mark.arm_smoke
def test_decode_maps_back_through_letterbox() -> None:
    # original w=200, h=100 letterboxed into 64x64: scale 0.32, 16 px padding on top
    _, lb = letterbox(np.zeros((100, 200, 3), np.uint8), (64, 64))
    out = _output([(32, 32, 32, 16, [0.9, 0.1])])
    d = decode(out, lb, conf_threshold=0.25, num_classes=2)
    assert len(d) == 1 and d.class_ids.tolist() == [0]
    # model box (16,24)-(48,40) -> ((16-0)/.32, (24-16)/.32, 48/.32, (40-16)/.32)
    assert d.boxes[0] == pytest.approx([50, 25, 150, 75], abs=1e-3)
    assert d.scores[0] == pytest.approx(0.9)


def test_transposed_layout_gives_the_same_result() -> None:
    out = _output([(100, 100, 50, 50, [0.2, 0.8, 0.0]), (400, 300, 80, 40, [0.7, 0.0, 0.1])])
    a = decode(out, IDENTITY, num_classes=3)
    b = decode(np.ascontiguousarray(out.transpose(0, 2, 1)), IDENTITY, num_classes=3)
    assert a.class_ids.tolist() == b.class_ids.tolist() == [1, 0]
    assert np.allclose(a.boxes, b.boxes) and np.allclose(a.scores, b.scores)


def test_threshold_nms_is_class_aware_and_max_det() -> None:
    out = _output(
        [
            (100, 100, 50, 50, [0.9, 0.0]),
            (102, 101, 50, 50, [0.8, 0.0]),  # same class, IoU ~0.9 -> suppressed
            (101, 100, 50, 50, [0.0, 0.7]),  # other class, same place -> kept
            (500, 500, 20, 20, [0.2, 0.1]),  # below threshold
            (800, 800, 20, 20, [0.6, 0.0]),
        ]
    )
    d = decode(out, IDENTITY, conf_threshold=0.25, iou_threshold=0.45, num_classes=2)
    assert d.scores.tolist() == pytest.approx([0.9, 0.7, 0.6])
    assert d.class_ids.tolist() == [0, 1, 0]
    assert len(decode(out, IDENTITY, max_det=2, num_classes=2)) == 2
    only1 = decode(out, IDENTITY, classes=[1], num_classes=2)
    assert only1.class_ids.tolist() == [1]


def test_boxes_are_clipped_to_the_image() -> None:
    out = _output([(5, 5, 40, 40, [0.9])])
    d = decode(out, Letterbox(1.0, 1.0, 0, 0, 30, 20), num_classes=1)
    assert d.boxes[0].tolist() == pytest.approx([0, 0, 25, 20])


def test_empty_and_layout_errors() -> None:
    assert len(decode(_output([(5, 5, 4, 4, [0.1])]), IDENTITY, num_classes=1)) == 0
    with pytest.raises(ModelError, match=r"shape \[1, 2, 3, 4\]"):
        decode(np.zeros((1, 2, 3, 4), np.float32), IDENTITY)
    # input size unknown: the smaller of the two last dims is 4+nc
    assert resolve_format((1, 84, 8400), 0, {}, (0, 0)).transposed
    assert not resolve_format((1, 8400, 84), 0, {}, (0, 0)).transposed
    assert resolve_format((1, 84, 8400), 80, {}, (0, 0)).transposed
    with pytest.raises(ModelError, match=r"shape \[1, 1000\]"):
        resolve_format((1, 1000), 0, {}, (0, 0))


def test_numpy_nms_matches_opencv_nms_on_random_boxes() -> None:
    rng = np.random.default_rng(3)
    xy = rng.uniform(0, 500, (300, 2)).astype(np.float32)
    wh = rng.uniform(10, 120, (300, 2)).astype(np.float32)
    boxes = np.concatenate([xy, xy + wh], axis=1)
    scores = rng.uniform(0, 1, 300).astype(np.float32)
    cls = rng.integers(0, 4, 300)
    a = nms(boxes, scores, cls, 0.45)
    b = nms_cv2(boxes, scores, cls, 0.45)
    assert a.tolist() == b.tolist()
    assert 0 < len(a) < 300


def test_box_iou_hand_computed() -> None:
    a = np.array([[0, 0, 10, 10]], np.float32)
    b = np.array([[5, 5, 15, 15], [20, 20, 30, 30], [0, 0, 10, 10]], np.float32)
    assert box_iou(a, b)[0].tolist() == pytest.approx([25 / 175, 0.0, 1.0])


def test_boxes_wholly_in_the_padding_are_dropped() -> None:
    # original 200x100 -> 64x64 with 16 px padding on top: a box in rows 0..12 is padding only
    _, lb = letterbox(np.zeros((100, 200, 3), np.uint8), (64, 64))
    out = _output([(20, 6, 8, 8, [0.9]), (20, 30, 8, 8, [0.8])])
    d = decode(out, lb, num_classes=1)
    assert d.scores.tolist() == pytest.approx([0.8])
