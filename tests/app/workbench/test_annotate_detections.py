"""``infer --save``'s detection labels: on a crowd (boxes side by side, one inside another) no label
covers another, every label is on the frame, and a label with no free place nearby is still drawn
by its box rather than dropped."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from edge_agent.app.workbench.annotate import _color, draw_detections, label_places
from edge_agent.core.vision.label_layout import overlap
from edge_agent.core.vision.results import Detection

W, H = 640, 480


def _on(r: tuple[int, int, int, int], w: int, h: int) -> bool:
    return min(r[0], r[1]) >= 0 and r[2] <= w and r[3] <= h


def _det(i: int, box: tuple[float, float, float, float]) -> Detection:
    return Detection(label="person", class_id=i, confidence=0.5 + i / 100, box=box)


def test_labels_of_boxes_side_by_side_do_not_overlap() -> None:
    dets = [_det(i, (100.0 + 12 * i, 100.0 + 3 * i, 180.0 + 12 * i, 300.0)) for i in range(6)]
    rects = [r for r, _ in label_places((W, H), dets, 0.53, 2)]
    assert len(rects) == 6
    assert not any(overlap(a, b) for a, b in itertools.combinations(rects, 2))
    assert rects[0][3] <= 100  # the first takes the usual place: just above its box


def test_a_box_at_the_top_edge_has_its_label_on_the_frame() -> None:
    ((r, _base),) = label_places((W, H), [_det(0, (620.0, 0.0, 700.0, 80.0))], 0.53, 2)
    assert _on(r, W, H)


def test_every_label_is_drawn_even_with_no_free_place() -> None:
    dets = [_det(i, (0.0, 0.0, 40.0, 20.0)) for i in range(40)]  # far more than fit by one small box
    img = draw_detections(np.zeros((60, 80, 3), np.uint8), dets)
    rects = [r for r, _ in label_places((80, 60), dets, 0.4, 1)]
    assert len(rects) == 40 and all(_on(r, 80, 60) for r in rects)
    assert img.any()


def test_each_label_keeps_its_colour_on_the_picture() -> None:
    dets = [_det(i, (200.0, 200.0, 300.0, 300.0)) for i in (1, 5, 9)]  # one box, three labels
    img = draw_detections(np.zeros((H, W, 3), np.uint8), dets)
    for (r, _), d in zip(label_places((W, H), dets, 0.53, 2), dets):
        patch = img[r[1] : r[3], r[0] : r[2]].reshape(-1, 3)
        share = (patch == np.array(_color(d.class_id), np.uint8)).all(axis=1).mean()
        assert share > 0.5, (d.class_id, share)  # not painted over by a later label


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, W - 1), st.integers(0, H - 1), st.integers(8, 200), st.integers(8, 200)),
        min_size=1,
        max_size=12,
    )
)
def test_labels_are_on_the_frame_and_apart_when_room_allows(boxes: list[tuple[int, int, int, int]]) -> None:
    dets = [_det(i, (x, y, min(W, x + bw), min(H, y + bh))) for i, (x, y, bw, bh) in enumerate(boxes)]
    rects = [r for r, _ in label_places((W, H), dets, 0.53, 2)]
    assert all(_on(r, W, H) for r in rects)
    if len(dets) <= 3:  # a 640x480 frame always has room for three labels near their boxes
        assert not any(overlap(a, b) for a, b in itertools.combinations(rects, 2))


def _near(px: np.ndarray, color: tuple[int, int, int]) -> bool:
    return bool(np.abs(px.astype(int) - np.array(color)).max() <= 12)


def test_a_box_is_outlined_in_its_class_colour_and_its_label_fills_exactly_its_rectangle() -> None:
    d = _det(2, (100.0, 150.0, 300.0, 400.0))
    img = draw_detections(np.zeros((H, W, 3), np.uint8), [d])
    color = _color(2)
    assert _near(img[300, 100], color) and _near(img[300, 300], color)  # left and right edges
    assert not img[300, 200].any()  # the inside is left as it was
    ((r, _),) = label_places((W, H), [d], max(0.4, min(H, W) / 900), max(1, round(min(H, W) / 300)))
    assert r[3] <= 150  # above the box
    assert _near(img[r[1], r[0]], color) and _near(img[r[3] - 1, r[2] - 1], color)
    assert not img[r[1] + 1, r[2]].any() and not img[r[1] + 1, r[2] + 1].any()  # nothing right of it
    assert (img[r[1] : r[3], r[0] : r[2]] == 0).all(axis=2).any()  # the text, in black, inside


def test_a_label_is_wider_than_its_text() -> None:
    import cv2

    d = _det(0, (100.0, 150.0, 300.0, 400.0))
    ((r, base),) = label_places((W, H), [d], 0.53, 2)
    (tw, th), b = cv2.getTextSize("person 0.50", cv2.FONT_HERSHEY_SIMPLEX, 0.53, 2)
    assert r[2] - r[0] > tw and r[3] - r[1] > th + b and base == b


def test_twelve_classes_get_twelve_colours() -> None:
    assert len({_color(c) for c in range(12)}) == 12
    assert _color(3) == _color(3 + 180)  # the hue wheel turns: a class keeps its colour


def test_with_no_free_place_a_label_sits_just_above_its_box() -> None:
    dets = [_det(i, (20.0, 40.0, 60.0, 59.0)) for i in range(60)]
    rects = [r for r, _ in label_places((80, 60), dets, 0.4, 1)]
    last = rects[-1]
    lw, lh = last[2] - last[0], last[3] - last[1]
    assert last == (
        min(20, 80 - lw),
        max(0, min(40 - lh, 60 - lh)),
        min(20, 80 - lw) + lw,
        max(0, min(40 - lh, 60 - lh)) + lh,
    )
