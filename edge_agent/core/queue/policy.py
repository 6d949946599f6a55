"""Pure decisions for the outbox: what to admit, what to drop, how long to wait before reconnecting.

Kept apart from the SQLite adapter so every branch (caps, policy, oversize, backoff) is unit-tested
without a database, and the adapter only executes what these functions decide.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal, Optional, Tuple

Policy = Literal["drop_oldest", "reject_new"]


@dataclass(frozen=True)
class Limits:
    """Caps on the outbox; ``max_age_s`` applies to rows still waiting to be sent."""

    max_messages: int
    max_bytes: int
    max_age_s: float
    policy: Policy = "drop_oldest"


@dataclass(frozen=True)
class Admission:
    """Outcome of :func:`admit`: ``accept`` (maybe after dropping) or ``reject`` with a reason."""

    accept: bool
    reason: str = ""


def admit(limits: Limits, count: int, nbytes: int, new_bytes: int) -> Admission:
    """Decide whether one more message of ``new_bytes`` may enter a queue holding ``count``/``nbytes``.

    Under ``drop_oldest`` a message is always admitted (room is made by :func:`plan_drops` when
    the batch is committed) unless it alone exceeds ``max_bytes``: no policy can store that.
    """
    if new_bytes > limits.max_bytes:
        return Admission(False, f"message of {new_bytes} bytes exceeds queue.max_bytes={limits.max_bytes}")
    if limits.policy == "drop_oldest":
        return Admission(True)
    if count + 1 > limits.max_messages:
        return Admission(False, f"queue holds {count} messages (queue.max_messages={limits.max_messages})")
    if nbytes + new_bytes > limits.max_bytes:
        return Admission(False, f"queue holds {nbytes} bytes (queue.max_bytes={limits.max_bytes})")
    return Admission(True)


def plan_drops(limits: Limits, count: int, nbytes: int, oldest_sizes: Iterable[int]) -> int:
    """How many of the oldest rows (sizes given oldest first) must go to get under both caps.

    Returns at most the number of sizes offered; the caller offers only droppable rows.
    """
    drop = 0
    for size in oldest_sizes:
        if count <= limits.max_messages and nbytes <= limits.max_bytes:
            break
        count -= 1
        nbytes -= size
        drop += 1
    return drop


def over_limits(limits: Limits, count: int, nbytes: int) -> bool:
    """True when the queue holds more than either cap allows."""
    return count > limits.max_messages or nbytes > limits.max_bytes


# 2026-01-01 UTC: no row of this software was made before it. A row stamped earlier was made while
# the clock was not yet set (a board without an RTC battery boots at systemd's build date, 2018 on
# JetPack 4); once NTP steps the clock it would look years old and be expired, a whole offline
# backlog at once. Such rows are of unknown age: never expired, still bounded by the caps.
CLOCK_FLOOR = 1767225600.0


def expiry_cutoff(limits: Limits, now: float) -> float:
    """Rows created before this unix time (and not before :data:`CLOCK_FLOOR`) are dropped."""
    return now - limits.max_age_s


class TokenBucket:
    """Rate limiter (``rate`` messages/s, burst of one second); ``rate <= 0`` means unlimited.

    Time is passed in, so the arithmetic stays pure and testable.
    """

    def __init__(self, rate: float, now: float) -> None:
        self.rate = rate
        self.capacity = max(1.0, rate)
        self.tokens = self.capacity
        self.stamp = now

    def available(self, now: float) -> int:
        """Whole messages that may be sent at ``now``."""
        if self.rate <= 0:
            return 1 << 30
        self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        return int(self.tokens)

    def take(self, n: int) -> None:
        if self.rate > 0:
            self.tokens -= n

    def wait_s(self) -> float:
        """Seconds until at least one token is available (0 when unlimited)."""
        if self.rate <= 0 or self.tokens >= 1:
            return 0.0
        return (1.0 - self.tokens) / self.rate


@dataclass(frozen=True)
class Marks:
    """Sequence high-water marks, as kept in the queue file's ``meta`` and in the marks file beside it.

    ``seq`` is a reservation: no number above it was handed out. ``committed`` is the highest seq
    written to the queue, ``rows`` the row count at the last write, ``clean`` whether that write
    was a clean close, ``skipped_to`` the seq up to which crash gaps are already counted, and
    ``counters`` the queue's counters in the order the outbox gives them (the marks file keeps
    them too: on a full disk it is the one place that can still be written).
    """

    seq: int = 0
    committed: int = 0
    boot: int = 0
    rows: int = 0
    clean: bool = True
    skipped_to: int = 0
    counters: Tuple[int, ...] = ()


@dataclass(frozen=True)
class Resume:
    """Where a new run of the queue starts, and what the previous run left uncounted."""

    boot: int
    seq: int  # the next put gets seq + 1
    committed: int
    crashed: bool  # the previous run ended without a clean close
    skipped: int  # numbers reserved but never committed (the crash window): a gap, counted
    skipped_to: int  # every number up to here is accounted for: a later crash counts only above
    lost: int  # committed rows the file no longer holds (its WAL or the file itself was lost)


def resume(db: Marks, kept: Optional[Marks], salvaged: bool) -> Resume:
    """Merge the marks found in the queue file (``db``) with the ones kept beside it (``kept``).

    The file can lose its WAL, its header or itself; the marks file is fsync'd before every commit
    that reserves numbers, so the merged reservation is above every number that may have left the
    device. When the kept marks saw commits the file does not hold (``kept.committed > db.committed``)
    those rows are lost: counted as at most ``kept.rows`` and at most the committed numbers missing
    (acked rows among them were delivered, so this never hides a loss but may count one too many).
    A salvage counts its own loss (from the last known row count), so that case adds nothing here.
    """
    if kept is None:
        kept = db
    seq = max(db.seq, kept.seq)
    if (
        kept.clean
        and not db.clean
        and kept.committed >= db.committed
        and kept.skipped_to == kept.seq < db.seq
    ):
        # a close that could not write the file (full disk) kept its exact last number in the marks
        # (``Ledger.counters_to_marks``): the file's reservation above it was never handed out, and
        # counting it as a crash gap reported a crash that did not happen
        seq = kept.seq
    committed = max(db.committed, kept.committed)
    lost = 0
    if not salvaged and kept.committed > db.committed:
        lost = min(kept.rows, kept.committed - db.committed)
    # a gap counted once is not counted again: a run that crashes before it commits anything
    # (e.g. on a full disk) leaves the same reservation behind, and only numbers above what an
    # earlier start counted are new
    base = max(committed, db.skipped_to, kept.skipped_to)
    crashed = (not db.clean or not kept.clean or lost > 0) and seq > base
    skipped = seq - base if crashed else 0
    # after this start every number up to seq is accounted for: stored, counted as dropped or
    # rejected by the run that handed it out (a clean close), or counted here as skipped or lost
    return Resume(max(db.boot, kept.boot) + 1, seq, committed, crashed, skipped, seq, lost)


# ---- the full-disk policy (the adapter, outbox_space, only carries it out) ---------------------
FULL_DISK_ATTEMPTS = 16  # commit tries per slice on SQLITE_FULL before its rows are dropped
ACK_ATTEMPTS = 3  # deletes of acknowledged rows tried per ack on SQLITE_FULL before they wait
OPEN_FULL_BYTES = 64 * 1024  # an open that fails with at most this much free met a full disk

FullDiskEvent = Literal["open", "opened", "write", "commit", "drop", "ack"]


@dataclass(frozen=True)
class FullDiskStep:
    """What the outbox does on a full disk, after first giving back the reserve down to ``keep``
    bytes (``None``: the reserve is left as it is). Whenever the reserve is given back the file is
    also capped at its size, so new rows only reuse pages freed by deletes.

    - ``retry``: try the same write again (a write retried in slices of :func:`commit_slice_bytes`);
    - ``raise``: not a full disk after all: the error stands;
    - ``cap``: nothing to retry, only give back the reserve and cap the file;
    - ``hold``: keep the batch in memory and refuse new results until a commit works (``reject_new``);
    - ``drop_oldest``: delete the ``n`` oldest stored rows (counted as dropped), then retry;
    - ``drop_batch``: nothing is left to drop: the ``n`` new rows are dropped (counted);
    - ``defer``: acknowledged rows stay undeleted (out of claims and figures) until the next ack.
    """

    action: Literal["retry", "raise", "cap", "hold", "drop_oldest", "drop_batch", "defer"]
    n: int = 0
    keep: Optional[int] = None


def full_disk_step(
    policy: Policy,
    event: FullDiskEvent,
    *,
    reserve_bytes: int = 0,
    attempt: int = 0,
    batch_rows: int = 0,
    dropped_last: Optional[int] = None,
    free_bytes: int = 0,
) -> FullDiskStep:
    """The whole full-disk policy, one decision per event, under both queue policies.

    - ``open``: opening the file failed (SQLITE_FULL, or an I/O error when the 32 KiB ``-shm``
      cannot be created) with ``free_bytes`` left: release the whole reserve and retry, unless there
      is more than :data:`OPEN_FULL_BYTES` free (then it is some other error).
    - ``opened``: the file opened but less than twice the reserve is free: give back the quarter
      kept for opening (not needed again until close tops it up) and cap the file.
    - ``write``: a commit met SQLITE_FULL: keep a quarter of the reserve (the room the next start
      needs to open the file), cap the file, retry in slices.
    - ``commit``: the ``attempt``-th (0-based) retry of a slice of ``batch_rows`` rows failed too:
      ``reject_new`` holds the batch; ``drop_oldest`` doubles what it drops per attempt (at least 8
      rows, at least the batch) so a disk filled by something else is won back in a few steps, not
      one row per commit; a drop that freed nothing (``dropped_last == 0``) or running out of
      attempts (:data:`FULL_DISK_ATTEMPTS`) drops the batch.
    - ``drop``: deleting the oldest rows met SQLITE_FULL itself: the batch is dropped.
    - ``ack``: the ``attempt``-th SQLITE_FULL deleting acknowledged rows: retry after a checkpoint,
      then with the whole reserve released, then leave them for the next ack (a restart before it
      only redelivers them).
    """
    if event == "open":
        return FullDiskStep("retry", keep=0) if free_bytes <= OPEN_FULL_BYTES else FullDiskStep("raise")
    if event == "opened":
        return FullDiskStep("cap", keep=0)
    if event == "write":
        return FullDiskStep("retry", keep=reserve_kept(reserve_bytes))
    if event == "ack":
        if attempt == 0:
            return FullDiskStep("retry")
        return FullDiskStep("retry", keep=0) if attempt < ACK_ATTEMPTS - 1 else FullDiskStep("defer")
    if event == "drop":
        return FullDiskStep("drop_batch", batch_rows)
    if policy == "reject_new":
        return FullDiskStep("hold")
    if dropped_last == 0 or attempt >= FULL_DISK_ATTEMPTS:
        return FullDiskStep("drop_batch", batch_rows)
    return FullDiskStep("drop_oldest", max(batch_rows, 8) << attempt)


def reserve_kept(reserve_bytes: int) -> int:
    """Bytes of the reserve kept on the first SQLITE_FULL: a quarter, the room the next start needs
    to open the file (a WAL database cannot be opened without its 32 KiB ``-shm``)."""
    return reserve_bytes // 4


def commit_slice_bytes(reserve_bytes: int) -> int:
    """Payload bytes per transaction while the disk is full: an eighth of the reserve (at least
    64 KiB), so each commit's WAL fits in the three quarters released."""
    return max(64 * 1024, reserve_bytes // 8)


def may_leave_full(free_bytes: int, reserve_bytes: int) -> bool:
    """The disk has room again: twice the reserve plus 1 MiB free (hysteresis, so the cap is not
    lifted and re-set at every commit on a disk hovering at full)."""
    return free_bytes >= 2 * reserve_bytes + (1 << 20)
