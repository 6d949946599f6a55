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

How much to keep, what to hold, drop or refuse, and when the disk counts as free again is decided by
``core.queue_policy.full_disk_step`` (one pure function, both policies); :class:`Space` carries it out.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import time
from pathlib import Path
from typing import List, Optional

from edge_agent.adapters.outbox.db import ROWS_DELTA, SYNC_WAL_PAGES, WAL_PAGES, is_disk_full
from edge_agent.adapters.outbox.marks import Ledger
from edge_agent.adapters.outbox.reserve import Reserve, free_bytes
from edge_agent.adapters.outbox.state import Batch, Connections, QueueState
from edge_agent.adapters.outbox.writer import Writer
from edge_agent.core.queue.policy import (
    CLOCK_FLOOR,
    FULL_DISK_ATTEMPTS,
    FullDiskEvent,
    FullDiskStep,
    Limits,
    commit_slice_bytes,
    expiry_cutoff,
    full_disk_step,
    may_leave_full,
)
from edge_agent.errors import QueueFullError

log = logging.getLogger("edge_agent.outbox")

NO_CAP = 1073741823  # SQLite's default max_page_count
SLICE_BYTES = 256 * 1024
VACUUM_FREE_PAGES = 256


class Space:
    """The outbox's disk space: full-disk handling (reserve, cap, drops), expiry and vacuum.

    It carries out :func:`edge_agent.core.queue.policy.full_disk_step`; what to hold, drop or keep
    is decided there. SQLite errors other than a full disk pass through (translated at the outbox's
    boundary)."""

    def __init__(
        self,
        path: Path,
        db: Connections,
        state: QueueState,
        limits: Limits,
        reserve: Reserve,
        writer: Writer,
        ledger: Ledger,
        max_pages: Optional[int],
    ) -> None:
        self.path = path
        self.reserve = reserve
        self._db = db
        self._s = state
        self._limits = limits
        self._writer = writer
        self._ledger = ledger
        self._max_pages = max_pages
        if max_pages is not None:
            self._set_cap(max_pages)

    def step(
        self,
        event: FullDiskEvent,
        attempt: int = 0,
        batch_rows: int = 0,
        dropped_last: Optional[int] = None,
        free: int = 0,
    ) -> FullDiskStep:
        """The policy's decision for ``event`` on this queue (``core.queue_policy.full_disk_step``)."""
        return full_disk_step(
            self._limits.policy,
            event,
            reserve_bytes=self.reserve.size,
            attempt=attempt,
            batch_rows=batch_rows,
            dropped_last=dropped_last,
            free_bytes=free,
        )

    # ---- full disk -------------------------------------------------------------------------
    def _set_cap(self, pages: int) -> None:
        self._db.set_cap(min(pages, self._max_pages) if self._max_pages is not None else pages)
        self.tune_sync_wal()

    def tune_sync_wal(self) -> None:
        """The sync connection's checkpoint policy: a WAL of up to SYNC_WAL_PAGES (4 MiB) while
        the queue is not capped, WAL_PAGES (what the reserve covers) once it is.

        A checkpoint costs two fsyncs; at 64 pages a batched drain paid them on nearly every
        500-row commit (issue 21). The sync connection deletes rows and rewrites pages the main
        file already has (an attempt count growing by a byte may split a page: it comes from the
        freelist a drain fills), so checkpointing its frames does not grow the file: a large WAL
        needs no reserve, its bytes are already allocated, and on SQLITE_FULL the TRUNCATE checkpoint
        (:meth:`enter_full`, ack's retry) gives all of them back before the cap. New pages come
        only from the writer connection, which still checkpoints at WAL_PAGES after each commit.
        Once the sync is idle the WAL is truncated (``Claims._settle_wal``)."""
        small = self._s.capped or self._max_pages is not None
        with contextlib.suppress(sqlite3.Error):
            self._db.r.execute(
                f"PRAGMA wal_autocheckpoint={WAL_PAGES if small else SYNC_WAL_PAGES}"
            ).fetchall()

    def enter_full(self, why: str, keep: int) -> None:
        """Release the reserve but ``keep`` bytes and stop the file from growing (module doc);
        the caller holds the writer lock."""
        released = self.reserve.release(keep=keep)
        s = self._s
        if s.capped:
            if released:
                log.warning("outbox %s: still full (%s): released the rest of the reserve", self.path, why)
            return
        s.capped = True
        # first move the WAL into the main file (it may need to grow for that: the released bytes),
        # so the cap below is the file's real size and later checkpoints never need to extend it
        self._db.checkpoint()
        pages = int(self._db.w.execute("PRAGMA page_count").fetchone()[0])
        self._set_cap(pages)
        log.warning(
            "outbox %s: filesystem full (%s): %s; the file stays at %d pages; policy %s applies",
            self.path,
            why,
            "released the disk reserve" if released else "no reserve left to release",
            pages,
            self._limits.policy,
        )

    def leave_full(self) -> None:
        s = self._s
        if s.capped and may_leave_full(free_bytes(self.path.parent), self.reserve.size):
            self._set_cap(NO_CAP)
            s.capped = not self.reserve.ensure()
            self.tune_sync_wal()
            if not s.capped:
                s.full_drops = 0
                log.info("outbox %s: space available again: reserve re-created, cap lifted", self.path)

    def on_disk_full(self, batch: Batch) -> int:
        """A commit met SQLITE_FULL: free WAL space, then carry out the policy per slice, with
        slices small enough for each commit's WAL to fit in the released reserve (the caller holds
        the writer lock; the batch is counted either way)."""
        first = self.step("write")
        assert first.keep is not None
        self.enter_full("SQLITE_FULL on commit", keep=first.keep)
        slices = slice_batch(batch, commit_slice_bytes(self.reserve.size))
        written = 0
        for k, part in enumerate(slices):
            try:
                written += self._commit_slice(part)
            except (sqlite3.Error, QueueFullError) as exc:
                # this slice and every later one go back in front of the new rows, in put order
                held = [b for rest in slices[k:] for b in rest]
                self._s.requeue(held)
                if isinstance(exc, QueueFullError):
                    raise QueueFullError(
                        f"{self.path}: disk full (SQLITE_FULL); {len(held)} messages held"
                    ) from None
                raise
        return written

    def _commit_slice(self, batch: Batch) -> int:
        """Commit one slice on a full disk, dropping the oldest rows for room as the policy says;
        raises (the caller puts the rows back) when the policy holds them or on another error."""
        s = self._s
        dropped: Optional[int] = None
        for attempt in range(FULL_DISK_ATTEMPTS + 1):
            self._db.checkpoint()
            try:
                return self._writer.commit(batch)
            except sqlite3.Error as exc:
                if not is_disk_full(exc):
                    raise
            step = self.step("commit", attempt=attempt, batch_rows=len(batch), dropped_last=dropped)
            if step.action == "hold":
                with s.lock:
                    s.disk_full = True
                raise QueueFullError(f"{self.path}: disk full (SQLITE_FULL)")
            if step.action == "drop_batch":
                break
            try:
                dropped = self._drop_oldest_for_space(step.n)
            except sqlite3.Error as exc:
                if not is_disk_full(exc):
                    raise
                if self.step("drop", batch_rows=len(batch)).action == "drop_batch":
                    break
        self._writer.forget_tallies(batch)  # counted as dropped: never counted in a tally either
        with s.lock:
            s.counters["dropped"] += len(batch)
            s.dirty = True
            s.committing = (0, 0)
            # these numbers are accounted for (counted as dropped, everything below is committed or
            # counted too): a crash window counted later starts above them, not over them again
            s.seq_committed = max([s.seq_committed, *(b[4] for b in batch)])
        if not batch:
            return 0
        # the file takes no write: the count goes to the marks file now, not at the next commit
        self._ledger.reserve_seq(counters=True)
        s.warn(
            "nothing",
            f"outbox {self.path}: disk full and nothing left to drop: {len(batch)} new messages "
            f"dropped (dropped so far: {s.counters['dropped']})",
            logging.ERROR,
        )
        return 0

    def _drop_oldest_for_space(self, n: int) -> int:
        s, conn = self._s, self._db.w
        with self._writer.txn():
            rows = self._writer.droppable(n)
            self._writer.delete_ids([i for i, _ in rows])
            with s.lock:
                counters = dict(s.counters)
                counters["dropped"] += len(rows)
            conn.execute(ROWS_DELTA, (-len(rows),))
            self._ledger.record(conn, counters, s.seq, s.seq_committed)
            self._ledger.commit(conn)
        self._db.checkpoint()
        with s.lock:
            s.count -= len(rows)
            s.bytes -= sum(size for _, size in rows)
            s.counters["dropped"] += len(rows)
        s.full_drops += len(rows)
        if not rows:  # nothing to drop: the caller gives the batch up and says so
            return 0
        s.warn(  # once a minute while the streak lasts, not once per frame
            "fulldrop",
            f"outbox {self.path}: disk full: dropped the oldest messages to make room "
            f"({s.full_drops} in this full-disk streak, dropped so far: {s.counters['dropped']})",
            period=60.0,
        )
        return len(rows)

    # ---- maintenance (each takes the writer lock) ------------------------------------------
    def purge(self) -> int:
        """Delete every stored message (counted as dropped) and return the space to the filesystem."""
        s, conn = self._s, self._db.w
        with self._db.wlock, self._writer.txn():
            n = conn.execute("DELETE FROM messages").rowcount
            conn.execute("UPDATE meta SET value = 0 WHERE key = 'rows'")
            with s.lock:
                counters = dict(s.counters)
                counters["dropped"] += n
            self._ledger.record(conn, counters, s.seq, s.seq_committed)
            self._ledger.commit(conn)
        with s.lock:
            s.count = s.bytes = 0
            s.inflight.clear()
            s.acked_undeleted.clear()
            s.counters["dropped"] += n
        self.vacuum()
        return n

    def expire(self) -> int:
        """Drop rows older than ``max_age`` (not in flight); counted as dropped (and expired)."""
        s, conn = self._s, self._db.w
        cutoff = expiry_cutoff(self._limits, time.time())
        with self._db.wlock:
            aged = "FROM messages WHERE created >= ? AND created < ?"
            if conn.execute(f"SELECT 1 {aged} LIMIT 1", (CLOCK_FLOOR, cutoff)).fetchone() is None:
                return 0  # the common case writes nothing (opening must not need a free byte)
            rows = conn.execute(f"SELECT id, size {aged}", (CLOCK_FLOOR, cutoff)).fetchall()
            rows = [r for r in rows if r[0] not in s.inflight and r[0] not in s.acked_undeleted]
            if not rows:
                return 0
            with self._writer.txn():
                self._writer.delete_ids([r[0] for r in rows])
                conn.execute(ROWS_DELTA, (-len(rows),))
                with s.lock:  # the counters land in the same transaction as the drops they count
                    counters = dict(s.counters)
                    counters["dropped"] += len(rows)
                    counters["expired"] += len(rows)
                self._ledger.record(conn, counters, s.seq, s.seq_committed)
                self._ledger.commit(conn)
        with s.lock:
            s.count -= len(rows)
            s.bytes -= sum(r[1] for r in rows)
            s.counters["dropped"] += len(rows)
            s.counters["expired"] += len(rows)
        log.warning(
            "outbox %s: dropped %d messages older than %.1f days",
            self.path,
            len(rows),
            self._limits.max_age_s / 86400.0,
        )
        return len(rows)

    def vacuum(self) -> int:
        """Give free pages back to the filesystem (``auto_vacuum=INCREMENTAL``); returns pages freed."""
        freed = 0
        conn = self._db.w
        with self._db.wlock:
            free = int(conn.execute("PRAGMA freelist_count").fetchone()[0])
            while freed < free:  # in steps, checkpointing between, so the WAL never needs much room
                try:
                    conn.executescript("PRAGMA incremental_vacuum(512);")
                except sqlite3.Error as exc:
                    if not is_disk_full(exc):
                        raise
                    break
                self._db.checkpoint()
                left = int(conn.execute("PRAGMA freelist_count").fetchone()[0])
                if left >= free - freed:
                    break
                freed = free - left
        return freed

    def maintain(self) -> None:
        """Periodic: vacuum a file with many free pages; lift the cap (or re-create the reserve)
        once the disk has room again."""
        if int(self._db.w.execute("PRAGMA freelist_count").fetchone()[0]) > VACUUM_FREE_PAGES:
            self.vacuum()
        if self._s.capped:
            self.leave_full()
        elif not self.reserve.held:
            self.reserve.ensure()


def slice_batch(batch: Batch, limit: int) -> List[Batch]:
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
