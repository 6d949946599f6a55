"""Draw tracks, zones, counting lines and the running counts on a frame (``infer --track --save``,
the device page's live view).

So a user can check a zone/line configuration by eye on their own footage before deploying it.
"""

from __future__ import annotations

from typing import Any, List, Mapping, Sequence, Tuple

import cv2
import numpy as np
import numpy.typing as npt

from edge_agent.core.config.schema import LineConfig, ZoneConfig
from edge_agent.core.vision.label_layout import BGR, Label, place, stack

Image = npt.NDArray[np.uint8]
ZONE_BGR = (0, 200, 255)
LINE_BGR = (255, 0, 255)
FONT = cv2.FONT_HERSHEY_SIMPLEX
TrackRow = Tuple[int, str, Sequence[float], float]


def _track_color(track_id: int) -> Tuple[int, int, int]:
    hue = (track_id * 37) % 180  # a stable colour per id, well spread
    bgr = cv2.cvtColor(np.array([[[hue, 230, 240]]], dtype=np.uint8), cv2.COLOR_HSV2BGR)[0, 0]
    return int(bgr[0]), int(bgr[1]), int(bgr[2])


def _px(p: Sequence[float], w: int, h: int) -> Tuple[int, int]:
    return int(round(p[0] * (w - 1))), int(round(p[1] * (h - 1)))


def _thick(scale: float) -> int:
    return max(1, int(scale * 2))


def _size(text: str, scale: float) -> Tuple[int, int]:
    """The label's background: the text with 2 px all round."""
    (tw, th), base = cv2.getTextSize(text, FONT, scale, _thick(scale))
    return tw + 4, th + base + 4


def layout(
    size: Tuple[int, int],
    scale: float,
    tracks: Sequence[TrackRow],
    zones: Sequence[ZoneConfig],
    lines: Sequence[LineConfig],
    totals: Mapping[str, Any],
    occupancy: Mapping[str, int],
) -> List[Label]:
    """Every label of the frame (``size`` = width, height), none over another: the counts legend
    first, then the line and zone names at their first points, then the tracks' labels in id order
    (a stable order, so a label keeps its place from frame to frame)."""
    w, h = size
    rows: List[Tuple[str, BGR]] = []
    for ln in lines:
        c = totals["lines"].get(ln.name, {})
        rows.append((f"{ln.name}: in {c.get('in', 0)} out {c.get('out', 0)}", LINE_BGR))
    for z in zones:
        entered = totals["zones"].get(z.name, {}).get("entered", 0)
        rows.append((f"{z.name}: {occupancy.get(z.name, 0)} now, {entered} entered", ZONE_BGR))
    sizes = [_size(t, scale) for t, _ in rows]
    width = max((s[0] for s in sizes), default=0)  # one column: the rows as wide as the widest
    rects = stack((0, 0), [(width, s[1]) for s in sizes])
    out = [Label(t, r, c, "counts") for (t, c), r in zip(rows, rects)]
    wanted: List[Tuple[str, BGR, str, List[Tuple[int, int]]]] = []
    for ln in lines:
        ax, ay = _px(ln.points[0], w, h)
        wanted.append((ln.name, LINE_BGR, "line", _around(ax, ay, _size(ln.name, scale))))
    for z in zones:
        ax, ay = _px(z.polygon[0], w, h)
        wanted.append((z.name, ZONE_BGR, "zone", _around(ax, ay, _size(z.name, scale))))
    for tid, label, box, conf in sorted(tracks, key=lambda t: t[0]):
        text = f"#{tid} {label} {conf:.2f}"
        tw, th = _size(text, scale)
        x1, y1, x2, y2 = (int(round(v)) for v in box[:4])
        anchors = [(x1, y1 - th), (x1, y1), (x1, y2), (x2 - tw, y1 - th), (x2 - tw, y2)]
        wanted.append((text, _track_color(tid), "track", anchors))
    taken = [lb.rect for lb in out]
    for text, color, kind, anchors in wanted:
        tw, th = _size(text, scale)
        r = place(size, tw, th, anchors, taken)
        if r is not None:
            taken.append(r)
            out.append(Label(text, r, color, kind))
    return out


def _around(x: int, y: int, wh: Tuple[int, int]) -> List[Tuple[int, int]]:
    """A name's places by its point: above right, below right, above left, below left."""
    tw, th = wh
    return [(x + 4, y - th - 2), (x + 4, y + 2), (x - tw - 4, y - th - 2), (x - tw - 4, y + 2)]


def draw_tracks(
    image: Image,
    tracks: Sequence[TrackRow],
    zones: Sequence[ZoneConfig],
    lines: Sequence[LineConfig],
    totals: Mapping[str, Any],
    occupancy: Mapping[str, int],
) -> Image:
    """``tracks``: (id, label, x1 y1 x2 y2, confidence); ``totals``: ObjectEvents.totals. The
    shapes first, the labels (:func:`layout`) last, so no stroke crosses a label either."""
    out = image.copy()
    h, w = out.shape[:2]
    scale = max(0.35, min(h, w) / 900)
    shade = out.copy()
    for z in zones:
        pts = np.array([_px(p, w, h) for p in z.polygon], dtype=np.int32)
        cv2.fillPoly(shade, [pts], ZONE_BGR)
    cv2.addWeighted(shade, 0.25, out, 0.75, 0, dst=out)
    for z in zones:
        pts = np.array([_px(p, w, h) for p in z.polygon], dtype=np.int32)
        cv2.polylines(out, [pts], True, ZONE_BGR, 2, cv2.LINE_AA)
    for ln in lines:
        a, b = _px(ln.points[0], w, h), _px(ln.points[1], w, h)
        cv2.line(out, a, b, LINE_BGR, 2, cv2.LINE_AA)
        # an arrow from the middle towards the "in" side (right of a->b on the image: (-dy, dx))
        mx, my = (a[0] + b[0]) / 2, (a[1] + b[1]) / 2
        dx, dy = b[0] - a[0], b[1] - a[1]
        norm = max((dx * dx + dy * dy) ** 0.5, 1.0)
        sign = 1 if ln.in_side == "right" else -1
        tip = (int(mx - sign * dy / norm * 25), int(my + sign * dx / norm * 25))
        cv2.arrowedLine(out, (int(mx), int(my)), tip, LINE_BGR, 2, cv2.LINE_AA, tipLength=0.4)
    for tid, _label, box, _conf in tracks:
        x1, y1, x2, y2 = (int(round(v)) for v in box[:4])
        cv2.rectangle(out, (x1, y1), (x2, y2), _track_color(tid), 2, cv2.LINE_AA)
    for lb in layout((w, h), scale, tracks, zones, lines, totals, occupancy):
        x1, y1, x2, y2 = lb.rect
        (_, th), _ = cv2.getTextSize(lb.text, FONT, scale, _thick(scale))
        cv2.rectangle(out, (x1, y1), (x2 - 1, y2 - 1), (0, 0, 0), -1)
        cv2.putText(out, lb.text, (x1 + 2, y1 + 2 + th), FONT, scale, lb.color, _thick(scale), cv2.LINE_AA)
    return out
