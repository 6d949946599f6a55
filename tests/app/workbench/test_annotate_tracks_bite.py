"""The tracks' drawing measured on its pixels (issue 36): strokes 2 px wide and anti-aliased, the
line's arrow 25 px long with a head 0.4 of it, the legend scaled with the frame but never below a
readable floor, and each label's text inside its black box. What a user sees on ``infer --track
--save`` and the live view, at the sizes they are drawn."""

from __future__ import annotations

from typing import Any, Literal

import cv2
import numpy as np
import numpy.typing as npt
import pytest

from edge_agent.app.workbench.annotate_tracks import FONT, _track_color, draw_tracks, layout
from edge_agent.core.config.schema import LineConfig, ZoneConfig

W, H = 640, 360
TOTALS = {"lines": {"door": {"in": 0, "out": 0}}, "zones": {"pen": {"entered": 0}}}
DOWN = LineConfig(name="door", points=[(0.5, 0.3), (0.5, 0.95)], in_side="right")


def black() -> npt.NDArray[np.uint8]:
    return np.zeros((H, W, 3), np.uint8)


def across(row: npt.NDArray[np.uint8], channel: int) -> float:
    """A stroke's width across ``row``: its summed coverage in one channel, in pixels."""
    return float(row[:, channel].astype(int).sum()) / 255


def test_a_lines_stroke_is_2_px_and_anti_aliased() -> None:
    img = draw_tracks(black(), [], [], [DOWN], TOTALS, {})
    # 2 px with smooth edges cover ~3.4 px of a row (1 px: ~1.3, 3 px: ~5.4)
    assert 2.5 < across(img[round(0.9 * (H - 1))], 0) < 4.5
    slanted = LineConfig(name="door", points=[(0.2, 0.3), (0.8, 0.9)])
    img = draw_tracks(black(), [], [], [slanted], TOTALS, {})
    stroke = img[round(0.8 * (H - 1)) - 40 : round(0.8 * (H - 1)) + 40, :, 0]
    assert len(np.unique(stroke)) > 8  # edge pixels part-covered, not a jagged on/off line


def test_the_arrow_is_25_px_long_with_a_head_of_a_tenth_of_that_each_side() -> None:
    img = draw_tracks(black(), [], [], [DOWN], TOTALS, {})
    x = round(0.5 * (W - 1))
    my = round((0.3 + 0.95) / 2 * (H - 1))
    region = img[my - 20 : my + 21, x - 45 : x - 2, 0] > 128  # left of the line: the in side
    ys, xs = np.nonzero(region)
    tip = x - 45 + int(xs.min())
    assert x - 27 <= tip <= x - 24  # the shaft: 25 px from the middle
    # the head: 0.4 x 25 = 10 px arms at 45 degrees, about 8 px above and below the shaft
    half = (int(ys.max()) - int(ys.min())) / 2
    assert 7 <= half <= 9
    right = img[my - 20 : my + 21, x + 3 : x + 45, 0]
    assert not right.any()  # nothing on the out side


def test_a_zone_outline_and_a_track_box_are_2_px() -> None:
    zone = ZoneConfig(name="pen", polygon=[(0.5, 0.5), (0.9, 0.5), (0.9, 0.9), (0.5, 0.9)])
    img = draw_tracks(black(), [], [zone], [], TOTALS, {"pen": 0})
    row = img[round(0.7 * (H - 1))].astype(int)
    edge = row[round(0.9 * (W - 1)) - 8 : round(0.9 * (W - 1)) + 8]
    inside = round(0.25 * 255)  # the shade a quarter of ZONE_BGR's 255 red
    assert 2.0 < float(np.clip(edge[:, 2] - inside, 0, None).sum()) / (255 - inside) < 4.5
    tid = 3
    color = _track_color(tid)
    ch = int(np.argmax(color))
    img = draw_tracks(black(), [(tid, "person", (100.0, 80.0, 300.0, 330.0), 0.9)], [], [], TOTALS, {})
    width = float(img[200, 90:110, ch].astype(int).sum()) / color[ch]
    assert 2.5 < width < 4.5


def _box(img: npt.NDArray[np.uint8]) -> tuple[int, int]:
    """The legend's black box at the top left of a grey frame: (width, height)."""
    return int(np.argmax(img[1, :, 0] != 0)), int(np.argmax(img[:, 1, 0] != 0))


def _text_box(text: str, scale: float) -> tuple[int, int]:
    (tw, th), base = cv2.getTextSize(text, FONT, scale, max(1, int(scale * 2)))
    return tw + 4, th + base + 4


def test_the_legend_grows_with_the_frame_but_not_below_a_readable_floor() -> None:
    text = "door: in 0 out 0"
    sizes = {}
    for w, h in ((1920, 1080), (640, 360), (320, 180), (160, 90)):
        img = draw_tracks(np.full((h, w, 3), 100, np.uint8), [], [], [DOWN], TOTALS, {})
        sizes[h] = _box(img)
    assert sizes[1080] == _text_box(text, 1080 / 900)
    assert sizes[360] == _text_box(text, 0.4)
    assert sizes[180] == sizes[90] == _text_box(text, 0.35)  # the floor, ~10 px text
    assert sizes[1080][1] > sizes[360][1] > sizes[180][1]


