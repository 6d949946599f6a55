"""Zones and counting lines (pure): geometry checks and the per-track state machines.

All coordinates are fractions of the frame (0..1, x right, y down), so a config survives a change of
camera resolution. An object is the *anchor point* of its box: the bottom centre by default (where a
person or a car touches the ground, as Frigate and supervision do), or the centre.

Hysteresis, so a box jittering on a boundary makes one event, not a stream:

- line: the side of a track is only *committed* when its anchor is more than ``margin`` away from the
  line; a crossing is a change of committed side, and counts only when the path between the two
  committed positions passes through the segment (not its extension). A track that is lost for a
  few frames keeps its committed side, so re-finding it on the same side counts nothing again.
- zone: an object has *entered* once it has been inside for ``min_dwell_s`` (a passer-by of a
  "waiting area" counts nothing); it has *left* after ``exit_frames`` consecutive updates outside
  (or when its track ends); the ``left`` event carries the dwell time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

Point = Tuple[float, float]


def _cross(o: Point, a: Point, b: Point) -> float:
    return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])


def segments_cross(p1: Point, p2: Point, q1: Point, q2: Point) -> bool:
    """Proper or touching intersection of segments p1p2 and q1q2."""
    d1, d2 = _cross(q1, q2, p1), _cross(q1, q2, p2)
    d3, d4 = _cross(p1, p2, q1), _cross(p1, p2, q2)
    if ((d1 > 0) != (d2 > 0)) and ((d3 > 0) != (d4 > 0)) and d1 != 0 and d2 != 0 and d3 != 0 and d4 != 0:
        return True

    def on(a: Point, b: Point, c: Point, d: float) -> bool:
        return (
            d == 0
            and min(a[0], b[0]) <= c[0] <= max(a[0], b[0])
            and min(a[1], b[1]) <= c[1] <= max(a[1], b[1])
        )

    return on(q1, q2, p1, d1) or on(q1, q2, p2, d2) or on(p1, p2, q1, d3) or on(p1, p2, q2, d4)


def polygon_problem(poly: Sequence[Point]) -> Optional[str]:
    """Why ``poly`` is not a usable zone (outside 0..1, too few points, no area, self-intersecting)."""
    if len(poly) < 3:
        return f"has {len(poly)} points, a polygon needs at least 3"
    if len(poly) > 64:
        return f"has {len(poly)} points, at most 64 allowed"
    for x, y in poly:
        if not (0.0 <= x <= 1.0 and 0.0 <= y <= 1.0):
            return f"point [{x}, {y}] is outside 0..1 (fractions of the frame)"
    n = len(poly)
    for i in range(n):
        for j in range(i + 1, n):
            if j == i + 1 or (i == 0 and j == n - 1):
                continue  # neighbouring edges share a point
            if segments_cross(poly[i], poly[(i + 1) % n], poly[j], poly[(j + 1) % n]):
                return f"is self-intersecting: edge {i}-{i + 1} crosses edge {j}-{(j + 1) % n}"
    area = 0.5 * abs(
        sum(poly[i][0] * poly[(i + 1) % n][1] - poly[(i + 1) % n][0] * poly[i][1] for i in range(n))
    )
    if area < 1e-6:
        return "encloses no area (points on one line or repeated)"
    return None


def line_problem(points: Sequence[Point]) -> Optional[str]:
    """Why ``points`` is not a usable counting line."""
    if len(points) != 2:
        return f"has {len(points)} points, a line needs exactly 2"
    for x, y in points:
        if not (0.0 <= x <= 1.0 and 0.0 <= y <= 1.0):
            return f"point [{x}, {y}] is outside 0..1 (fractions of the frame)"
    (ax, ay), (bx, by) = points
    if ((bx - ax) ** 2 + (by - ay) ** 2) ** 0.5 < 0.01:
        return "is degenerate: its two points are less than 0.01 of the frame apart"
    return None


def point_in_polygon(p: Point, poly: Sequence[Point]) -> bool:
    """Even-odd ray casting (points exactly on an edge may go either way; hysteresis absorbs it)."""
    x, y = p
    inside = False
    n = len(poly)
    for i in range(n):
        (x1, y1), (x2, y2) = poly[i], poly[(i + 1) % n]
        if (y1 > y) != (y2 > y) and x < x1 + (y - y1) * (x2 - x1) / (y2 - y1):
            inside = not inside
    return inside


@dataclass
class LineState:
    """One track against one line: its committed side (+1 right of a->b, -1 left) and where."""

    side: int = 0
    pos: Optional[Point] = None


def line_step(state: LineState, p: Point, a: Point, b: Point, margin: float, in_sign: int) -> Optional[str]:
    """Advance ``state`` by the anchor ``p``; return "in"/"out" when this step is a crossing."""
    abx, aby = b[0] - a[0], b[1] - a[1]
    length = (abx * abx + aby * aby) ** 0.5
    d = (abx * (p[1] - a[1]) - aby * (p[0] - a[0])) / length  # > 0: right of a->b (y points down)
    if abs(d) <= margin:
        return None  # inside the band: the side is not decided here
    side = 1 if d > 0 else -1
    prev, prev_pos = state.side, state.pos
    state.side, state.pos = side, p
    if prev == 0 or side == prev or prev_pos is None:
        return None
    # the path between the two committed positions must pass through the segment itself
    d0 = (abx * (prev_pos[1] - a[1]) - aby * (prev_pos[0] - a[0])) / length
    t = d0 / (d0 - d)  # where along prev_pos->p the line is crossed
    cx, cy = prev_pos[0] + t * (p[0] - prev_pos[0]), prev_pos[1] + t * (p[1] - prev_pos[1])
    u = ((cx - a[0]) * abx + (cy - a[1]) * aby) / (length * length)
    if not (-margin <= u <= 1 + margin):
        # passed beside the line, not through it: the committed side stays, so walking around the
        # line's end and back through it never counts the same direction twice in a row
        state.side, state.pos = prev, prev_pos
        return None
    return "in" if side == in_sign else "out"


@dataclass
class ZoneState:
    """One track against one zone."""

    since: Optional[float] = None  # first time inside in the current stay
    last_inside: float = 0.0
    outside: int = 0  # consecutive updates outside
    entered: bool = False


def zone_step(
    state: ZoneState, inside: bool, ts: float, min_dwell_s: float, exit_frames: int
) -> Optional[Tuple[str, float]]:
    """Advance ``state``; return ("entered", dwell) or ("left", dwell) when an event happens."""
    if inside:
        state.outside = 0
        if state.since is None:
            state.since = ts
        state.last_inside = ts
        if not state.entered and ts - state.since >= min_dwell_s:
            state.entered = True
            return ("entered", ts - state.since)
        return None
    if state.since is None:
        return None
    state.outside += 1
    if state.outside < exit_frames:
        return None
    return zone_end(state)


def zone_end(state: ZoneState) -> Optional[Tuple[str, float]]:
    """The stay is over (outside long enough, or the track ended): ("left", dwell) if it counted."""
    event = ("left", state.last_inside - state.since) if state.entered and state.since is not None else None
    state.since, state.outside, state.entered = None, 0, False
    return event


def anchor_point(box: Sequence[float], w: float, h: float, anchor: str) -> Point:
    """The box's anchor as fractions of the frame."""
    x1, y1, x2, y2 = box[0], box[1], box[2], box[3]
    y = y2 if anchor == "bottom_center" else (y1 + y2) / 2
    return ((x1 + x2) / 2 / max(w, 1.0), y / max(h, 1.0))


def as_points(raw: Sequence[Sequence[float]]) -> List[Point]:
    return [(float(p[0]), float(p[1])) for p in raw]
