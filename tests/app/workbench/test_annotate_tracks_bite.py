"""The tracks' drawing measured on its pixels (issue 36): strokes 2 px wide and anti-aliased, the
line's arrow 25 px long with a head 0.4 of it, the legend scaled with the frame but never below a
readable floor, and each label's text inside its black box. What a user sees on ``infer --track
--save`` and the live view, at the sizes they are drawn."""

from __future__ import annotations

import cv2
import numpy as np
import numpy.typing as npt

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
