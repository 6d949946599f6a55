"""Draw tracks, zones, counting lines and the running counts on a frame (``infer --track --save``).

So a user can check a zone/line configuration by eye on their own footage before deploying it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Tuple

import cv2
import numpy as np
import numpy.typing as npt

from edge_agent.core.config.schema import LineConfig, ZoneConfig

Image = npt.NDArray[np.uint8]
ZONE_BGR = (0, 200, 255)
LINE_BGR = (255, 0, 255)


def _track_color(track_id: int) -> Tuple[int, int, int]:
    hue = (track_id * 37) % 180  # a stable colour per id, well spread
    bgr = cv2.cvtColor(np.array([[[hue, 230, 240]]], dtype=np.uint8), cv2.COLOR_HSV2BGR)[0, 0]
    return int(bgr[0]), int(bgr[1]), int(bgr[2])


def _px(p: Sequence[float], w: int, h: int) -> Tuple[int, int]:
    return int(round(p[0] * (w - 1))), int(round(p[1] * (h - 1)))


def _text(img: Image, text: str, org: Tuple[int, int], scale: float, color: Tuple[int, int, int]) -> None:
    thick = max(1, int(scale * 2))
    (tw, th), base = cv2.getTextSize(text, cv2.FONT_HERSHEY_SIMPLEX, scale, thick)
    x = max(0, min(org[0], img.shape[1] - tw - 2))
    y = max(th + 2, min(org[1], img.shape[0] - base - 2))
    cv2.rectangle(img, (x, y - th - 2), (x + tw + 2, y + base), (0, 0, 0), -1)
    cv2.putText(img, text, (x + 1, y), cv2.FONT_HERSHEY_SIMPLEX, scale, color, thick, cv2.LINE_AA)


def draw_tracks(
    image: Image,
    tracks: Sequence[Tuple[int, str, Sequence[float], float]],
    zones: Sequence[ZoneConfig],
    lines: Sequence[LineConfig],
    totals: Mapping[str, Any],
    occupancy: Mapping[str, int],
) -> Image:
    """``tracks``: (id, label, x1 y1 x2 y2, confidence); ``totals``: ObjectEvents.totals."""
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
        entered = totals["zones"].get(z.name, {}).get("entered", 0)
        _text(
            out,
            f"{z.name}: {occupancy.get(z.name, 0)} now, {entered} entered",
            tuple(pts[0]),
            scale,
            ZONE_BGR,
        )
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
        c = totals["lines"].get(ln.name, {})
        _text(out, f"{ln.name}: in {c.get('in', 0)} out {c.get('out', 0)}", a, scale, LINE_BGR)
    for tid, label, box, conf in tracks:
        color = _track_color(tid)
        x1, y1, x2, y2 = (int(round(v)) for v in box[:4])
        cv2.rectangle(out, (x1, y1), (x2, y2), color, 2, cv2.LINE_AA)
        _text(out, f"#{tid} {label} {conf:.2f}", (x1, y1 - 3), scale, color)
    return out
