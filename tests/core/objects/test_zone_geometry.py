"""Zone and line geometry against independent references: exact rational arithmetic for segment
intersection, OpenCV's point-in-polygon test, and the config's error lines at their edges."""

from __future__ import annotations

from fractions import Fraction

import cv2
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from edge_agent.core.objects.zones import (
    anchor_point,
    line_problem,
    point_in_polygon,
    polygon_problem,
    segments_cross,
)

P = tuple[float, float]
small = st.integers(-3, 3)
points = st.tuples(small, small)


def _ref_cross(p1: P, p2: P, q1: P, q2: P) -> bool:
    """Do the closed segments (two distinct ends each) share a point? Solved exactly:
    p1 + t (p2 - p1) = q1 + u (q2 - q1)."""
    a, b, c, d = (tuple(Fraction(v) for v in pt) for pt in (p1, p2, q1, q2))
    r = (b[0] - a[0], b[1] - a[1])
    s = (d[0] - c[0], d[1] - c[1])
    den = r[0] * s[1] - r[1] * s[0]
    qp = (c[0] - a[0], c[1] - a[1])
    if den != 0:
        t = (qp[0] * s[1] - qp[1] * s[0]) / den
        u = (qp[0] * r[1] - qp[1] * r[0]) / den
        return 0 <= t <= 1 and 0 <= u <= 1
    if qp[0] * r[1] - qp[1] * r[0] != 0:
        return False  # parallel, not on one line

    # on one line (or a point): overlap of the projections on both axes
    def overlap(i: int) -> bool:
        return max(min(a[i], b[i]), min(c[i], d[i])) <= min(max(a[i], b[i]), max(c[i], d[i]))

    return overlap(0) and overlap(1)


@settings(max_examples=600, deadline=None)
@given(points, points, points, points)
def test_segments_cross_exactly_when_they_share_a_point(p1: P, p2: P, q1: P, q2: P) -> None:
    assume(p1 != p2 and q1 != q2)  # polygon edges and lines have two distinct ends
    assert segments_cross(p1, p2, q1, q2) is _ref_cross(p1, p2, q1, q2)


@pytest.mark.parametrize(
    ("seg", "other", "cross"),
    [
        (((0, 0), (2, 2)), ((0, 2), (2, 0)), True),  # proper, cross products of 2 and 4
        (((0, -1), (0, 1)), ((-1, 0), (1, 0)), True),  # cross products of exactly +-1 and +-2
        (((0, 0), (1, 0)), ((1, 0), (2, 5)), True),  # touching at an end
        (((0, 0), (1, 0)), ((2, 0), (3, 0)), False),  # same line, apart
        (((0, 0), (2, 0)), ((1, 0), (3, 0)), True),  # same line, overlapping
        (((0, 0), (1, 1)), ((0, 1), (1, 2)), False),  # parallel
        (((0, 0), (1, 0)), ((0.5, 0.1), (0.5, 1)), False),  # a T that stops short
    ],
)
def test_segment_cases(seg: tuple[P, P], other: tuple[P, P], cross: bool) -> None:
    assert segments_cross(*seg, *other) is cross and segments_cross(*other, *seg) is cross


# grid polygons (eighths of the frame) and probe points that can never lie on an edge:
# (i/8 + 1/17, j/8 + 1/19) is on the line a x + b y = c of two grid points only if 19a + 17b = 0
grid = st.tuples(st.integers(0, 8), st.integers(0, 8)).map(lambda v: (v[0] / 8, v[1] / 8))


@settings(max_examples=300, deadline=None)
@given(st.lists(grid, min_size=3, max_size=7), st.integers(-1, 8), st.integers(-1, 8))
def test_point_in_polygon_agrees_with_opencv_on_every_usable_zone(poly: list[P], i: int, j: int) -> None:
    if polygon_problem(poly) is not None:
        return
    p = (i / 8 + 1 / 17, j / 8 + 1 / 19)
    contour = np.array(poly, np.float64).reshape(-1, 1, 2).astype(np.float32)
    expected = cv2.pointPolygonTest(contour, p, False) > 0
    assert point_in_polygon(p, poly) is expected


