"""The multi-camera scheduler (pure): shares by weight, no starvation, no burst after a stall, and
the stale-frame rule that never drops twice running."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edge_agent.core.camera.scheduler import STALE_INTERVALS, WeightedRoundRobin, too_old


def test_every_ready_camera_gets_its_weights_share_interleaved() -> None:
    rr = WeightedRoundRobin([3, 1, 2])
    picks = [rr.pick([0, 1, 2]) for _ in range(60)]
    assert Counter(picks) == {0: 30, 1: 10, 2: 20}
    # interleaved, not in bursts: the weight-3 camera never runs 3 times in a row
    assert all(picks[i : i + 3] != [0, 0, 0] for i in range(len(picks) - 2))


def test_a_camera_with_nothing_ready_is_skipped_and_holds_nobody_up() -> None:
    rr = WeightedRoundRobin([1, 1])
    assert [rr.pick([1]) for _ in range(5)] == [1] * 5
    assert rr.pick([]) is None


def test_a_stalled_camera_comes_back_without_a_burst() -> None:
    """A camera that had nothing ready earned no credit: on its return it alternates at once."""
    rr = WeightedRoundRobin([1, 1])
    for _ in range(50):
        rr.pick([0])  # camera 1 stalled for 50 picks
    picks = [rr.pick([0, 1]) for _ in range(10)]
    assert Counter(picks) == {0: 5, 1: 5}
    assert all(picks[i] != picks[i + 1] for i in range(9))


@given(
    weights=st.lists(st.integers(1, 10), min_size=1, max_size=8),
    rounds=st.lists(st.sets(st.integers(0, 7)), min_size=1, max_size=200),
)
@settings(max_examples=200, deadline=None)
def test_a_pick_is_always_a_ready_camera_and_credit_stays_bounded(
    weights: list[int], rounds: list[set[int]]
) -> None:
    rr = WeightedRoundRobin(weights)
    total = sum(weights)
    for ready in rounds:
        ready_ids = sorted(i for i in ready if i < len(weights))
        got = rr.pick(ready_ids)
        assert (got is None) == (not ready_ids)
        assert got is None or got in ready_ids
        # smooth WRR: credit never drifts beyond the total weight either way (no starvation)
        assert all(-total <= c <= total for c in rr.credit.values()), rr.credit


@given(weights=st.lists(st.integers(1, 10), min_size=2, max_size=6), n=st.integers(1, 400))
@settings(max_examples=100, deadline=None)
def test_with_everyone_ready_each_share_is_within_one_of_its_weight(weights: list[int], n: int) -> None:
    rr = WeightedRoundRobin(weights)
    got = Counter(rr.pick(range(len(weights))) for _ in range(n))
    total = sum(weights)
    for i, w in enumerate(weights):
        assert abs(got[i] - n * w / total) <= len(weights), (i, got, weights)


@pytest.mark.parametrize("weights", [[], [0], [1, -2]])
def test_weights_below_one_are_a_developer_error(weights: list[int]) -> None:
    with pytest.raises(ValueError, match="weights must be >= 1"):
        WeightedRoundRobin(weights)


def test_a_frame_is_stale_only_past_two_intervals_with_a_newer_one_waiting() -> None:
    interval = 0.04  # 25 fps
    limit = STALE_INTERVALS * interval
    assert too_old(limit + 0.001, interval, newer_waiting=True, dropped_last=False)
    assert not too_old(limit - 0.001, interval, newer_waiting=True, dropped_last=False)
    assert not too_old(limit, interval, newer_waiting=True, dropped_last=False)  # 2 intervals: still fresh
    assert not too_old(1.0, interval, newer_waiting=False, dropped_last=False)  # nothing newer: infer it
    assert not too_old(1.0, interval, newer_waiting=True, dropped_last=True)  # never twice running
    assert not too_old(1.0, None, newer_waiting=True, dropped_last=False)  # not live: no interval
    assert not too_old(1.0, 0.0, newer_waiting=True, dropped_last=False)
