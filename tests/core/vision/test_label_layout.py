"""Where a label goes when its anchor is taken (core/vision/label_layout.py): the row above, then
left and right of it, then the row below, further away up to SEARCH_STEPS label heights, and the
legend's rows one under the other. Made for mutation testing's survivors (issue 36,
core-label-layout); the drawn frames are tested in tests/app/workbench/test_annotate_layout.py."""

from __future__ import annotations

from edge_agent.core.vision.label_layout import SEARCH_STEPS, overlap, place, stack

FRAME = (400, 400)
W, H = 20, 10
ANCHOR = (100, 200)


def _taken_except(free: tuple[int, int]) -> list[tuple[int, int, int, int]]:
    """Every label-sized cell around the anchor but ``free`` (a top-left corner)."""
    cells = []
    for dy in range(-(SEARCH_STEPS + 2), SEARCH_STEPS + 3):
        for dx in (-1, 0, 1):
            x, y = ANCHOR[0] + dx * W, ANCHOR[1] + dy * H
            if (x, y) != free:
                cells.append((x, y, x + W, y + H))
    return cells


def test_the_row_above_comes_before_beside_and_left_before_right() -> None:
    taken = [(100, 200, 120, 210)]  # the anchor itself
    assert place(FRAME, W, H, [ANCHOR], taken) == (100, 190, 120, 200)
    taken.append((100, 190, 120, 200))  # and the row above
    assert place(FRAME, W, H, [ANCHOR], taken) == (80, 190, 100, 200)
    taken.append((80, 190, 100, 200))
    assert place(FRAME, W, H, [ANCHOR], taken) == (120, 190, 140, 200)
    taken.append((120, 190, 140, 200))
    assert place(FRAME, W, H, [ANCHOR], taken) == (100, 210, 120, 220)  # then the row below


def test_a_place_beside_the_anchor_on_its_own_row_is_not_a_candidate() -> None:
    taken = _taken_except((120, 200))
    assert place(FRAME, W, H, [ANCHOR], taken) is None


def test_the_search_reaches_exactly_search_steps_rows_away() -> None:
    far = (ANCHOR[0] - W, ANCHOR[1] + SEARCH_STEPS * H)
    assert place(FRAME, W, H, [ANCHOR], _taken_except(far)) == (far[0], far[1], far[0] + W, far[1] + H)
    further = (ANCHOR[0], ANCHOR[1] - (SEARCH_STEPS + 1) * H)
    assert place(FRAME, W, H, [ANCHOR], _taken_except(further)) is None


def test_legend_rows_stack_one_under_the_other() -> None:
    rows = stack((4, 6), [(50, 10), (30, 12), (40, 8)])
    assert rows == [(4, 6, 54, 16), (4, 16, 34, 28), (4, 28, 44, 36)]
    assert not any(overlap(a, b) for a, b in zip(rows, rows[1:]))
