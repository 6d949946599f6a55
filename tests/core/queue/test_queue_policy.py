"""Pure queue decisions: admission, drop planning, expiry, backoff, rate limit."""

from __future__ import annotations

from dataclasses import replace

import pytest

from edge_agent.core.queue.backoff import backoff_delay as reconnect_delay
from edge_agent.core.queue.policy import (
    Limits,
    TokenBucket,
    admit,
    expiry_cutoff,
    over_limits,
    plan_drops,
)


def test_drop_oldest_always_admits_unless_the_message_alone_is_too_big() -> None:
    lim = Limits(max_messages=3, max_bytes=100, max_age_s=60)
    assert admit(lim, count=3, nbytes=100, new_bytes=10).accept
    big = admit(lim, count=0, nbytes=0, new_bytes=101)
    assert not big.accept and "exceeds queue.max_bytes=100" in big.reason


@pytest.mark.parametrize(
    ("count", "nbytes", "new", "accept", "why"),
    [
        (2, 50, 10, True, ""),
        (3, 50, 10, False, "max_messages=3"),
        (1, 95, 10, False, "max_bytes=100"),
        (2, 90, 10, True, ""),  # exactly at the byte cap is allowed
    ],
)
def test_reject_new(count: int, nbytes: int, new: int, accept: bool, why: str) -> None:
    lim = Limits(max_messages=3, max_bytes=100, max_age_s=60, policy="reject_new")
    decision = admit(lim, count, nbytes, new)
    assert decision.accept is accept
    assert why in decision.reason


@pytest.mark.arm_smoke
def test_plan_drops_by_count_and_by_bytes() -> None:
    lim = Limits(max_messages=5, max_bytes=1000, max_age_s=60)
    assert plan_drops(lim, count=8, nbytes=80, oldest_sizes=[10] * 8) == 3
    # bytes: 1300 held, need to shed 300; oldest are 100, 150, 100 -> three rows
    assert plan_drops(lim, count=5, nbytes=1300, oldest_sizes=[100, 150, 100, 500]) == 3
    assert plan_drops(lim, count=5, nbytes=1000, oldest_sizes=[100]) == 0
    # offered fewer rows than needed: never more than offered
    assert plan_drops(lim, count=9, nbytes=0, oldest_sizes=[1, 1]) == 2
    assert over_limits(lim, 6, 0) and over_limits(lim, 5, 1001) and not over_limits(lim, 5, 1000)


def test_expiry_cutoff() -> None:
    assert expiry_cutoff(Limits(1, 1, max_age_s=86400.0), now=100_000.0) == 13_600.0


@pytest.mark.arm_smoke
def test_reconnect_delay_is_capped_exponential() -> None:
    delays = [reconnect_delay(n, 1.0, 60.0) for n in range(0, 10)]
    assert delays == [0.0, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0, 60.0]
    assert reconnect_delay(10_000, 0.5, 30.0) == 30.0


def test_token_bucket() -> None:
    unlimited = TokenBucket(0, now=0.0)
    assert unlimited.available(0.0) >= 1 << 20 and unlimited.wait_s() == 0.0
    b = TokenBucket(10.0, now=0.0)
    assert b.available(0.0) == 10
    b.take(10)
    assert b.available(0.0) == 0
    assert b.wait_s() == pytest.approx(0.1)
    assert b.available(0.35) == 3
    assert b.available(100.0) == 10  # burst capped at one second's worth


def test_resume_merges_the_marks_and_counts_each_gap_once() -> None:
    from edge_agent.core.queue.policy import Marks, resume

    clean = Marks(seq=50, committed=50, boot=3, rows=10, clean=True)
    r = resume(clean, clean, salvaged=False)
    assert (r.boot, r.seq, r.crashed, r.skipped, r.lost) == (4, 50, False, 0, 0)
    crashed = Marks(seq=66, committed=50, boot=3, rows=10, clean=False)
    r = resume(crashed, crashed, salvaged=False)
    assert (r.seq, r.crashed, r.skipped, r.skipped_to) == (66, True, 16, 66)
    again = Marks(seq=74, committed=50, boot=4, rows=10, clean=False, skipped_to=66)  # no commit since
    r = resume(again, again, salvaged=False)
    assert (r.boot, r.seq, r.skipped) == (5, 74, 8)  # only the numbers above the counted gap
    # the file lost its WAL: it holds rows up to seq 30, the marks saw 50 committed
    old = Marks(seq=46, committed=30, boot=3, rows=5, clean=False)
    r = resume(old, crashed, salvaged=False)
    assert (r.seq, r.lost, r.skipped) == (66, 10, 16)  # lost <= rows stored
    r = resume(Marks(), clean, salvaged=False)  # the whole file gone
    assert (r.seq, r.boot, r.lost, r.crashed) == (50, 4, 10, False)
    assert resume(old, crashed, salvaged=True).lost == 0  # a salvage counts its own loss
    assert resume(clean, None, salvaged=False).seq == 50  # no marks file yet (an older queue)