def test_each_labels_text_sits_inside_its_box_with_a_margin() -> None:
    tracks = [(5, "person", (200.0, 150.0, 320.0, 330.0), 0.87)]
    grey = np.full((H, W, 3), 100, np.uint8)
    img = draw_tracks(grey, tracks, [], [DOWN], TOTALS, {})
    labels = layout((W, H), 0.4, tracks, [], [DOWN], TOTALS, {})
    assert [lb.kind for lb in labels] == ["counts", "line", "track"]
    for lb in labels:
        x1, y1, x2, y2 = lb.rect
        patch = img[y1:y2, x1:x2].astype(int).max(axis=2)
        ring = np.concatenate([patch[0], patch[-1], patch[:, 0], patch[:, -1]])
        assert not ring.any(), lb.text  # a 1 px black margin all round: no glyph touches the edge
        lit_rows = np.nonzero(patch.max(axis=1) > 60)[0]
        lit_cols = np.nonzero(patch.max(axis=0) > 60)[0]
        # the text fills its box but for the 2 px margins (and the baseline's space below)
        assert lit_cols.min() <= 3 and lit_cols.max() >= patch.shape[1] - 4, lb.text
        assert lit_rows.min() <= 4 and lit_rows.max() >= patch.shape[0] // 2, lb.text
        # at this size the glyphs start right at the 2 px margin _size reserves on the left
        assert lit_cols.min() == 2 and patch.shape[1] - 1 - lit_cols.max() in (2, 3), lb.text


def test_a_line_or_zone_the_counts_do_not_know_yet_reads_zero() -> None:
    """A line or zone drawn before its counters exist (or with some missing) shows 0, not a crash."""
    zone = ZoneConfig(name="pen", polygon=[(0.5, 0.5), (0.9, 0.5), (0.9, 0.9)])
    unknown: list[dict[str, Any]] = [
        {"lines": {}, "zones": {}},
        {"lines": {"door": {}}, "zones": {"pen": {}}},
    ]
    for tot in unknown:
        labels = layout((W, H), 0.4, [], [zone], [DOWN], tot, {})
        assert [lb.text for lb in labels if lb.kind == "counts"] == [
            "door: in 0 out 0",
            "pen: 0 now, 0 entered",
        ]
    tot = {"lines": {"door": {"out": 4}}, "zones": {"pen": {"entered": 2}}}
    labels = layout((W, H), 0.4, [], [zone], [DOWN], tot, {"pen": 1})
    assert [lb.text for lb in labels if lb.kind == "counts"] == ["door: in 0 out 4", "pen: 1 now, 2 entered"]


def _rect(x: int, y: int, text: str) -> tuple[int, int, int, int]:
    tw, th = _text_box(text, 0.4)
    return x, y, x + tw, y + th


def test_a_name_sits_by_its_first_point_in_the_first_free_of_four_places() -> None:
    """Above right of the point, else below right, above left, below left: four lines (then four
    zones) starting at one point take the four places in turn, 4 px beside and 2 px off it."""
    p = (0.5, 0.75)  # (320, 269) on 640 x 360: x = round(0.5 * 639), y = round(0.75 * 359)
    x, y = 320, 269
    names = ["door", "gate", "exit", "ramp"]

    def places() -> list[tuple[int, int, int, int]]:
        th = _text_box("door", 0.4)[1]
        return [
            _rect(x + 4, y - th - 2, names[0]),
            _rect(x + 4, y + 2, names[1]),
            _rect(x - _text_box(names[2], 0.4)[0] - 4, y - th - 2, names[2]),
            _rect(x - _text_box(names[3], 0.4)[0] - 4, y + 2, names[3]),
        ]

    lines = [LineConfig(name=n, points=[p, (0.1 + 0.2 * i, 0.1)]) for i, n in enumerate(names)]
    labels = layout((W, H), 0.4, [], [], lines, {"lines": {}, "zones": {}}, {})
    assert [lb.rect for lb in labels if lb.kind == "line"] == places()
    zones = [ZoneConfig(name=n, polygon=[p, (0.9, 0.1 + 0.2 * i), (0.95, 0.9)]) for i, n in enumerate(names)]
    labels = layout((W, H), 0.4, [], zones, [], {"lines": {}, "zones": {}}, {})
    assert [lb.rect for lb in labels if lb.kind == "zone"] == places()


def test_a_tracks_label_goes_above_its_box_else_inside_below_or_at_the_right() -> None:
    """Five tracks on one box (a crowd): above the top left corner, inside it, below the bottom
    left, then above and below the right end; the first alone takes the first place."""
    box = (150.0, 120.0, 500.0, 250.0)
    tracks = [(tid, "person", box, 0.5) for tid in range(1, 6)]
    tot: dict[str, Any] = {"lines": {}, "zones": {}}
    text = "#1 person 0.50"
    tw, th = _text_box(text, 0.4)
    assert [lb.rect for lb in layout((W, H), 0.4, tracks[:1], [], [], tot, {})] == [
        _rect(150, 120 - th, text)
    ]
    got = [lb.rect for lb in layout((W, H), 0.4, tracks, [], [], tot, {})]
    assert got == [
        _rect(150, 120 - th, text),
        _rect(150, 120, text),
        _rect(150, 250, text),
        _rect(500 - tw, 120 - th, text),
        _rect(500 - tw, 250, text),
    ]


