"""The expired spans (core.messages.retention): whatever rows are deleted, the gaps read from the
kept rows and the spans are exactly the gaps of the rows as they were stored."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from edge_agent.core.messages.retention import Span, class_of, merge, spans


def gaps(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """What the gaps view computes: holes before and between the (possibly overlapping) ranges."""
    out, top = [], 0
    for lo, hi in sorted(ranges):
        if lo > top + 1:
            out.append((top + 1, lo - 1))
        top = max(top, hi)
    return out


def islands(seqs: list[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for s in sorted(seqs):
        if out and s == out[-1][1] + 1:
            out[-1] = (out[-1][0], s)
        else:
            out.append((s, s))
    return out


@settings(max_examples=300, deadline=None)
@given(
    st.sets(st.integers(1, 120), min_size=1),
    st.data(),
    st.booleans(),
)
def test_deleting_any_rows_keeps_the_gaps_exactly(stored: set[int], data: st.DataObject, known: bool) -> None:
    doomed = data.draw(st.sets(st.sampled_from(sorted(stored))))
    isl = {("d", 1): islands(list(stored))} if known else {}  # known: the confirmed islands exist
    got = spans([("d", 1, s, float(s)) for s in doomed], isl)
    kept = [(s, s) for s in stored - doomed]
    assert gaps(kept + [(p.lo, p.hi) for p in got]) == gaps([(s, s) for s in stored])
    assert sum(p.rows for p in got) == len(doomed)
    if known:  # one span per island at most
        assert len(got) <= len(isl[("d", 1)])


def test_interleaved_kinds_make_one_span_per_island() -> None:
    isl = {("d", 1): [(1, 10), (20, 30)]}
    got = spans([("d", 1, s, 100.0 + s) for s in (1, 2, 4, 5, 7, 21, 23)], isl)
    assert got == [Span("d", 1, 1, 7, 5, 107.0), Span("d", 1, 21, 23, 2, 123.0)]
    assert merge(got[0], [Span("d", 1, 8, 9, 2, 200.0)]) == Span("d", 1, 1, 9, 7, 200.0)


def test_classes() -> None:
    assert [class_of(k) for k in ("detections", "sensors", "objects", "counts")] == [
        "results",
        "results",
        "objects",
        "counts",
    ]


def test_rows_outside_every_island_make_one_span_per_run_of_seqs() -> None:
    # a database older than the islands: consecutive seqs are one span (the expired table stays
    # small), a missing seq ends it (the gap stays one); the times are not the seqs
    rows = [("d", 1, s, 5000.0 - s) for s in (3, 4, 5, 9, 10)]
    assert spans(rows, {}) == [Span("d", 1, 3, 5, 3, 4997.0), Span("d", 1, 9, 10, 2, 4991.0)]
