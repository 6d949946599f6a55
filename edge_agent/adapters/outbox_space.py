"""Disk headroom for the outbox: a reserve file given back to the filesystem on SQLITE_FULL.

On a full filesystem even *deleting* rows needs room: SQLite writes the changed pages to the WAL
before it can free anything, and a fresh ``-shm`` wants 32 KiB. Measured on a full 16 MB tmpfs
without headroom, ``drop_oldest`` could not delete and dropped every new result instead (issue 11).
So the outbox keeps ``reserve_bytes`` in a file beside the database while space is plentiful. On
the first SQLITE_FULL the file is shrunk to a quarter and the database is capped at its current page count
(``PRAGMA max_page_count``): from then on new rows can only reuse pages freed by deletes, and the
released bytes stay free for the WAL, so deletes, acks and checkpoints keep working. When the
filesystem has room again (twice the reserve free) the cap is lifted and the reserve re-created.
The quarter kept back is for the next start: a WAL database cannot be opened without room for its
32 KiB ``-shm``, so when opening meets SQLITE_FULL the rest is released and the open retried.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import time
from collections.abc import Sequence
from typing import List, Optional

from edge_agent.adapters.outbox_base import Batch, OutboxBase
from edge_agent.adapters.outbox_db import ROWS_DELTA, SYNC_WAL_PAGES, WAL_PAGES, is_disk_full
from edge_agent.adapters.outbox_reserve import free_bytes
from edge_agent.core.queue_policy import (
    FULL_DISK_ATTEMPTS,
    commit_slice_bytes,
    expiry_cutoff,
    full_disk_step,
    may_leave_full,
    over_limits,
    plan_drops,
    reserve_kept,
)
from edge_agent.errors import QueueError, QueueFullError

log = logging.getLogger("edge_agent.outbox")

NO_CAP = 1073741823  # SQLite's default max_page_count
SLICE_BYTES = 256 * 1024
VACUUM_FREE_PAGES = 256


class SpaceMixin(OutboxBase):
    """The outbox's disk space: full-disk handling (reserve, cap, drops), expiry and vacuum."""

    # ---- full disk -------------------------------------------------------------------------
    def _set_cap(self, pages: int) -> None:
        cap = min(pages, self._max_pages) if self._max_pages is not None else pages
        for conn in (self._w, self._r):
            conn.execute(f"PRAGMA max_page_count={int(cap)}").fetchall()
        self._tune_sync_wal()

    def _tune_sync_wal(self) -> None:
        """The sync connection's checkpoint policy: a WAL of up to SYNC_WAL_PAGES (4 MiB) while
        the queue is not capped, WAL_PAGES (what the reserve covers) once it is.

        A checkpoint costs two fsyncs; at 64 pages a batched drain paid them on nearly every
        500-row commit (issue 21). The sync connection deletes rows and rewrites pages the main
        file already has (an attempt count growing by a byte may split a page: it comes from the
        freelist a drain fills), so checkpointing its frames does not grow the file: a large WAL
        needs no reserve, its bytes are already allocated, and on SQLITE_FULL the TRUNCATE checkpoint
        (``_enter_full``, ack's retry) gives all of them back before the cap. New pages come
        only from the writer connection, which still checkpoints at WAL_PAGES after each commit.
        Once the sync is idle the WAL is truncated (``_settle_wal``)."""
        small = self._capped or self._max_pages is not None
        with contextlib.suppress(sqlite3.Error):
            self._r.execute(f"PRAGMA wal_autocheckpoint={WAL_PAGES if small else SYNC_WAL_PAGES}").fetchall()

    def _enter_full(self, why: str, keep: int = -1) -> None:
        """Release the reserve (but ``keep`` bytes, default a quarter: room for the next start to
        open the file) and stop the file from growing (see outbox_space)."""
        keep = reserve_kept(self._reserve.size) if keep < 0 else keep
        released = self._reserve.release(keep=keep)
        if self._capped:
            if released:
                log.warning("outbox %s: still full (%s): released the rest of the reserve", self.path, why)
            return
        self._capped = True
        # first move the WAL into the main file (it may need to grow for that: the released bytes),
        # so the cap below is the file's real size and later checkpoints never need to extend it
        self._checkpoint()
        pages = int(self._w.execute("PRAGMA page_count").fetchone()[0])
        self._set_cap(pages)
        log.warning(
            "outbox %s: filesystem full (%s): %s; the file stays at %d pages; policy %s applies",
            self.path,
            why,
            "released the disk reserve" if released else "no reserve left to release",
            pages,
            self.limits.policy,
        )

    def _leave_full(self) -> None:
        if self._capped and may_leave_full(free_bytes(self.path.parent), self._reserve.size):
            self._set_cap(NO_CAP)
            self._capped = not self._reserve.ensure()
            self._tune_sync_wal()
            if not self._capped:
                self._full_drops = 0
                log.info("outbox %s: space available again: reserve re-created, cap lifted", self.path)

    def _checkpoint(self, conn: Optional[sqlite3.Connection] = None) -> None:
        with contextlib.suppress(sqlite3.Error):  # TRUNCATE gives the WAL's bytes back to the filesystem
            (conn or self._w).execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()

    def _on_disk_full(self, batch: Batch) -> int:
        """SQLITE_FULL: free WAL space, then ``reject_new`` holds the batch and refuses new puts,
        ``drop_oldest`` deletes the oldest rows (doubling) until the batch fits -- counted either way.
        Slices of at most an eighth of the reserve keep each commit's WAL inside the headroom."""
        self._enter_full("SQLITE_FULL on commit")
        slices = _slices(batch, commit_slice_bytes(self._reserve.size))
        written = 0
        for k, part in enumerate(slices):
            try:
                written += self._commit_slice(part)
            except (QueueError, QueueFullError):
                self._requeue([b for rest in slices[k + 1 :] for b in rest])
                raise
        return written

    def _commit_slice(self, batch: Batch) -> int:
        dropped: Optional[int] = None
        for attempt in range(FULL_DISK_ATTEMPTS + 1):
            self._checkpoint()
            try:
                return self._commit(batch)
            except sqlite3.Error as exc:
                if not is_disk_full(exc):
                    self._requeue(batch)
                    raise QueueError(f"{self.path}: cannot write the queue: {exc}") from None
            step = full_disk_step(self.limits.policy, attempt, len(batch), dropped)
            if step.action == "hold":
                self._requeue(batch)
                with self._lock:
                    self._disk_full = True
                raise QueueFullError(f"{self.path}: disk full (SQLITE_FULL); {len(batch)} messages held")
            if step.action == "drop_batch":
                break
            try:
                dropped = self._drop_oldest_for_space(step.n)
            except sqlite3.Error as exc:
                if not is_disk_full(exc):
                    self._requeue(batch)
                    raise QueueError(f"{self.path}: cannot write the queue: {exc}") from None
                break
        with self._lock:
            self.counters["dropped"] += len(batch)
            self._dirty = True
            self._committing = (0, 0)
            # these numbers are accounted for (counted as dropped, everything below is committed or
            # counted too): a crash window counted later starts above them, not over them again
            self._seq_committed = max([self._seq_committed, *(b[4] for b in batch)])
        if not batch:
            return 0
        self._warn(
            "nothing",
            f"outbox {self.path}: disk full and nothing left to drop: {len(batch)} new messages "
            f"dropped (dropped so far: {self.counters['dropped']})",
            logging.ERROR,
        )
        return 0

    def _drop_oldest_for_space(self, n: int) -> int:
        conn = self._w
        conn.execute("BEGIN IMMEDIATE")
        try:
            rows = self._droppable(n)
            self._delete_ids([i for i, _ in rows])
            with self._lock:
                counters = dict(self.counters)
                counters["dropped"] += len(rows)
            meta = self._meta_rows(counters, self._seq, self._seq_committed)
            conn.executemany("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", meta)
            conn.execute(ROWS_DELTA, (-len(rows),))
            self._save_marks(conn, meta)
            self._commit_txn(conn)
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        self._checkpoint()
        with self._lock:
            self._count -= len(rows)
            self._bytes -= sum(s for _, s in rows)
            self.counters["dropped"] += len(rows)
        self._full_drops += len(rows)
        self._warn(  # once a minute while the streak lasts, not once per frame
            "fulldrop",
            f"outbox {self.path}: disk full: dropped the oldest messages to make room "
            f"({self._full_drops} in this full-disk streak, dropped so far: {self.counters['dropped']})",
            period=60.0,
        )
        return len(rows)

    # ---- drops at the caps (inside the writer's transaction) -------------------------------
    def _droppable(self, limit: int, order: str = "ASC") -> list[tuple[int, int]]:
        """Oldest (id, size) rows not in flight: the only rows a policy may delete."""
        skip = self._inflight | self._acked_undeleted
        rows = self._w.execute(
            f"SELECT id, size FROM messages ORDER BY id {order} LIMIT ?", (limit + len(skip),)
        ).fetchall()
        return [(int(i), int(s)) for i, s in rows if i not in skip][:limit]

    def _delete_ids(self, ids: Sequence[int]) -> None:
        for i in range(0, len(ids), 500):
            chunk = list(ids[i : i + 500])
            self._w.execute(f"DELETE FROM messages WHERE id IN ({','.join('?' * len(chunk))})", chunk)

    def _drop_over_limits(self, count: int, nbytes: int) -> tuple[int, int]:
        """Inside the writer's transaction: delete the oldest rows until under the caps."""
        dropped = freed = 0
        while over_limits(self.limits, count, nbytes):
            rows = self._droppable(1000)
            n = plan_drops(self.limits, count, nbytes, (s for _, s in rows))
            if n == 0:
                break
            size = sum(s for _, s in rows[:n])
            self._delete_ids([i for i, _ in rows[:n]])
            dropped, freed, count, nbytes = dropped + n, freed + size, count - n, nbytes - size
        return dropped, freed

    # ---- maintenance -----------------------------------------------------------------------
    def purge(self) -> int:
        """Delete every stored message (counted as dropped) and return the space to the filesystem."""
        try:
            return self._purge()
        except sqlite3.Error as exc:
            raise QueueError(f"{self.path}: cannot purge the queue: {exc}") from None

    def _purge(self) -> int:
        with self._wlock:
            self._w.execute("BEGIN IMMEDIATE")
            try:
                n = self._w.execute("DELETE FROM messages").rowcount
                self._w.execute("UPDATE meta SET value = 0 WHERE key = 'rows'")
                with self._lock:
                    counters = dict(self.counters)
                    counters["dropped"] += n
                meta = self._meta_rows(counters, self._seq, self._seq_committed)
                self._w.executemany("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", meta)
                self._save_marks(self._w, meta)
                self._commit_txn(self._w)
            except BaseException:
                if self._w.in_transaction:
                    self._w.execute("ROLLBACK")
                raise
        with self._lock:
            self._count = self._bytes = 0
            self._inflight.clear()
            self._acked_undeleted.clear()
            self.counters["dropped"] += n
        self.vacuum()
        return n

    def expire(self) -> int:
        """Drop rows older than ``max_age`` (not in flight); counted as dropped (and expired)."""
        try:
            return self._expire()
        except sqlite3.Error as exc:
            raise QueueError(f"{self.path}: cannot expire old messages: {exc}") from None

    def _expire(self) -> int:
        cutoff = expiry_cutoff(self.limits, time.time())
        with self._wlock:
            if (
                self._w.execute("SELECT 1 FROM messages WHERE created < ? LIMIT 1", (cutoff,)).fetchone()
                is None
            ):
                return 0  # the common case writes nothing (opening must not need a free byte)
            rows = self._w.execute("SELECT id, size FROM messages WHERE created < ?", (cutoff,)).fetchall()
            rows = [r for r in rows if r[0] not in self._inflight and r[0] not in self._acked_undeleted]
            if not rows:
                return 0
            conn = self._w
            conn.execute("BEGIN IMMEDIATE")
            try:
                self._delete_ids([r[0] for r in rows])
                conn.execute(ROWS_DELTA, (-len(rows),))
                with self._lock:  # the counters land in the same transaction as the drops they count
                    counters = dict(self.counters)
                    counters["dropped"] += len(rows)
                    counters["expired"] += len(rows)
                meta = self._meta_rows(counters, self._seq, self._seq_committed)
                conn.executemany("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", meta)
                self._save_marks(conn, meta)
                self._commit_txn(conn)
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        if rows:
            with self._lock:
                self._count -= len(rows)
                self._bytes -= sum(r[1] for r in rows)
                self.counters["dropped"] += len(rows)
                self.counters["expired"] += len(rows)
            log.warning(
                "outbox %s: dropped %d messages older than %.1f days",
                self.path,
                len(rows),
                self.limits.max_age_s / 86400.0,
            )
        return len(rows)

    def vacuum(self) -> int:
        """Give free pages back to the filesystem (``auto_vacuum=INCREMENTAL``); returns pages freed."""
        try:
            return self._vacuum()
        except sqlite3.Error as exc:
            raise QueueError(f"{self.path}: cannot vacuum the queue: {exc}") from None

    def _vacuum(self) -> int:
        freed = 0
        with self._wlock:
            free = int(self._w.execute("PRAGMA freelist_count").fetchone()[0])
            while freed < free:  # in steps, checkpointing between, so the WAL never needs much room
                try:
                    self._w.executescript("PRAGMA incremental_vacuum(512);")
                except sqlite3.Error as exc:
                    if not is_disk_full(exc):
                        raise
                    break
                self._checkpoint()
                left = int(self._w.execute("PRAGMA freelist_count").fetchone()[0])
                if left >= free - freed:
                    break
                freed = free - left
        return freed

    def _maintain(self) -> None:
        self.expire()
        if self._acked_undeleted:
            self.ack([])
        if int(self._w.execute("PRAGMA freelist_count").fetchone()[0]) > VACUUM_FREE_PAGES:
            self.vacuum()
        if self._capped:
            self._leave_full()
        elif not self._reserve.held:
            self._reserve.ensure()


def _slices(batch: Batch, limit: int) -> List[Batch]:
    """``batch`` cut into runs of at most ``limit`` payload bytes (at least one row each)."""
    slices: List[Batch] = [[]]
    size = 0
    for item in batch:
        if slices[-1] and size + len(item[2]) > limit:
            slices.append([])
            size = 0
        slices[-1].append(item)
        size += len(item[2])
    return slices