def test_outside_its_zones_the_frame_is_unchanged_and_a_zone_blends_a_quarter() -> None:
    zone = ZoneConfig(name="pen", polygon=[(0.5, 0.5), (0.9, 0.5), (0.9, 0.9), (0.5, 0.9)])
    grey = np.full((H, W, 3), 100, np.uint8)
    img = draw_tracks(grey, [], [zone], [], TOTALS, {"pen": 0})
    assert (img[200:320, 20:300] == 100).all()  # left of the zone, below the legend
    inside = img[round(0.7 * (H - 1)), round(0.7 * (W - 1))].astype(int)
    assert np.abs(inside - [round(0.25 * c + 0.75 * 100) for c in (0, 200, 255)]).max() <= 1


def test_a_zones_outline_is_closed_and_anti_aliased() -> None:
    """The side from the last point back to the first is drawn too; slanted sides are smooth."""
    zone = ZoneConfig(name="pen", polygon=[(0.5, 0.5), (0.9, 0.5), (0.9, 0.9), (0.5, 0.9)])
    img = draw_tracks(black(), [], [zone], [], TOTALS, {"pen": 0})
    left = img[round(0.6 * (H - 1)) : round(0.8 * (H - 1)), round(0.5 * (W - 1)), 2]
    assert (left == 255).all()  # the closing side at full red
    tri = ZoneConfig(name="pen", polygon=[(0.3, 0.4), (0.9, 0.5), (0.6, 0.95)])
    img = draw_tracks(black(), [], [tri], [], TOTALS, {"pen": 0})
    assert len(np.unique(img[200:330, 200:600, 2])) > 8


@pytest.mark.parametrize(("side", "sign"), [("right", 1), ("left", -1)])
def test_a_level_lines_arrow_is_25_px_straight_down_or_up(side: Literal["left", "right"], sign: int) -> None:
    """a -> b left to right: its right is down the image. Drawn from the middle, 25 px (and 1 px
    of smoothing) at right angles to the line, on the in side only, anti-aliased."""
    ln = LineConfig(name="door", points=[(0.2, 0.5), (0.8, 0.5)], in_side=side)
    img = draw_tracks(black(), [], [], [ln], TOTALS, {})
    mx, my = 319, 180  # between (128, 180) and (511, 180)
    column = img[:, mx - 15 : mx + 16, 0]
    lit = np.nonzero(column.max(axis=1) > 128)[0]
    reach = int(lit.max()) - my if sign > 0 else my - int(lit.min())
    assert 25 <= reach <= 26
    other = column[my - 30 : my - 2] if sign > 0 else column[my + 3 : my + 31]
    assert not other.any()  # nothing on the out side
    shaft = img[my + sign * 10, mx - 30 : mx + 31, 0]
    assert set(np.nonzero(shaft > 128)[0]) <= {29, 30, 31}  # straight (at mx), not slanted
    head = img[my + sign * 16 : my + sign * 26 : sign, mx - 12 : mx + 13, 0]
    assert len(np.unique(head)) > 8  # the head's slanted arms are smooth


def test_a_tracks_box_and_a_labels_text_are_anti_aliased() -> None:
    tracks = [(3, "person", (100.0, 80.0, 300.0, 330.0), 0.9)]
    color = _track_color(3)
    ch = int(np.argmax(color))
    img = draw_tracks(black(), tracks, [], [], TOTALS, {})
    edge = img[200, 90:110, ch]
    assert ((edge > 0) & (edge < color[ch] - 20)).any()  # part-covered pixels beside the stroke
    (lb,) = [lb for lb in layout((W, H), 0.4, tracks, [], [], TOTALS, {}) if lb.kind == "track"]
    x1, y1, x2, y2 = lb.rect
    assert len(np.unique(img[y1:y2, x1:x2, ch])) > 8  # glyph edges in many shades


def test_a_line_one_pixel_long_on_a_thumbnail_still_gets_its_whole_arrow() -> None:
    """(0.5, 0.5) -> (0.5, 0.51) on 160 x 90 is (80, 44) -> (80, 45): one pixel, and its in side
    still shown by the full 25 px arrow, to the left (the right of a -> b going down)."""
    ln = LineConfig(name="door", points=[(0.5, 0.5), (0.5, 0.51)], in_side="right")
    img = draw_tracks(np.zeros((90, 160, 3), np.uint8), [], [], [ln], TOTALS, {})
    band = img[43:47, 40:80, 0]
    left = 40 + int(np.nonzero(band.max(axis=0) > 128)[0].min())
    assert 80 - 27 <= left <= 80 - 24  # 25 px and the stroke's smoothed end (a 12 px arrow: ~65)