def test_a_message_exactly_the_byte_cap_fits_and_a_refusal_is_false() -> None:
    lim = Limits(max_messages=3, max_bytes=100, max_age_s=60)
    assert admit(lim, count=0, nbytes=0, new_bytes=100).accept is True
    assert admit(lim, count=0, nbytes=0, new_bytes=101).accept is False


def test_a_slow_token_bucket_allows_one_message_then_waits_for_the_next() -> None:
    # rate_limit_per_s = 0.5: one publish every 2 s, a burst of one, never unlimited
    b = TokenBucket(0.5, now=0.0)
    assert b.available(0.0) == 1
    b.take(1)
    assert b.available(0.0) == 0 and b.wait_s() == pytest.approx(2.0)
    assert b.available(1.0) == 0 and b.wait_s() == pytest.approx(1.0)
    assert b.available(2.0) == 1


def test_a_token_bucket_refills_from_its_last_stamp_and_waits_only_when_short() -> None:
    b = TokenBucket(10.0, now=1000.0)
    b.take(10)
    assert b.available(1000.25) == 2  # 0.25 s x 10/s since the stamp, not since the epoch
    assert b.wait_s() == 0.0  # 2.5 tokens left: no wait
    b.take(1)
    assert b.wait_s() == 0.0  # 1.5 tokens left
    b.take(1)
    assert b.wait_s() == pytest.approx(0.05)  # 0.5 tokens: half a token at 10/s


def test_reserve_arithmetic_stays_whole_bytes() -> None:
    from edge_agent.core.queue.policy import commit_slice_bytes, reserve_kept

    assert reserve_kept(1_000_003 + (1 << 20)) == (1_000_003 + (1 << 20)) // 4
    assert commit_slice_bytes(8_000_001) == 1_000_000


def test_resume_counts_a_crash_only_when_a_run_ended_uncleanly_or_lost_rows() -> None:
    from edge_agent.core.queue.policy import Marks, resume

    # a clean close with numbers reserved above the last commit (rejected or dropped by that run)
    clean = Marks(seq=60, committed=50, boot=1, rows=5, clean=True)
    r = resume(clean, clean, salvaged=False)
    assert (r.crashed, r.skipped, r.committed, r.lost) == (False, 0, 50, 0)
    # either side unclean is a crash
    unclean = Marks(seq=60, committed=50, boot=1, rows=5, clean=False)
    assert resume(unclean, clean, salvaged=False).skipped == 10
    assert resume(clean, unclean, salvaged=False).skipped == 10
    # both clean, but one committed row missing from the file: a loss, and the gap above it
    kept = Marks(seq=60, committed=51, boot=1, rows=5, clean=True)
    r = resume(clean, kept, salvaged=False)
    assert (r.lost, r.crashed, r.skipped, r.committed) == (1, True, 9, 51)
    # a close that could write only the marks file (full disk): its exact last number there, the
    # file still holding the run's reservation; no crash, and numbering goes on after the last one
    file_left = Marks(seq=19, committed=3, boot=1, rows=3, clean=False)
    closed = Marks(seq=4, committed=3, boot=1, rows=3, clean=True, skipped_to=4)
    r = resume(file_left, closed, salvaged=False)
    assert (r.crashed, r.skipped, r.seq, r.lost) == (False, 0, 4, 0)
    # the same reservation without that close (a crash) is a gap
    assert resume(file_left, replace(closed, clean=False), salvaged=False).skipped == 15
    assert resume(file_left, replace(closed, skipped_to=0), salvaged=False).skipped == 16
    assert resume(file_left, replace(closed, committed=2), salvaged=False).skipped == 15


def test_resume_loses_at_most_the_missing_commits_and_skips_above_either_count() -> None:
    from edge_agent.core.queue.policy import Marks, resume

    # the WAL is gone: the file holds up to 30, the marks saw 50 committed with 100 rows stored
    r = resume(Marks(seq=30, committed=30, rows=100), Marks(seq=50, committed=50, rows=100), salvaged=False)
    assert r.lost == 20
    # a gap counted by an earlier start, known to only one of the two files, is not counted again
    db = Marks(seq=74, committed=50, clean=False, skipped_to=66)
    kept = Marks(seq=74, committed=50, clean=False, skipped_to=0)
    assert resume(db, kept, salvaged=False).skipped == 8
    assert resume(kept, db, salvaged=False).skipped == 8