def test_point_in_polygon_on_a_square_and_a_concave_zone() -> None:
    square = [(0.2, 0.2), (0.8, 0.2), (0.8, 0.8), (0.2, 0.8)]
    assert point_in_polygon((0.5, 0.5), square) and not point_in_polygon((0.9, 0.5), square)
    assert not point_in_polygon((0.5, 0.1), square) and not point_in_polygon((0.1, 0.5), square)
    u_shape = [(0.1, 0.1), (0.3, 0.1), (0.3, 0.7), (0.7, 0.7), (0.7, 0.1), (0.9, 0.1), (0.9, 0.9), (0.1, 0.9)]
    assert not point_in_polygon((0.5, 0.4), u_shape)  # in the notch
    assert point_in_polygon((0.2, 0.4), u_shape) and point_in_polygon((0.8, 0.4), u_shape)
    assert point_in_polygon((0.5, 0.8), u_shape)


# ---- the config's geometry errors -------------------------------------------------------------
TRI = [(0.1, 0.1), (0.9, 0.1), (0.5, 0.9)]


@pytest.mark.parametrize(
    ("poly", "why"),
    [
        (TRI[:2], "has 2 points, a polygon needs at least 3"),
        ([(0.0, 0.0)] * 65, "has 65 points, at most 64 allowed"),
        ([(0.1, 0.1), (1.5, 0.1), (0.5, 0.9)], "point [1.5, 0.1] is outside 0..1 (fractions of the frame)"),
        ([(0.1, 0.1), (0.9, 0.1), (0.5, -0.1)], "point [0.5, -0.1] is outside 0..1 (fractions of the frame)"),
        ([(0.1, 0.1), (0.9, 0.1), (0.5, 1.5)], "point [0.5, 1.5] is outside 0..1 (fractions of the frame)"),
        (
            [(0.1, 0.1), (0.9, 0.9), (0.9, 0.1), (0.1, 0.9)],
            "is self-intersecting: edge 0-1 crosses edge 2-3",
        ),
        (
            [(0.1, 0.1), (0.5, 0.1), (0.5, 0.5), (0.9, 0.5), (0.9, 0.9), (0.3, 0.9), (0.3, 0.05)],
            "is self-intersecting: edge 0-1 crosses edge 5-6",
        ),
        ([(0.1, 0.1), (0.5, 0.5), (0.9, 0.9)], "encloses no area (points on one line or repeated)"),
        ([(0.1, 0.1), (0.1, 0.1), (0.1, 0.1)], "encloses no area (points on one line or repeated)"),
    ],
)
def test_an_unusable_zone_is_named(poly: list[P], why: str) -> None:
    assert polygon_problem(poly) == why


def test_usable_zones_at_the_limits() -> None:
    assert polygon_problem(TRI) is None
    assert polygon_problem([(0.0, 0.0), (1.0, 0.0), (1.0, 1.0), (0.0, 1.0)]) is None  # the whole frame
    import math

    circle = [
        (0.5 + 0.4 * math.cos(k * math.tau / 64), 0.5 + 0.4 * math.sin(k * math.tau / 64)) for k in range(64)
    ]
    assert polygon_problem(circle) is None  # 64 points
    thin = [(0.0, 0.0), (1.0, 0.0), (1.0, 0.0000021)]  # area 1.05e-6: just enough
    assert polygon_problem(thin) is None
    assert polygon_problem([(0.0, 0.0), (1.0, 0.0), (1.0, 0.0000019)]) is not None


