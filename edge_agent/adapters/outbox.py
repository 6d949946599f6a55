"""Durable outbox over stdlib sqlite3: every result is on disk before it may leave the device.

Message states: *pending* (0) -> *in flight* (1, claimed by the sync thread) -> deleted once the
broker acknowledged it. In-flight rows return to pending on disconnect and at every open, so a
crash can only cause a redelivery (same message id), never a loss.

Durability: WAL with ``synchronous=FULL`` on the writer connection. ``put()`` only appends to an
in-memory batch; the batch is committed (one fsync) when it reaches ``flush_batch`` rows or
``flush_interval_s`` after its first row, by a background flusher, or by ``flush()``. A power cut
can therefore lose at most ``flush_interval_s`` of results that were never committed;
``flush_interval_s = 0`` makes every ``put()`` commit before it returns. Claims and acks use a
second connection with ``synchronous=NORMAL``: losing one of those only means a redelivery.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Union

from edge_agent.adapters.outbox_db import connect, is_disk_full, iso_time, lock_queue, recover_if_corrupt
from edge_agent.core.config import QueueConfig
from edge_agent.core.messages import encode, new_message_id
from edge_agent.core.queue_policy import Limits, admit, expiry_cutoff, over_limits, plan_drops
from edge_agent.errors import QueueError, QueueFullError

log = logging.getLogger("edge_agent.outbox")

COUNTERS = ("dropped", "expired", "rejected", "salvaged", "lost", "corrupt_files")
PENDING, INFLIGHT = 0, 1
MAINTENANCE_S = 30.0
VACUUM_FREE_PAGES = 256


@dataclass(frozen=True)
class Message:
    """A claimed row: ``rowid`` is the local key, ``msg_id`` the id consumers de-duplicate on."""

    rowid: int
    msg_id: str
    topic: str
    payload: bytes
    attempts: int


class Outbox:
    """Thread-safe durable queue: the agent loop ``put()``s, the sync thread claims and acks."""

    def __init__(
        self,
        path: Union[str, Path],
        limits: Limits,
        flush_interval_s: float = 1.0,
        flush_batch: int = 100,
        max_pages: Optional[int] = None,
    ) -> None:
        """``max_pages`` caps the file at that many SQLite pages (PRAGMA max_page_count): a hard
        bound on disk use that behaves exactly like a full disk."""
        self.path = Path(path)
        self.limits = limits
        self.flush_interval_s = flush_interval_s
        self.flush_batch = flush_batch
        self._lockfile = lock_queue(self.path)
        try:
            recovery = recover_if_corrupt(self.path, connect)
            self._w = connect(self.path, "FULL")
            self._r = connect(self.path, "NORMAL")
            if max_pages is not None:
                for conn in (self._w, self._r):
                    conn.execute(f"PRAGMA max_page_count={int(max_pages)}").fetchall()
            self._r.execute("UPDATE messages SET state = 0 WHERE state = 1")
            totals = self._w.execute("SELECT count(*), total(size) FROM messages").fetchone()
            self.counters = {k: 0 for k in COUNTERS}
            self.counters.update(
                {k: int(v) for k, v in self._w.execute("SELECT key, value FROM meta") if k in self.counters}
            )
        except (sqlite3.Error, OSError) as exc:
            self._lockfile.close()
            raise QueueError(f"{self.path}: cannot open the queue database: {exc}") from None
        self._count, self._bytes = int(totals[0]), int(totals[1])
        if recovery is not None:
            self.counters["salvaged"] += recovery.salvaged
            self.counters["lost"] += recovery.lost
            self.counters["corrupt_files"] += 1
        self._inflight = 0
        self._lock = threading.Lock()  # batch, counters, cached totals
        self._wlock = threading.Lock()  # writer connection / flush serialisation
        self._rlock = threading.Lock()  # sync-side connection
        self._cond = threading.Condition(self._lock)
        self._batch: list[tuple[str, str, bytes, float]] = []
        self._batch_bytes = 0
        # a batch taken out for commit is counted here until it lands in _count or back in _batch,
        # so stats() never shows it missing while another thread commits
        self._committing = (0, 0)
        self._batch_since = 0.0
        self._disk_full = False
        self._dirty = True
        self._closed = False
        self._last_warn: dict[str, float] = {}
        self.expire()
        self._flusher = threading.Thread(target=self._run_flusher, name="outbox-flusher", daemon=True)
        self._flusher.start()

    @classmethod
    def from_config(cls, cfg: QueueConfig) -> Outbox:
        limits = Limits(cfg.max_messages, cfg.max_bytes, cfg.max_age_days * 86400.0, cfg.policy)
        return cls(cfg.path, limits, cfg.flush_interval_s, cfg.flush_batch)

    # ---- producer side -------------------------------------------------------------------
    def put(self, topic: str, payload: dict[str, Any]) -> str:
        """Queue one message; returns its id (``payload["id"]``, set here when absent).

        Raises QueueFullError under ``reject_new`` at a cap or on a full disk, and for a message
        larger than ``max_bytes`` under any policy.
        """
        msg_id = str(payload.setdefault("id", new_message_id()))
        data = encode(payload)
        with self._lock:
            if self._closed:
                raise QueueError(f"{self.path}: queue is closed")
            if self._disk_full and self.limits.policy == "reject_new":
                self._reject("disk full (SQLITE_FULL)")
            decision = admit(
                self.limits, self._count + len(self._batch), self._bytes + self._batch_bytes, len(data)
            )
            if not decision.accept:
                self._reject(decision.reason)
            if not self._batch:
                self._batch_since = time.monotonic()
            self._batch.append((msg_id, topic, data, time.time()))
            self._batch_bytes += len(data)
            n = len(self._batch)
            if n == 1 or n >= self.flush_batch:  # start the interval clock, or flush now
                self._cond.notify_all()
        if self.flush_interval_s == 0 or n >= 4 * self.flush_batch:  # sync mode, or flusher is behind
            # disk full under reject_new: this batch is held and retried, later puts are refused
            with contextlib.suppress(QueueFullError):
                self.flush()
        return msg_id

    def _reject(self, reason: str) -> None:
        self.counters["rejected"] += 1
        self._dirty = True
        self._warn(
            "reject",
            f"outbox {self.path}: rejected a new message: {reason} "
            f"(rejected so far: {self.counters['rejected']})",
        )
        raise QueueFullError(f"{self.path}: {reason}")

    def _warn(self, key: str, msg: str) -> None:
        now = time.monotonic()
        if now - self._last_warn.get(key, -1e9) >= 10.0:
            self._last_warn[key] = now
            log.warning("%s", msg)

    def flush(self) -> int:
        """Commit the in-memory batch (one fsync); returns rows written."""
        with self._wlock:
            with self._lock:
                batch, self._batch, self._batch_bytes = self._batch, [], 0
                self._committing = (len(batch), sum(len(b[2]) for b in batch))
            try:
                return self._commit(batch)
            except sqlite3.Error as exc:
                if is_disk_full(exc):
                    return self._on_disk_full(batch)
                self._requeue(batch)
                raise QueueError(f"{self.path}: cannot write the queue: {exc}") from None

    def _requeue(self, batch: list[tuple[str, str, bytes, float]]) -> None:
        with self._lock:
            self._batch[:0] = batch
            self._batch_bytes += sum(len(b[2]) for b in batch)
            self._committing = (0, 0)

    def _commit(self, batch: list[tuple[str, str, bytes, float]]) -> int:
        conn = self._w
        with self._lock:
            count, nbytes, dirty = self._count, self._bytes, self._dirty
        if not batch and not dirty:
            return 0
        added = sum(len(b[2]) for b in batch)
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.executemany(
                "INSERT INTO messages(msg_id, topic, payload, size, created) VALUES (?,?,?,?,?)",
                [(m, t, p, len(p), c) for m, t, p, c in batch],
            )
            dropped, freed = self._drop_over_limits(count + len(batch), nbytes + added)
            with self._lock:
                counters = dict(self.counters)
                counters["dropped"] += dropped
            conn.executemany("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", counters.items())
            conn.execute("COMMIT")
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
        if dropped:
            log.warning(
                "outbox %s: at its cap (%d messages / %d bytes): dropped the %d oldest (dropped so far: %d)",
                self.path,
                self.limits.max_messages,
                self.limits.max_bytes,
                dropped,
                self.counters["dropped"],
            )
        return len(batch)

    def _drop_over_limits(self, count: int, nbytes: int) -> tuple[int, int]:
        """Inside the writer's transaction: delete the oldest pending rows until under the caps."""
        dropped = freed = 0
        while over_limits(self.limits, count, nbytes):
            rows = self._w.execute(
                "SELECT id, size FROM messages WHERE state = 0 ORDER BY id LIMIT 1000"
            ).fetchall()
            n = plan_drops(self.limits, count, nbytes, (s for _, s in rows))
            if n == 0:
                break
            size = sum(s for _, s in rows[:n])
            self._w.execute("DELETE FROM messages WHERE state = 0 AND id <= ?", (rows[n - 1][0],))
            dropped, freed, count, nbytes = dropped + n, freed + size, count - n, nbytes - size
        return dropped, freed

    def _on_disk_full(self, batch: list[tuple[str, str, bytes, float]]) -> int:
        """SQLITE_FULL: ``reject_new`` keeps the batch and refuses new puts until a commit works;
        ``drop_oldest`` frees room by deleting the oldest pending rows, and if nothing is left to
        delete, drops the batch itself -- counted and logged either way."""
        if self.limits.policy == "reject_new":
            self._requeue(batch)
            with self._lock:
                self._disk_full = True
            self._warn("full", f"outbox {self.path}: disk full; refusing new messages until space frees")
            raise QueueFullError(f"{self.path}: disk full (SQLITE_FULL); {len(batch)} messages held")
        for _ in range(64):
            try:
                freed_rows = self._drop_oldest_for_space(max(1, len(batch)))
                if freed_rows == 0:
                    break
                return self._commit(batch)
            except sqlite3.Error as exc:
                if not is_disk_full(exc):
                    self._requeue(batch)  # held for the next flush, as in flush() itself
                    raise QueueError(f"{self.path}: cannot write the queue: {exc}") from None
        with self._lock:
            self.counters["dropped"] += len(batch)
            self._dirty = True
            self._committing = (0, 0)
        log.error(
            "outbox %s: disk full, nothing left to drop: %d new messages dropped (dropped so far: %d)",
            self.path,
            len(batch),
            self.counters["dropped"],
        )
        return 0

    def _drop_oldest_for_space(self, n: int) -> int:
        conn = self._w
        conn.execute("BEGIN IMMEDIATE")
        try:
            rows = conn.execute(
                "DELETE FROM messages WHERE id IN (SELECT id FROM messages WHERE state = 0 "
                "ORDER BY id LIMIT ?) RETURNING size",
                (n,),
            ).fetchall()
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        with self._lock:
            self._count -= len(rows)
            self._bytes -= sum(r[0] for r in rows)
            self.counters["dropped"] += len(rows)
            self._dirty = True
        if rows:
            log.warning(
                "outbox %s: disk full: dropped the %d oldest messages (dropped so far: %d)",
                self.path,
                len(rows),
                self.counters["dropped"],
            )
        return len(rows)

    def expire(self) -> int:
        """Drop pending rows older than ``max_age``; counted as dropped (and expired)."""
        cutoff = expiry_cutoff(self.limits, time.time())
        with self._wlock:
            rows = self._w.execute(
                "DELETE FROM messages WHERE state = 0 AND created < ? RETURNING size", (cutoff,)
            ).fetchall()
        if rows:
            with self._lock:
                self._count -= len(rows)
                self._bytes -= sum(r[0] for r in rows)
                self.counters["dropped"] += len(rows)
                self.counters["expired"] += len(rows)
                self._dirty = True
            log.warning(
                "outbox %s: dropped %d messages older than %.1f days",
                self.path,
                len(rows),
                self.limits.max_age_s / 86400.0,
            )
        return len(rows)

    def vacuum(self) -> int:
        """Give free pages back to the filesystem (``auto_vacuum=INCREMENTAL``); returns pages freed."""
        with self._wlock:
            free = int(self._w.execute("PRAGMA freelist_count").fetchone()[0])
            if free:
                self._w.executescript("PRAGMA incremental_vacuum;")  # execute() frees only one page
                self._w.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        return free

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
                    self.expire()
                    if int(self._w.execute("PRAGMA freelist_count").fetchone()[0]) > VACUUM_FREE_PAGES:
                        self.vacuum()
            except (QueueError, sqlite3.Error) as exc:
                log.error("outbox %s: background flush failed (will retry): %s", self.path, exc)
                with self._lock:
                    self._cond.wait(max(self.flush_interval_s, 0.5))

    # ---- sync side ---------------------------------------------------------------------
    def claim(self, n: int, newest_first: bool = False) -> list[Message]:
        """Mark up to ``n`` pending rows in flight and return them, oldest (or newest) first."""
        order = "DESC" if newest_first else "ASC"
        with self._rlock:
            rows = self._r.execute(
                "UPDATE messages SET state = 1, attempts = attempts + 1 WHERE id IN (SELECT id FROM messages"
                f" WHERE state = 0 ORDER BY id {order} LIMIT ?)"
                " RETURNING id, msg_id, topic, payload, attempts",
                (n,),
            ).fetchall()
        with self._lock:
            self._inflight += len(rows)
        rows.sort(key=lambda r: r[0], reverse=newest_first)
        return [Message(*r) for r in rows]

    def ack(self, rowids: Sequence[int]) -> int:
        """Delete rows the broker acknowledged; returns how many existed."""
        deleted = freed = was_inflight = 0
        with self._rlock:
            for i in range(0, len(rowids), 500):
                chunk = rowids[i : i + 500]
                rows = self._r.execute(
                    f"DELETE FROM messages WHERE id IN ({','.join('?' * len(chunk))}) RETURNING size, state",
                    chunk,
                ).fetchall()
                deleted += len(rows)
                freed += sum(r[0] for r in rows)
                was_inflight += sum(1 for r in rows if r[1] == INFLIGHT)
        with self._lock:
            self._count -= deleted
            self._bytes -= freed
            self._inflight -= was_inflight
        return deleted

    def release(self, rowids: Optional[Sequence[int]] = None) -> int:
        """Return in-flight rows (all when ``rowids`` is None) to pending, e.g. after a disconnect."""
        changed = 0
        with self._rlock:
            if rowids is None:
                changed = self._r.execute("UPDATE messages SET state = 0 WHERE state = 1").rowcount
            else:
                for i in range(0, len(rowids), 500):
                    chunk = rowids[i : i + 500]
                    changed += self._r.execute(
                        f"UPDATE messages SET state = 0 WHERE state = 1 AND id IN "
                        f"({','.join('?' * len(chunk))})",
                        chunk,
                    ).rowcount
        with self._lock:
            self._inflight = 0 if rowids is None else self._inflight - changed
        return changed

    def purge(self) -> int:
        """Delete every stored message (counted as dropped) and return the space to the filesystem."""
        with self._wlock:
            n = self._w.execute("DELETE FROM messages").rowcount
        with self._lock:
            self._count = self._bytes = self._inflight = 0
            self.counters["dropped"] += n
            self._dirty = True
        self.flush()
        self.vacuum()
        return n

    def stats(self) -> dict[str, Any]:
        """Queue figures: ``pending`` counts every message not yet acknowledged (stored + unflushed)."""
        with self._rlock:
            row = self._r.execute("SELECT created FROM messages ORDER BY id LIMIT 1").fetchone()
        with self._lock:
            oldest = row[0] if row else (self._batch[0][3] if self._batch else None)
            return {
                "pending": self._count + len(self._batch) + self._committing[0],
                "inflight": self._inflight,
                "unflushed": len(self._batch) + self._committing[0],
                "bytes": self._bytes + self._batch_bytes + self._committing[1],
                "oldest": iso_time(oldest),
                "path": str(self.path),
                **self.counters,
            }

    def close(self) -> None:
        """Flush what is batched, release in-flight rows, close the file (idempotent)."""
        with self._lock:
            if self._closed:
                return
            self._dirty = True  # write the counters whatever happened since the last commit
        try:
            self.flush()
        finally:
            with self._lock:
                self._closed = True
                self._cond.notify_all()
            self._flusher.join(timeout=5.0)
            self.release()
            self._r.close()
            self._w.close()
            self._lockfile.close()

    def __enter__(self) -> Outbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
