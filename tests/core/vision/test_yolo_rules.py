"""NMS and IoU against textbook implementations (hypothesis), and the edge cases a user meets:
one detection, equal scores, an IoU exactly at the threshold, sub-pixel and inverted boxes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edge_agent.core.vision.preprocess import Letterbox
from edge_agent.core.vision.yolo import Detections, box_iou, nms, nms_cv2, scale_boxes


def ref_iou(a: list[float], b: list[float]) -> float:
    """Overlap area / union area; a box with x2 < x1 (or y2 < y1) has no area."""
    iw = max(min(a[2], b[2]) - max(a[0], b[0]), 0.0)
    ih = max(min(a[3], b[3]) - max(a[1], b[1]), 0.0)
    inter = iw * ih
    area = lambda r: max(r[2] - r[0], 0.0) * max(r[3] - r[1], 0.0)  # noqa: E731
    union = area(a) + area(b) - inter
    return inter / union if union > 0 else 0.0


def ref_nms(boxes: np.ndarray, scores: np.ndarray, classes: np.ndarray, thr: float) -> list[int]:
    """Greedy NMS per class, best score first (ties: the earlier box), suppressing IoU > thr."""
    order = sorted(range(len(scores)), key=lambda i: (-float(scores[i]), i))
    keep: list[int] = []
    for i in order:
        if all(classes[k] != classes[i] or ref_iou(list(boxes[k]), list(boxes[i])) <= thr for k in keep):
            keep.append(i)
    return keep


coord = st.floats(0, 64, allow_nan=False).map(lambda v: round(v * 4) / 4)  # quarter pixels
box_st = st.tuples(coord, coord, st.floats(0.25, 40).map(lambda v: round(v * 4) / 4), st.floats(0.25, 40))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(box_st, st.sampled_from([0.9, 0.8, 0.5, 0.3]), st.integers(0, 2)), max_size=25),
    st.sampled_from([0.0, 0.3, 0.5, 0.7]),
)
def test_nms_is_textbook_greedy_nms(rows: list, thr: float) -> None:
    boxes = np.array([[x, y, x + w, y + h] for (x, y, w, h), _, _ in rows], np.float32).reshape(-1, 4)
    scores = np.array([s for _, s, _ in rows], np.float32)
    classes = np.array([c for _, _, c in rows], np.int64)
    got = nms(boxes, scores, classes, thr)
    assert got.dtype == np.int64
    assert got.tolist() == ref_nms(boxes, scores, classes, thr)


def test_nms_keeps_a_box_whose_iou_is_exactly_the_threshold() -> None:
    boxes = np.array([[0, 0, 2, 1], [0, 0, 1, 1]], np.float32)  # IoU 1/2 exactly
    for f in (nms, nms_cv2):
        assert f(boxes, np.array([0.9, 0.8], np.float32), np.zeros(2, np.int64), 0.5).tolist() == [0, 1]
        assert f(boxes, np.array([0.9, 0.8], np.float32), np.zeros(2, np.int64), 0.49).tolist() == [0]


def test_sub_pixel_boxes_are_suppressed_by_their_real_overlap() -> None:
    """Boxes under one pixel (a far object on a small input): IoU 0.25/0.75 = 1/3 suppresses at 0.3."""
    boxes = np.array([[0, 0, 0.5, 1.0], [0.25, 0, 0.75, 1.0]], np.float32)
    s, c = np.array([0.9, 0.8], np.float32), np.zeros(2, np.int64)
    assert nms(boxes, s, c, 0.3).tolist() == [0] and nms(boxes, s, c, 0.34).tolist() == [0, 1]
    thin = np.array([[0, 0, 10, 0.5], [0, 0.25, 10, 0.75]], np.float32)
    assert nms(thin, s, c, 0.3).tolist() == [0] and nms(thin, s, c, 0.34).tolist() == [0, 1]


def test_the_same_box_in_two_classes_is_kept_twice_whatever_the_coordinates() -> None:
    big = np.array([[0, 0, 1000, 1000], [0, 0, 1000, 1000], [999, 999, 1000, 1000]], np.float32)
    s = np.array([0.9, 0.8, 0.7], np.float32)
    for f in (nms, nms_cv2):
        assert f(big, s, np.array([0, 1, 2], np.int64), 0.0).tolist() == [0, 1, 2]


def test_one_detection_and_none() -> None:
    one = np.array([[1, 2, 3, 4]], np.float32)
    for f in (nms, nms_cv2):
        got = f(one, np.array([0.5], np.float32), np.array([3], np.int64), 0.5)
        assert got.tolist() == [0] and got.dtype == np.int64
        none = f(np.zeros((0, 4), np.float32), np.zeros(0, np.float32), np.zeros(0, np.int64), 0.5)
        assert none.shape == (0,) and none.dtype == np.int64


def test_equal_scores_keep_the_input_order() -> None:
    """Detections with equal scores (a quantized model gives many) come back in the order the
    model listed them, the same on every run and board."""
    rng = np.random.default_rng(0)
    n = 300
    xy = rng.uniform(0, 5000, (n, 2)).astype(np.float32)
    boxes = np.concatenate([xy, xy + 5], 1)  # apart: nothing suppressed
    scores = rng.choice(np.array([0.5, 0.75, 0.25], np.float32), n)
    expect = sorted(range(n), key=lambda i: (-float(scores[i]), i))
    for f in (nms, nms_cv2):
        assert f(boxes, scores, np.zeros(n, np.int64), 0.5).tolist() == expect


@settings(max_examples=200, deadline=None)
@given(st.lists(box_st, min_size=1, max_size=6), st.lists(box_st, min_size=1, max_size=6), st.booleans())
def test_box_iou_is_overlap_over_union(a: list, b: list, flip: bool) -> None:
    def xyxy(r: tuple) -> list[float]:
        x, y, w, h = r
        return [x + w, y + h, x, y] if flip else [x, y, x + w, y + h]  # flipped: no area

    A, B = [xyxy(r) for r in a], [xyxy(r) for r in b]
    got = box_iou(np.array(A, np.float64), np.array(B, np.float64))
    assert got.dtype == np.float32 and got.shape == (len(A), len(B))
    want = [[ref_iou(p, q) for q in B] for p in A]
    assert got.tolist() == [pytest.approx(row, abs=1e-5) for row in want]


def test_box_iou_of_sub_pixel_boxes() -> None:
    a = np.array([[0, 0, 0.5, 0.5]], np.float32)
    assert box_iou(a, np.array([[0, 0, 0.5, 0.25], [0, 0, 0.5, 0.5]], np.float32)).tolist() == [[0.5, 1.0]]


def test_empty_detections_have_the_shapes_and_types_of_full_ones() -> None:
    d = Detections.empty()
    assert len(d) == 0
    assert (d.boxes.shape, d.boxes.dtype) == ((0, 4), np.float32)
    assert (d.scores.shape, d.scores.dtype) == ((0,), np.float32)
    assert (d.class_ids.shape, d.class_ids.dtype) == ((0,), np.int64)


def test_boxes_map_back_through_padding_and_are_clipped_to_the_image() -> None:
    lb = Letterbox(0.5, 0.25, 10, 20, 100, 300)
    boxes = np.array([[10, 20, 40, 50], [0, 0, 200, 200]], np.float32)
    out = scale_boxes(boxes, lb)
    assert out.dtype == np.float32
    assert out.tolist() == [[0.0, 0.0, 60.0, 120.0], [0.0, 0.0, 100.0, 300.0]]
