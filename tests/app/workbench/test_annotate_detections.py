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