@pytest.mark.parametrize(
    ("points", "why"),
    [
        ([(0.5, 0.0)], "has 1 points, a line needs exactly 2"),
        ([(0.5, 0.0), (0.5, 1.0), (0.1, 0.1)], "has 3 points, a line needs exactly 2"),
        ([(0.5, 0.0), (0.5, 1.01)], "point [0.5, 1.01] is outside 0..1 (fractions of the frame)"),
        ([(1.5, 0.0), (0.5, 1.0)], "point [1.5, 0.0] is outside 0..1 (fractions of the frame)"),
        ([(-0.01, 0.0), (0.5, 1.0)], "point [-0.01, 0.0] is outside 0..1 (fractions of the frame)"),
        ([(0.5, 0.5), (0.5, 0.509)], "is degenerate: its two points are less than 0.01 of the frame apart"),
        ([(0.5, 0.5), (0.506, 0.506)], "is degenerate: its two points are less than 0.01 of the frame apart"),
    ],
)
def test_an_unusable_line_is_named(points: list[P], why: str) -> None:
    assert line_problem(points) == why


def test_usable_lines_at_the_limits() -> None:
    assert line_problem([(0.0, 0.0), (1.0, 1.0)]) is None
    assert line_problem([(0.5, 0.5), (0.5, 0.5101)]) is None  # just over 0.01 apart
    assert line_problem([(0.5, 0.5), (0.5076, 0.5076)]) is None  # 0.01075 on the diagonal


def test_the_anchor_is_the_bottom_centre_or_the_centre_in_frame_fractions() -> None:
    box = [100.0, 50.0, 300.0, 250.0]
    assert anchor_point(box, 400, 500, "bottom_center") == (0.5, 0.5)
    assert anchor_point(box, 400, 500, "center") == (0.5, 0.3)
    assert anchor_point([0.2, 0.4, 0.6, 0.8], 0, 0, "center") == pytest.approx((0.4, 0.6))  # no size: as is


# ---- a tilted counting line, away from the origin ---------------------------------------------
A, B = (0.2, 0.3), (0.8, 0.6)
_LEN = ((B[0] - A[0]) ** 2 + (B[1] - A[1]) ** 2) ** 0.5
_RIGHT = (-(B[1] - A[1]) / _LEN, (B[0] - A[0]) / _LEN)  # unit normal to the right of A->B (y down)


def _at(s: float, dist: float) -> P:
    """The point at fraction ``s`` along A->B, ``dist`` to its right (negative: left)."""
    return (A[0] + s * (B[0] - A[0]) + dist * _RIGHT[0], A[1] + s * (B[1] - A[1]) + dist * _RIGHT[1])


def _walk(path: list[P], margin: float = 0.02, in_sign: int = 1) -> list[str | None]:
    from edge_agent.core.objects.zones import LineState, line_step

    state = LineState()
    return [line_step(state, p, A, B, margin, in_sign) for p in path]


def test_a_tilted_line_counts_a_crossing_through_its_middle_by_side() -> None:
    assert _walk([_at(0.5, -0.1), _at(0.5, 0.1)]) == [None, "in"]
    assert _walk([_at(0.5, 0.1), _at(0.5, -0.1)]) == [None, "out"]
    assert _walk([_at(0.5, -0.1), _at(0.5, 0.1)], in_sign=-1) == [None, "out"]
    assert _walk([_at(0.3, -0.1), _at(0.7, 0.1), _at(0.4, -0.05)]) == [None, "in", "out"]


def test_the_band_either_side_of_a_tilted_line_decides_nothing() -> None:
    # 0.015 from the line is inside the 0.02 band: no side committed, no crossing
    assert _walk([_at(0.5, -0.1), _at(0.5, 0.015), _at(0.5, -0.1)]) == [None, None, None]
    # 0.025 is outside it: a crossing
    assert _walk([_at(0.5, -0.1), _at(0.5, 0.025)]) == [None, "in"]


def test_a_crossing_counts_up_to_the_margin_beyond_the_ends_and_not_further() -> None:
    for s in (0.01, 0.99, 1.01, -0.01):  # within the segment, or within the margin past an end
        assert _walk([_at(s, -0.1), _at(s, 0.1)]) == [None, "in"], s
    for s in (1.25, -0.25, 1.05):  # beside the segment: nothing, and the side stays
        assert _walk([_at(s, -0.1), _at(s, 0.1), _at(0.5, 0.1)]) == [None, None, "in"], s
