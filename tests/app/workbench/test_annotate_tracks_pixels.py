"""What ``infer --track --save`` and the live view draw, checked on the pixels of a black frame: a
zone shaded a quarter of its colour and outlined, a line with its arrow pointing to the "in" side
(``in_side`` decides, as the counting does), each track's box in the track's own colour, and each
label as its colour's text on black."""

from __future__ import annotations

import numpy as np
import pytest

from edge_agent.app.workbench.annotate_tracks import LINE_BGR, ZONE_BGR, _track_color, draw_tracks, layout
from edge_agent.core.config.schema import LineConfig, ZoneConfig

W, H = 640, 360
ZONE = ZoneConfig(name="queue", polygon=[(0.5, 0.5), (0.9, 0.5), (0.9, 0.9), (0.5, 0.9)])
TOTALS = {"lines": {"door": {"in": 3, "out": 1}}, "zones": {"queue": {"entered": 5}}}


def _near(px: np.ndarray, color: tuple[int, ...], tol: int = 12) -> bool:
    return bool(np.abs(px.astype(int) - np.array(color)).max() <= tol)


def _line(side: str) -> LineConfig:
    return LineConfig(name="door", points=[(0.25, 0.2), (0.25, 0.9)], in_side=side)


def test_a_zone_is_shaded_a_quarter_of_its_colour_and_outlined() -> None:
    img = draw_tracks(np.zeros((H, W, 3), np.uint8), [], [ZONE], [], TOTALS, {"queue": 1})
    inside = img[int(0.75 * (H - 1)), int(0.7 * (W - 1))]
    assert _near(inside, tuple(round(0.25 * c) for c in ZONE_BGR), 2)
    x = round(0.9 * (W - 1))
    assert _near(img[int(0.7 * (H - 1)), x], ZONE_BGR)  # the right edge, at full colour
    assert not img[int(0.3 * (H - 1)), int(0.7 * (W - 1))].any()  # outside: untouched


@pytest.mark.parametrize(("side", "towards"), [("right", -1), ("left", 1)])
def test_the_lines_arrow_points_to_its_in_side(side: str, towards: int) -> None:
    """a -> b runs down the frame; its right, seen walking that way, is the image's left."""
    img = draw_tracks(np.zeros((H, W, 3), np.uint8), [], [], [_line(side)], TOTALS, {})
    x = round(0.25 * (W - 1))
    assert _near(img[round(0.35 * (H - 1)), x], LINE_BGR)  # the line itself
    my = round((0.2 + 0.9) / 2 * (H - 1))
    assert _near(img[my, x + towards * 12], LINE_BGR)  # the arrow's shaft on the in side
    assert not img[my, x - towards * 12].any()  # and nothing on the other


def test_each_track_is_boxed_in_its_own_colour_with_its_label_in_that_colour_on_black() -> None:
    tracks = [(3, "person", (100.0, 120.0, 180.0, 300.0), 0.8), (7, "car", (400.0, 60.0, 560.0, 160.0), 0.6)]
    img = draw_tracks(np.zeros((H, W, 3), np.uint8), tracks, [], [], TOTALS, {})
    assert _near(img[200, 100], _track_color(3)) and _near(img[100, 560], _track_color(7))
    labels = [lb for lb in layout((W, H), 0.4, tracks, [], [], TOTALS, {}) if lb.kind == "track"]
    assert [lb.text for lb in labels] == ["#3 person 0.80", "#7 car 0.60"]
    for lb, tid in zip(labels, (3, 7)):
        x1, y1, x2, y2 = lb.rect
        patch = img[y1:y2, x1:x2].reshape(-1, 3)
        assert not img[y1, x1].any() and not img[y2 - 1, x2 - 1].any()  # black background
        assert (np.abs(patch.astype(int) - np.array(_track_color(tid))).max(axis=1) <= 12).sum() > 20


def test_track_colours_differ_for_twelve_ids_and_repeat_round_the_hue_wheel() -> None:
    assert len({_track_color(t) for t in range(1, 13)}) == 12
    assert _track_color(5) == _track_color(5 + 180)
