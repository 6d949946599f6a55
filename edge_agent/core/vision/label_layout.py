"""Where the text labels of an annotated frame go, so that no label covers another.

Issue 36: a line's running count was drawn at the line's end and a track's label just above its
box, each over whatever was there: a person walking past the line hid the count, and a zone whose
corner sat by the line's end had its label under the line's. Now the counts are a legend in the
frame's top-left corner (placed first, so nothing is ever put over it), and every other label takes
the first of its candidate places that is on the frame and free of the labels already placed; one
with no free place within ``SEARCH_STEPS`` label heights of its anchor is not drawn (its box and
lines still are, and its counts are in the legend).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import List, Optional, Tuple

Rect = Tuple[int, int, int, int]  # x1, y1, x2, y2; half-open: x1 <= x < x2, y1 <= y < y2
BGR = Tuple[int, int, int]
SEARCH_STEPS = 6


@dataclass(frozen=True)
class Label:
    """One label's text, colour and background rectangle; ``kind``: counts, line, zone or track."""

    text: str
    rect: Rect
    color: BGR
    kind: str


def overlap(a: Rect, b: Rect) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _candidates(anchors: Sequence[Tuple[int, int]], w: int, h: int) -> Iterator[Tuple[int, int]]:
    yield from anchors
    ax, ay = anchors[0]
    for k in range(1, SEARCH_STEPS + 1):  # then further and further from the first anchor
        for dy in (-k * h, k * h):
            for dx in (0, -w, w):
                yield ax + dx, ay + dy


def place(
    size: Tuple[int, int], w: int, h: int, anchors: Sequence[Tuple[int, int]], taken: Sequence[Rect]
) -> Optional[Rect]:
    """The first candidate top-left corner (moved onto the frame) whose ``w`` x ``h`` rectangle
    meets none of ``taken``; None: no free place nearby."""
    fw, fh = size
    for ax, ay in _candidates(anchors, w, h):
        x, y = max(0, min(ax, fw - w)), max(0, min(ay, fh - h))
        r = (x, y, x + w, y + h)
        if not any(overlap(r, t) for t in taken):
            return r
    return None


def stack(origin: Tuple[int, int], sizes: Sequence[Tuple[int, int]]) -> List[Rect]:
    """Rectangles of ``sizes`` one under the other from ``origin`` (the legend's rows)."""
    x, y = origin
    out = []
    for w, h in sizes:
        out.append((x, y, x + w, y + h))
        y += h
    return out
