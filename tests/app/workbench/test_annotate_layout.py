"""The labels of an annotated frame (``infer --track --save``, the device page's live view) never
cover one another (issue 36: the line's running count was hidden behind track labels, the zone's
label under the line's). The scene puts a zone's corner by the line's end and track boxes just
where the old labels went; the checks are on the layout's rectangles and on the pixels: the digits
that change when a count changes are all still drawn when everything else is on the frame too."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from edge_agent.app.workbench.annotate_tracks import draw_tracks, layout
from edge_agent.core.config.schema import LineConfig, ZoneConfig
from edge_agent.core.vision.label_layout import overlap, place

W, H = 640, 360
LINE = LineConfig(name="door", points=[(0.30, 0.15), (0.30, 0.90)], in_side="right")
ZONE = ZoneConfig(name="queue", polygon=[(0.31, 0.17), (0.80, 0.17), (0.80, 0.60), (0.31, 0.60)])
# boxes whose labels went over the line's and the zone's, and one under the top-left legend
TRACKS = [
    (1, "person", (190.0, 62.0, 260.0, 200.0), 0.5),
    (2, "person", (200.0, 70.0, 280.0, 220.0), 0.5),
    (3, "car", (0.0, 20.0, 80.0, 150.0), 0.5),
    (4, "person", (150.0, 50.0, 230.0, 180.0), 0.5),
]
Track = tuple[int, str, tuple[float, float, float, float], float]


def totals(line_in: int = 3, entered: int = 5) -> dict[str, Any]:
    return {"lines": {"door": {"in": line_in, "out": 1}}, "zones": {"queue": {"entered": entered}}}


def render(
    tracks: Sequence[Track],
    zones: Sequence[ZoneConfig],
    lines: Sequence[LineConfig],
    tot: dict[str, Any],
    now: int = 2,
) -> np.ndarray:
    return draw_tracks(np.full((H, W, 3), 90, np.uint8), tracks, zones, lines, tot, {"queue": now})


def changed(a: np.ndarray, b: np.ndarray) -> int:
    """Pixels that differ: where the text that changed between the two renders is drawn."""
    return int(np.count_nonzero(np.any(a != b, axis=2)))


def test_no_label_covers_another_and_every_label_is_placed() -> None:
    labels = layout((W, H), 0.4, TRACKS, [ZONE], [LINE], totals(), {"queue": 2})
    kinds = [lb.kind for lb in labels]
    assert kinds == ["counts", "counts", "line", "zone", "track", "track", "track", "track"]
    assert [lb.text for lb in labels[:2]] == ["door: in 3 out 1", "queue: 2 now, 5 entered"]
    assert labels[0].rect[:2] == (0, 0)  # the legend: the reserved top-left corner
    for a, b in itertools.combinations(labels, 2):
        assert not overlap(a.rect, b.rect), (a, b)
    for lb in labels:
        x1, y1, x2, y2 = lb.rect
        assert 0 <= x1 < x2 <= W and 0 <= y1 < y2 <= H, lb


def test_the_counts_digits_are_all_drawn_with_the_tracks_the_zone_and_the_line_on_the_frame() -> None:
    # the line's count alone on the frame, then with the zone and the tracks: the same digits
    alone = changed(render([], [], [LINE], totals(3)), render([], [], [LINE], totals(8)))
    full = changed(render(TRACKS, [ZONE], [LINE], totals(3)), render(TRACKS, [ZONE], [LINE], totals(8)))
    assert alone > 0 and full == alone
    alone = changed(render([], [ZONE], [], totals(entered=5)), render([], [ZONE], [], totals(entered=6)))
    full = changed(
        render(TRACKS, [ZONE], [LINE], totals(entered=5)), render(TRACKS, [ZONE], [LINE], totals(entered=6))
    )
    assert alone > 0 and full == alone


def test_every_tracks_label_is_drawn_in_full_beside_the_counts() -> None:
    for i, (tid, label, box, _) in enumerate(TRACKS):
        others = TRACKS[:i] + TRACKS[i + 1 :]
        alone = changed(
            render([(tid, label, box, 0.5)], [], [], totals()),
            render([(tid, label, box, 0.9)], [], [], totals()),
        )
        full = changed(
            render([*others, (tid, label, box, 0.5)], [ZONE], [LINE], totals()),
            render([*others, (tid, label, box, 0.9)], [ZONE], [LINE], totals()),
        )
        assert alone > 0 and full == alone, tid


boxes = st.tuples(st.floats(0, W - 20), st.floats(0, H - 20), st.floats(10, 200), st.floats(10, 200)).map(
    lambda b: (b[0], b[1], b[0] + b[2], b[1] + b[3])
)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(boxes, max_size=25),
    st.tuples(st.floats(0, 1), st.floats(0, 1)),
    st.tuples(st.floats(0, 1), st.floats(0, 1)),
)
def test_any_scene_gives_labels_that_do_not_meet(
    bxs: list[tuple[float, float, float, float]], a: tuple[float, float], z: tuple[float, float]
) -> None:
    line = LineConfig(name="door", points=[a, (0.9, 0.9)])
    zone = ZoneConfig(name="queue", polygon=[z, (0.99, 0.01), (0.99, 0.99)])
    tracks = [(i + 1, "person", b, 0.5) for i, b in enumerate(bxs)]
    labels = layout((W, H), 0.4, tracks, [zone], [line], totals(), {})
    assert [lb.kind for lb in labels[:2]] == ["counts", "counts"]  # the counts are never left out
    for p, q in itertools.combinations(labels, 2):
        assert not overlap(p.rect, q.rect)


def test_place_takes_the_first_free_candidate_on_the_frame_or_none() -> None:
    assert place((100, 50), 20, 10, [(-5, -5)], []) == (0, 0, 20, 10)  # moved onto the frame
    assert place((100, 50), 20, 10, [(0, 0), (30, 0)], [(0, 0, 20, 10)]) == (30, 0, 50, 10)
    # the row above is off the frame (kept on it: the same place), so beside it
    assert place((100, 50), 20, 10, [(0, 0)], [(0, 0, 20, 10)]) == (20, 0, 40, 10)
    assert place((20, 50), 20, 10, [(0, 0)], [(0, 0, 20, 10)]) == (0, 10, 20, 20)  # else a row lower
    assert place((20, 10), 20, 10, [(0, 0)], [(0, 0, 20, 10)]) is None  # the frame is full
    assert not overlap((0, 0, 20, 10), (20, 0, 40, 10))  # touching rectangles do not meet
