"""The sync side of the outbox: claim rows, ack them on PUBACK, release them on a disconnect.

"In flight" lives in memory only: a claim writes nothing required (the attempt count, best
effort), so on a full disk the sync can still drain the queue and free space; a crash only means
a redelivery with the same message id.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple, Optional

from edge_agent.adapters import outbox_db
from edge_agent.adapters.outbox_base import OutboxBase
from edge_agent.adapters.outbox_db import ROWS_DELTA, WAL_PAGES, is_disk_full
from edge_agent.core.queue_policy import commit_slice_bytes
from edge_agent.errors import QueueError


def id_filter(ids: Sequence[int]) -> tuple[str, list[int]]:
    """A WHERE clause for exactly ``ids``: ``id BETWEEN lo AND hi`` when they are every integer of
    that range (a drain claims and acks runs of consecutive rows; one range is cheaper for SQLite
    than 500 placeholders), else ``id IN (...)``."""
    lo, hi = min(ids), max(ids)
    if hi - lo + 1 == len(ids) == len(set(ids)):
        return "id BETWEEN ? AND ?", [lo, hi]
    return f"id IN ({','.join('?' * len(ids))})", list(ids)


# a WAL file above this has grown past what WAL_PAGES allows (a batched drain, SYNC_WAL_PAGES):
# truncated once the sync is idle. Live syncing (a few pages per ack, the writer checkpointing
# at WAL_PAGES) stays below it, so it costs no checkpoint per result.
IDLE_WAL_BYTES = 2 * WAL_PAGES * 4096


class Message(NamedTuple):
    """A claimed row: ``rowid`` is the local key, ``msg_id`` the id consumers de-duplicate on.
    (A NamedTuple: a frozen dataclass's __init__ was 10 % of a batched drain's sync thread.)"""

    rowid: int
    msg_id: str
    topic: str
    payload: bytes
    attempts: int


class ClaimsMixin(OutboxBase):
    # ---- sync side ---------------------------------------------------------------------
    def claim(self, n: int, newest_first: bool = False) -> list[Message]:
        """Up to ``n`` rows not in flight, oldest (or newest) first, now in flight.

        Only the attempt count is written, best effort: on a full disk claims still work, so the
        sync can drain the queue and free space. SQLite errors come out as QueueError (the sync
        side never sees sqlite3).
        """
        try:
            return self._claim(n, newest_first)
        except sqlite3.Error as exc:
            raise QueueError(f"{self.path}: cannot read the queue: {exc}") from None

    def _claim(self, n: int, newest_first: bool) -> list[Message]:
        order = "DESC" if newest_first else "ASC"
        with self._rlock:
            self._check_open()
            with self._lock:
                skip = self._inflight | self._acked_undeleted
            rows = self._claimable(n, order, skip)
            ids = [r[0] for r in rows]
            if ids:
                try:
                    where, args = id_filter(ids)
                    self._r.execute(f"UPDATE messages SET attempts = attempts + 1 WHERE {where}", args)
                except sqlite3.Error as exc:
                    if not is_disk_full(exc):
                        raise
            else:
                self._settle_wal()
        with self._lock:
            self._inflight.update(ids)
        return [Message(r[0], r[1], r[2], r[3], int(r[4]) + 1) for r in rows]

    def ack(self, rowids: Sequence[int]) -> int:
        """Delete rows the broker acknowledged; returns how many existed.

        On a full disk the delete is retried after a checkpoint and with the reserve released;
        if it still cannot be written the rows stay out of the queue's figures and claims and the
        delete is retried at the next ack (a crash before that only redelivers them). Other SQLite
        errors come out as QueueError; the rows stay acked in memory and are never resent."""
        try:
            return self._ack(rowids)
        except sqlite3.Error as exc:
            raise QueueError(f"{self.path}: cannot delete acknowledged messages: {exc}") from None

    def _ack(self, rowids: Sequence[int]) -> int:
        wanted = set(rowids)  # once: rebuilt per row it made a 500-row ack quadratic (issue 21)
        with self._lock:
            todo = list(rowids) + [r for r in self._acked_undeleted if r not in wanted]
            self._inflight.difference_update(rowids)
            self._acked_undeleted.update(rowids)
        deleted: list[tuple[int, int]] = []
        with self._rlock:
            self._check_open()
            for attempt in range(3):
                try:
                    step = self._ack_rows_per_txn()
                    for i in range(0, len(todo), step):
                        chunk = todo[i : i + step]
                        with self._write_txn():
                            rows = self._delete_acked(chunk)
                        deleted += rows
                        with self._lock:
                            self._acked_undeleted.difference_update(chunk)
                    break
                except sqlite3.Error as exc:
                    if not is_disk_full(exc):
                        raise
                    self._checkpoint(self._r)
                    if attempt == 1:
                        with self._wlock:
                            self._enter_full("SQLITE_FULL on ack", keep=0)
                    elif attempt == 2:
                        self._warn(
                            "ack",
                            f"outbox {self.path}: disk full: {len(self._acked_undeleted)} acknowledged messages "
                            "not deleted yet (retried; a restart before that redelivers them)",
                            logging.ERROR,
                        )
        with self._lock:
            self._count -= len(deleted)
            self._bytes -= sum(s for _, s in deleted)
        return sum(1 for i, _ in deleted if i in wanted)  # wanted: a set, built once

    def ack_and_claim(
        self, rowids: Sequence[int], n: int, newest_first: bool = False
    ) -> tuple[int, list[Message]]:
        """:meth:`ack` then :meth:`claim` in ONE write transaction: the batched drain acks one
        batch and claims the next, and each commit of the sync connection may run a checkpoint
        with its fsyncs (the small WAL kept for the full-disk reserve), so one commit instead of
        two. Any SQLite error rolls it back whole and the two separate calls run instead, with
        their own full-disk handling; the rows are deleted only in the commit, as with ack()."""
        if not rowids or len(rowids) > self._ack_rows_per_txn():
            return self.ack(rowids), self.claim(n, newest_first)
        wanted = set(rowids)
        with self._lock:
            if self._acked_undeleted:  # deletes left from a full disk: ack() retries them
                pending = True
            else:
                pending = False
                self._inflight.difference_update(rowids)
                self._acked_undeleted.update(rowids)
        if pending:
            return self.ack(rowids), self.claim(n, newest_first)
        try:
            deleted, rows = self._ack_claim_txn(rowids, n, newest_first)
        except sqlite3.Error:
            return self.ack(rowids), self.claim(n, newest_first)  # nothing of it was committed
        ids = [r[0] for r in rows]
        with self._lock:
            self._acked_undeleted.difference_update(rowids)
            self._inflight.update(ids)
            self._count -= len(deleted)
            self._bytes -= sum(int(b) for _, b in deleted)
        msgs = [Message(r[0], r[1], r[2], r[3], int(r[4]) + 1) for r in rows]
        return sum(1 for i, _ in deleted if i in wanted), msgs

    def _ack_claim_txn(
        self, rowids: Sequence[int], n: int, newest_first: bool
    ) -> tuple[list[tuple[int, int]], list[Any]]:
        order = "DESC" if newest_first else "ASC"
        with self._rlock:
            self._check_open()
            with self._write_txn():
                deleted = self._delete_acked(rowids)
                with self._lock:
                    skip = self._inflight | self._acked_undeleted
                rows = self._claimable(n, order, skip)
                if rows:
                    where, args = id_filter([r[0] for r in rows])
                    self._r.execute(f"UPDATE messages SET attempts = attempts + 1 WHERE {where}", args)
            if not rows:
                self._settle_wal()
        return deleted, rows

    def _claimable(self, n: int, order: str, skip: set[int]) -> list[Any]:
        """Up to ``n`` rows not in ``skip`` (in flight, acked), in ``order``. During a drain the
        rows in flight are one run of consecutive ids: SQLite skips them (``NOT BETWEEN``)
        instead of handing them to Python on every claim (a batched drain read 1,000 rows with
        their payloads to claim 500). Caller holds ``_rlock``."""
        cols = "SELECT id, msg_id, topic, payload, attempts FROM messages"
        if skip:
            lo, hi = min(skip), max(skip)
            if hi - lo + 1 == len(skip):
                sql = f"{cols} WHERE id NOT BETWEEN ? AND ? ORDER BY id {order} LIMIT ?"
                return self._r.execute(sql, (lo, hi, n)).fetchall()
        rows = self._r.execute(f"{cols} ORDER BY id {order} LIMIT ?", (n + len(skip),)).fetchall()
        return [r for r in rows if r[0] not in skip][:n]

    def _settle_wal(self) -> None:
        """Nothing left to claim: give the WAL a batched drain grew (SYNC_WAL_PAGES, see
        outbox_space) back to the filesystem -- one checkpoint per drain instead of one per
        batch. Caller holds ``_rlock``."""
        try:
            size = os.stat(f"{self.path}-wal").st_size
        except OSError:
            return
        if size > IDLE_WAL_BYTES:
            self._checkpoint(self._r)

    def _ack_rows_per_txn(self) -> int:
        """Rows deleted per transaction: 500; on a full disk (capped) as many as fit in the bytes
        of one full-disk commit slice on average, so the delete's WAL fits in what is left of the
        reserve (a 500-row batch of 1 KiB results did not once the queue reopened on a brim-full
        disk, and its rows stayed acked but undeleted)."""
        if not self._capped:
            return 500
        with self._lock:
            avg = self._bytes / self._count if self._count > 0 else 1.0
        return max(1, min(500, int(commit_slice_bytes(self._reserve.size) / max(avg, 1.0))))

    @contextlib.contextmanager
    def _write_txn(self) -> Iterator[None]:
        """One write transaction on the claims connection (caller holds ``_rlock``): committed
        whole, or rolled back whole on any error."""
        self._r.execute("BEGIN IMMEDIATE")
        try:
            yield
            self._r.execute("COMMIT")
        except BaseException:
            if self._r.in_transaction:
                self._r.execute("ROLLBACK")
            raise

    def _delete_acked(self, ids: Sequence[int]) -> list[tuple[int, int]]:
        """Delete these rows and keep the meta row count with them; (id, size) of those deleted."""
        where, args = id_filter(ids)
        if outbox_db.HAS_RETURNING:  # looked up per call: tests run both paths on any SQLite
            rows = self._r.execute(f"DELETE FROM messages WHERE {where} RETURNING id, size", args).fetchall()
        else:  # SQLite < 3.35 (Jetson Nano's Ubuntu 18.04: 3.22; Pi OS Bullseye: 3.34): same transaction
            rows = self._r.execute(f"SELECT id, size FROM messages WHERE {where}", args).fetchall()
            self._r.execute(f"DELETE FROM messages WHERE {where}", args)
        self._r.execute(ROWS_DELTA, (-len(rows),))
        return [(int(a), int(b)) for a, b in rows]

    def release(self, rowids: Optional[Sequence[int]] = None) -> int:
        """Return in-flight rows (all when ``rowids`` is None) to pending, e.g. after a disconnect."""
        with self._lock:
            if rowids is None:
                changed = len(self._inflight)
                self._inflight.clear()
            else:
                changed = len(self._inflight & set(rowids))
                self._inflight.difference_update(rowids)
        return changed
