"""Durable outbox over stdlib sqlite3: every result is on disk before it may leave the device.

A row is deleted only once the broker acknowledged it. "In flight" (claimed by the sync thread,
not yet acked) lives in memory only, so a claim writes nothing required and a crash can only
cause a redelivery (same message id), never a loss.

Durability: WAL with ``synchronous=FULL`` on the writer connection. ``put()`` appends to an
in-memory batch committed (one fsync) at ``flush_batch`` rows or ``flush_interval_s`` after its
first row (default 0.2 s), by a background flusher, or by ``flush()``. A crash loses at most the
uncommitted batch; every message carries a device ``seq`` (see docs/queue.md) so that loss shows
as a gap. Full disk: see :mod:`edge_agent.adapters.outbox_space`.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Optional, Union

from edge_agent.adapters.outbox_base import Batch
from edge_agent.adapters.outbox_claims import ClaimsMixin
from edge_agent.adapters.outbox_db import (
    ROWS_DELTA,
    STATS_COUNTERS,
    connect,
    is_corrupt,
    is_disk_full,
    iso_time,
    lock_queue,
    recover_if_corrupt,
)
from edge_agent.adapters.outbox_marks import MarksFile, MarksMixin, read_marks
from edge_agent.adapters.outbox_reserve import Reserve, free_bytes
from edge_agent.adapters.outbox_space import SLICE_BYTES, SpaceMixin, _slices
from edge_agent.core.config import QueueConfig
from edge_agent.core.messages import encode, stamp
from edge_agent.core.queue_policy import Limits, Marks, admit
from edge_agent.errors import QueueError, QueueFullError

log = logging.getLogger("edge_agent.outbox")

COUNTERS = STATS_COUNTERS
MAINTENANCE_S = 30.0


class Outbox(SpaceMixin, ClaimsMixin, MarksMixin):
    """Thread-safe durable queue: the agent loop ``put()``s, the sync thread claims and acks."""

    def __init__(
        self,
        path: Union[str, Path],
        limits: Limits,
        flush_interval_s: float = 0.2,
        flush_batch: int = 100,
        max_pages: Optional[int] = None,
        reserve_bytes: int = 1 << 20,
    ) -> None:
        """``max_pages`` caps the file at that many SQLite pages (PRAGMA max_page_count)."""
        self.path = Path(path)
        self.limits = limits
        self.flush_interval_s = flush_interval_s
        self.flush_batch = flush_batch
        self._max_pages = max_pages
        self._reserve = Reserve(self.path, reserve_bytes)
        self._lockfile = lock_queue(self.path)
        # the marks kept beside the file: they survive the loss of its header, its WAL or itself
        kept = read_marks(self.path)
        try:
            try:
                self._marks = MarksFile(self.path)
                recovery, totals, meta = self._open(kept)
            except (sqlite3.Error, OSError) as exc:
                # a full disk shows as SQLITE_FULL, or as "disk I/O error" when the -shm cannot grow
                if (
                    (isinstance(exc, sqlite3.Error) and is_corrupt(exc))
                    or free_bytes(self.path.parent) > 65536
                    or not self._reserve.release()
                ):
                    raise
                log.warning("outbox %s: disk full at open (%s): released the disk reserve", self.path, exc)
                if not hasattr(self, "_marks"):
                    self._marks = MarksFile(self.path)
                recovery, totals, meta = self._open(kept)
        except (sqlite3.Error, OSError) as exc:
            if hasattr(self, "_marks"):
                self._marks.close()
            self._lockfile.close()
            raise QueueError(f"{self.path}: cannot open the queue database: {exc}") from None
        # counters: the file's, or the marks' when a full disk let only the marks be written
        saved = kept.counters if kept is not None else ()
        self.counters = {
            k: max(meta.get(k, 0), saved[i] if i < len(saved) else 0) for i, k in enumerate(COUNTERS)
        }
        self._count, self._bytes = int(totals[0]), int(totals[1])
        if recovery is not None:
            self.counters["salvaged"] += recovery.salvaged
            self.counters["lost"] += recovery.lost
            self.counters["corrupt_files"] += 1
        self._resume(meta, kept, recovery is not None)
        self._inflight: set[int] = set()
        self._acked_undeleted: set[int] = set()  # acked, but the DELETE met a full disk
        self._lock = threading.Lock()  # batch, counters, cached totals
        self._wlock = threading.Lock()  # writer connection / flush serialisation
        self._rlock = threading.Lock()  # sync-side connection
        self._cond = threading.Condition(self._lock)
        self._batch: Batch = []
        self._batch_bytes = 0
        # a batch taken out for commit is counted here until it lands in _count or back in _batch
        self._committing = (0, 0)
        self._batch_since = 0.0
        self._disk_full = False  # reject_new: refusing until a commit works
        self._capped = False  # the file may not grow: only freed pages are reused
        self._full_drops = 0  # rows dropped in the current full-disk streak
        self._dirty = self._dirty or recovery is not None or meta.get("clean", 1) == 0
        self._wrote_unclean = False  # this run wrote a reservation (clean = 0): close must write
        self._closing = False
        self._ahead = min(flush_batch, 16)
        self._rejecting = False
        self._closed = False
        self._last_warn: dict[str, float] = {}
        if self._max_pages is not None:
            self._set_cap(self._max_pages)
        if not self._reserve.ensure():
            # opened: the quarter kept for opening is not needed any more until close tops it up
            self._enter_full("less than twice the reserve is free at open", keep=0)
        self._tune_sync_wal()
        try:
            self.expire()
        except QueueError:
            self._r.close()
            self._w.close()
            self._marks.close()
            self._lockfile.close()
            raise
        self._flusher = threading.Thread(target=self._run_flusher, name="outbox-flusher", daemon=True)
        self._flusher.start()

    def _open(self, kept: Optional[Marks] = None) -> tuple[Any, Any, dict[str, int]]:
        recovery = recover_if_corrupt(self.path, connect, kept)
        self._w = connect(self.path, "FULL")
        try:
            self._r = connect(self.path, "NORMAL")
            totals = self._w.execute("SELECT count(*), total(size) FROM messages").fetchone()
            meta = {str(k): int(v) for k, v in self._w.execute("SELECT key, value FROM meta")}
        except sqlite3.Error:
            self._w.close()
            raise
        return recovery, totals, meta

    @classmethod
    def from_config(cls, cfg: QueueConfig) -> Outbox:
        limits = Limits(cfg.max_messages, cfg.max_bytes, cfg.max_age_days * 86400.0, cfg.policy)
        return cls(cfg.path, limits, cfg.flush_interval_s, cfg.flush_batch, reserve_bytes=cfg.reserve_bytes)

    # ---- producer side -------------------------------------------------------------------
    def put(self, topic: str, payload: dict[str, Any]) -> str:
        """Queue one message; stamps ``seq`` and ``boot`` (and ``id`` when absent) into the places
        the message's builder named (``core.messages.stamp``); returns the id.

        Every call takes a sequence number, also when the message is then rejected, so the far
        end sees every result the device lost as a gap. Raises QueueFullError under ``reject_new``
        at a cap or on a full disk, and for a message larger than ``max_bytes`` under any policy.
        """
        try:
            return self._put(topic, payload)
        except QueueFullError:
            # a refused message took a number too: beyond the reservation, reserve it (and the
            # count of refusals) in the marks, or a crash would forget the loss and reuse the number
            with self._lock:
                spent = self._seq > self._seq_reserved
            if spent:
                self._reserve_in_marks()
            raise

    def _put(self, topic: str, payload: dict[str, Any]) -> str:
        with self._lock:
            if self._closed:
                raise QueueError(f"{self.path}: queue is closed")
            self._seq += 1
            msg_id = stamp(payload, seq=self._seq, boot=self.boot)
            data = encode(payload)
            if self._disk_full and self.limits.policy == "reject_new":
                self._reject("disk full (SQLITE_FULL)")
            decision = admit(
                self.limits, self._count + len(self._batch), self._bytes + self._batch_bytes, len(data)
            )
            if not decision.accept:
                self._reject(decision.reason)
            self._rejecting = False
            if not self._batch:
                self._batch_since = time.monotonic()
            self._batch.append((msg_id, topic, data, time.time(), self._seq))
            self._batch_bytes += len(data)
            n = len(self._batch)
            if n == 1 or n >= self.flush_batch:  # start the interval clock, or flush now
                self._cond.notify_all()
            reserve_spent = self._seq >= self._seq_reserved
        if self.flush_interval_s == 0 or n >= 4 * self.flush_batch or reserve_spent:
            # reject_new on a full disk: the batch is held, later puts refused
            with contextlib.suppress(QueueFullError):
                self.flush()
        return msg_id

    def _reject(self, reason: str) -> None:
        self.counters["rejected"] += 1
        self._dirty = True
        if not self._rejecting:  # once per streak of rejections
            self._rejecting = True
            log.warning("outbox %s: rejecting new messages: %s (policy reject_new)", self.path, reason)
        raise QueueFullError(f"{self.path}: {reason}")

    def flush(self) -> int:
        """Commit the in-memory batch (one fsync); returns rows written."""
        with self._wlock:
            with self._lock:
                batch, self._batch, self._batch_bytes = self._batch, [], 0
                self._committing = (len(batch), sum(len(b[2]) for b in batch))
            # one transaction per <= 256 KiB: the WAL (autocheckpointed at 64 pages) then never holds
            # more than ~512 KiB, which the 3/4 of the reserve released on SQLITE_FULL can always
            # checkpoint -- 100 results with 64 KiB snapshots in one transaction could not
            slices = _slices(batch, SLICE_BYTES)
            n = 0
            for k, part in enumerate(slices):
                try:
                    n += self._commit(part)
                except sqlite3.Error as exc:
                    rest = [b for later in slices[k:] for b in later]
                    self._reserve_in_marks()
                    if is_disk_full(exc):
                        return n + self._on_disk_full(rest)
                    self._requeue(rest)
                    raise QueueError(f"{self.path}: cannot write the queue: {exc}") from None
            return n

    def _requeue(self, batch: Batch) -> None:
        with self._lock:
            self._batch[:0] = batch
            self._batch_bytes += sum(len(b[2]) for b in batch)
            self._committing = (0, 0)

    def _meta_rows(self, counters: dict[str, int], seq: int, committed: int) -> list[tuple[str, int]]:
        # seq: exact on a clean close, else a reservation ahead of what was handed out (put() commits
        # before handing out more), so a crash can never make the next boot reuse a number. Twice the
        # last batch, at least 16, at most flush_batch: the gap a crash leaves stays close to the loss
        # (30 results/s, 0.2 s window: ~6 per batch, gap <= 16 instead of 100)
        reserved = seq if self._closing else seq + self._ahead
        rows = list(counters.items())
        rows += [("seq", reserved), ("seq_committed", committed), ("boot", self.boot)]
        rows.append(("skipped_to", self._skipped_to))
        rows.append(("clean", 1 if self._closing else 0))
        return rows

    def _commit(self, batch: Batch) -> int:
        conn = self._w
        with self._lock:
            count, nbytes, dirty, seq = self._count, self._bytes, self._dirty, self._seq
        if not batch and not dirty and (seq < self._seq_reserved or seq == self._seq_at_open):
            return 0
        added = sum(len(b[2]) for b in batch)
        committed = max([self._seq_committed, *(b[4] for b in batch)])
        self._ahead = min(self.flush_batch, max(16, 2 * len(batch)))
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.executemany(
                "INSERT INTO messages(msg_id, topic, payload, size, created) VALUES (?,?,?,?,?)",
                [(m, t, p, len(p), c) for m, t, p, c, _ in batch],
            )
            dropped, freed = self._drop_over_limits(count + len(batch), nbytes + added)
            with self._lock:
                counters = dict(self.counters)
                counters["dropped"] += dropped
            meta = self._meta_rows(counters, seq, committed)
            conn.executemany("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", meta)
            conn.execute(ROWS_DELTA, (len(batch) - dropped,))
            self._save_marks(conn, meta)
            self._commit_txn(conn)
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        with self._lock:
            self._count += len(batch) - dropped
            self._bytes += added - freed
            self._committing = (0, 0)
            self.counters["dropped"] += dropped
            self._dirty = self._dirty and not dirty
            self._disk_full = False
            self._seq_reserved = dict(meta)["seq"]
            self._seq_committed = committed
        if self._capped:
            self._checkpoint()  # on a full disk the WAL's bytes go straight back
        if dropped:
            self._warn(
                "cap",
                f"outbox {self.path}: at its cap ({self.limits.max_messages} messages / "
                f"{self.limits.max_bytes} bytes): dropped the {dropped} oldest "
                f"(dropped so far: {self.counters['dropped']})",
            )
        return len(batch)

    def _warn(self, key: str, msg: str, level: int = logging.WARNING, period: float = 10.0) -> None:
        now = time.monotonic()
        if now - self._last_warn.get(key, -1e9) >= period:
            self._last_warn[key] = now
            log.log(level, "%s", msg)

    # ---- maintenance ---------------------------------------------------------------------
    def _run_flusher(self) -> None:
        next_maintenance = time.monotonic() + MAINTENANCE_S
        while True:
            with self._lock:
                while not self._closed:
                    now = time.monotonic()
                    due = self._batch_since + self.flush_interval_s if self._batch else now + MAINTENANCE_S
                    if len(self._batch) >= self.flush_batch or now >= min(due, next_maintenance):
                        break
                    self._cond.wait(min(due, next_maintenance) - now)
                if self._closed:
                    return
            try:
                self.flush()
                if time.monotonic() >= next_maintenance:
                    next_maintenance = time.monotonic() + MAINTENANCE_S
                    self._maintain()
            except QueueFullError:
                with self._lock:
                    self._cond.wait(max(self.flush_interval_s, 0.5))
            except (QueueError, sqlite3.Error) as exc:
                self._warn(
                    "flush", f"outbox {self.path}: background flush failed (will retry): {exc}", logging.ERROR
                )
                with self._lock:
                    self._cond.wait(max(self.flush_interval_s, 0.5))

    def stats(self) -> dict[str, Any]:
        """Queue figures: ``pending`` counts every message not yet acknowledged (stored + unflushed)."""
        with self._rlock:
            self._check_open()
            try:
                row = self._r.execute("SELECT created FROM messages ORDER BY id LIMIT 1").fetchone()
            except sqlite3.Error as exc:  # translated here: callers (the sync, status) never see sqlite3
                raise QueueError(f"{self.path}: cannot read the queue: {exc}") from None
        with self._lock:
            oldest = row[0] if row else (self._batch[0][3] if self._batch else None)
            return {
                "pending": self._count - len(self._acked_undeleted) + len(self._batch) + self._committing[0],
                "inflight": len(self._inflight),
                "unflushed": len(self._batch) + self._committing[0],
                "bytes": self._bytes + self._batch_bytes + self._committing[1],
                "oldest": iso_time(oldest),
                "path": str(self.path),
                "seq": self._seq,
                "boot": self.boot,
                "disk_full": self._capped or self._disk_full,
                **self.counters,
            }

    def close(self) -> None:
        """Flush what is batched, write the exact sequence and counters, close (idempotent, no raise
        on a full disk: what cannot be written is counted as dropped and logged)."""
        with self._lock:
            if self._closed:
                return
            # write the exact seq and the clean mark only if this run wrote anything: a queue that
            # was opened and closed (queue stats/drain of nothing) stays byte-for-byte untouched
            # (or left a reservation on disk: a queue drain after a crash must not count it twice), and
            # the marks when acks changed the row count since they were written
            last = self._marks.last
            self._dirty = (
                self._dirty
                or self._seq != self._seq_at_open
                or self._wrote_unclean
                or (last is not None and last.rows != self._count)
            )
            self._closing = True
        try:
            try:
                self.flush()
            except QueueFullError:
                # reject_new, still full: the held batch is refused storage after all (counted as
                # rejected); the reserve left is kept so that the next start can open the file
                with self._lock:
                    held, self._batch, self._batch_bytes = self._batch, [], 0
                    self.counters["rejected"] += len(held)
                    self._disk_full = False
                log.error(
                    "outbox %s: disk still full at close: %d held messages rejected", self.path, len(held)
                )
            except QueueError as exc:
                log.error("outbox %s: final flush failed: %s", self.path, exc)
            if self._dirty or self._acked_undeleted:
                # the counters of what the full disk cost (rejected, or dropped with nothing left to
                # drop) or acked deletes did not land: spend the reserve kept for the next start
                # (topped up below)
                self._reserve.release()
                self._checkpoint()
                try:
                    if self._acked_undeleted:
                        self.ack([])
                    self.flush()
                except (QueueError, sqlite3.Error) as exc:
                    log.error("outbox %s: counters not written at close: %s", self.path, exc)
            if self._dirty:  # still: the marks file, written in place, is the one place left
                self._counters_to_marks()
        finally:
            with self._lock:
                self._closed = True
                self._cond.notify_all()
            self._flusher.join(timeout=5.0)
            with self._wlock, self._rlock:  # never under a claim/ack still running on another thread
                self._r.close()
                self._w.close()
            self._marks.close()
            if self._capped:  # SQLite just deleted -shm and WAL: keep room to open again
                self._reserve.top_up(self._reserve.size // 4)
            self._lockfile.close()

    def __enter__(self) -> Outbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
