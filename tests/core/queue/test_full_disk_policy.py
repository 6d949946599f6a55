"""The full-disk policy as one pure function (core.queue_policy.full_disk_step), both policies,
every event, each boundary pinned on both sides: moving one by one unit fails a test here.

The adapter carrying it out on a real full tmpfs is tested in test_full_disk.py."""

from __future__ import annotations

from typing import Optional

import pytest

from edge_agent.core.queue.policy import (
    ACK_ATTEMPTS,
    FULL_DISK_ATTEMPTS,
    OPEN_FULL_BYTES,
    FullDiskStep,
    Policy,
    commit_slice_bytes,
    full_disk_step,
    may_leave_full,
    reserve_kept,
)

MiB = 1 << 20
POLICIES: tuple[Policy, ...] = ("drop_oldest", "reject_new")


def commit(policy: Policy, attempt: int, rows: int, dropped: Optional[int] = None) -> FullDiskStep:
    return full_disk_step(
        policy, "commit", reserve_bytes=MiB, attempt=attempt, batch_rows=rows, dropped_last=dropped
    )


def test_the_constants_the_boundaries_below_rest_on() -> None:
    assert (FULL_DISK_ATTEMPTS, ACK_ATTEMPTS, OPEN_FULL_BYTES) == (16, 3, 64 * 1024)


@pytest.mark.parametrize("policy", POLICIES)
def test_open_releases_the_whole_reserve_only_when_the_disk_is_really_full(policy: Policy) -> None:
    at = full_disk_step(policy, "open", reserve_bytes=MiB, free_bytes=OPEN_FULL_BYTES)
    assert at == FullDiskStep("retry", keep=0)
    assert full_disk_step(policy, "open", free_bytes=0) == FullDiskStep("retry", keep=0)
    # one byte more free: not a full disk, the error stands (and the reserve stays)
    assert full_disk_step(policy, "open", free_bytes=OPEN_FULL_BYTES + 1) == FullDiskStep("raise")


@pytest.mark.parametrize("policy", POLICIES)
def test_opened_without_room_for_the_reserve_caps_and_keeps_nothing(policy: Policy) -> None:
    assert full_disk_step(policy, "opened", reserve_bytes=MiB) == FullDiskStep("cap", keep=0)


@pytest.mark.parametrize("policy", POLICIES)
def test_the_first_full_commit_keeps_a_quarter_of_the_reserve_and_retries(policy: Policy) -> None:
    assert full_disk_step(policy, "write", reserve_bytes=MiB) == FullDiskStep("retry", keep=MiB // 4)
    assert full_disk_step(policy, "write", reserve_bytes=4 * MiB + 3).keep == MiB
    assert full_disk_step(policy, "write", reserve_bytes=0).keep == 0


def test_reject_new_holds_the_batch_at_every_attempt() -> None:
    for attempt in (0, 1, FULL_DISK_ATTEMPTS - 1, FULL_DISK_ATTEMPTS, FULL_DISK_ATTEMPTS + 5):
        for dropped in (None, 0, 7):
            assert commit("reject_new", attempt, 5, dropped) == FullDiskStep("hold")


def test_drop_oldest_doubles_from_at_least_8_rows_or_the_batch() -> None:
    assert [commit("drop_oldest", a, 5).n for a in range(4)] == [8, 16, 32, 64]
    assert [commit("drop_oldest", a, 20, 7).n for a in range(3)] == [20, 40, 80]
    # the floor of 8 rows, both sides
    assert commit("drop_oldest", 0, 7).n == 8
    assert commit("drop_oldest", 0, 8).n == 8
    assert commit("drop_oldest", 0, 9).n == 9
    assert commit("drop_oldest", 0, 0) == FullDiskStep("drop_oldest", 8)  # an empty slice: still room made


def test_drop_oldest_gives_up_after_the_last_attempt_or_a_drop_that_freed_nothing() -> None:
    assert commit("drop_oldest", FULL_DISK_ATTEMPTS - 1, 20, 9) == FullDiskStep(
        "drop_oldest", 20 << (FULL_DISK_ATTEMPTS - 1)
    )
    assert commit("drop_oldest", FULL_DISK_ATTEMPTS, 20, 9) == FullDiskStep("drop_batch", 20)
    assert commit("drop_oldest", 2, 20, 0) == FullDiskStep("drop_batch", 20)  # nothing freed
    assert commit("drop_oldest", 2, 20, 1).action == "drop_oldest"  # one row freed: go on
    assert commit("drop_oldest", 0, 20, None).action == "drop_oldest"  # no drop yet


@pytest.mark.parametrize("policy", POLICIES)
def test_a_drop_that_meets_a_full_disk_itself_drops_the_batch(policy: Policy) -> None:
    assert full_disk_step(policy, "drop", batch_rows=12) == FullDiskStep("drop_batch", 12)


@pytest.mark.parametrize("policy", POLICIES)
def test_ack_retries_then_releases_everything_then_defers(policy: Policy) -> None:
    steps = [full_disk_step(policy, "ack", reserve_bytes=MiB, attempt=a) for a in range(ACK_ATTEMPTS + 1)]
    assert steps == [
        FullDiskStep("retry"),  # after a checkpoint only: the reserve is not touched
        FullDiskStep("retry", keep=0),
        FullDiskStep("defer"),
        FullDiskStep("defer"),
    ]


def test_reserve_arithmetic_boundaries() -> None:
    assert reserve_kept(MiB) == 256 * 1024 and reserve_kept(3) == 0 and reserve_kept(4) == 1
    assert commit_slice_bytes(MiB) == 128 * 1024 and commit_slice_bytes(0) == 64 * 1024
    assert commit_slice_bytes(8 * MiB) == MiB
    # the 64 KiB floor, both sides: 8 * 64 KiB = 512 KiB of reserve
    assert commit_slice_bytes(512 * 1024 + 7) == 64 * 1024
    assert commit_slice_bytes(512 * 1024 + 8) == 64 * 1024 + 1
    assert may_leave_full(3 * MiB, MiB) and not may_leave_full(3 * MiB - 1, MiB)
    assert may_leave_full(MiB, 0) and not may_leave_full(MiB - 1, 0)


def test_the_defaults_describe_a_first_failure_with_no_reserve() -> None:
    """Keyword defaults (the adapter always passes every one): attempt 0, an empty slice, no reserve."""
    assert full_disk_step("drop_oldest", "commit") == FullDiskStep("drop_oldest", 8)
    assert full_disk_step("drop_oldest", "drop") == FullDiskStep("drop_batch", 0)
    assert full_disk_step("reject_new", "write") == FullDiskStep("retry", keep=0)
