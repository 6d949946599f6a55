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
from pathlib import Path
from typing import Any, List, NamedTuple, Optional, Set, Tuple

from edge_agent.adapters.outbox import db as outbox_db
from edge_agent.adapters.outbox.db import ROWS_DELTA, WAL_PAGES, is_disk_full
from edge_agent.adapters.outbox.space import Space
from edge_agent.adapters.outbox.state import Connections, QueueState
from edge_agent.core.queue.policy import commit_slice_bytes


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


class Claims:
    """The sync side on the ``db.r`` connection (under ``db.rlock``). SQLite errors pass through
    (the outbox translates them at its boundary); a full disk on ack is handled here, by the
    policy's ``ack`` steps (``core.queue_policy.full_disk_step``) carried out through ``space``."""

    def __init__(self, path: Path, db: Connections, state: QueueState, space: Space) -> None:
        self.path = path
        self._db = db
        self._s = state
        self._space = space

    def claim(self, n: int, newest_first: bool = False) -> List[Message]:
        """Up to ``n`` rows not in flight, oldest (or newest) first, now in flight.

        Only the attempt count is written, best effort: on a full disk claims still work, so the
        sync can drain the queue and free space."""
        s, r = self._s, self._db.r
        order = "DESC" if newest_first else "ASC"
        with self._db.rlock:
            s.check_open()
            with s.lock:
                skip = s.inflight | s.acked_undeleted
            rows = self._claimable(n, order, skip)
            ids = [row[0] for row in rows]
            if ids:
                try:
                    where, args = id_filter(ids)
                    r.execute(f"UPDATE messages SET attempts = attempts + 1 WHERE {where}", args)
                except sqlite3.Error as exc:
                    if not is_disk_full(exc):
                        raise
            else:
                self._settle_wal()
        with s.lock:
            s.inflight.update(ids)
        return [Message(row[0], row[1], row[2], row[3], int(row[4]) + 1) for row in rows]

    def ack(self, rowids: Sequence[int]) -> int:
        """Delete rows the broker acknowledged; returns how many existed.

        On a full disk the delete is retried after a checkpoint and with the reserve released;
        if it still cannot be written the rows stay out of the queue's figures and claims and the
        delete is retried at the next ack (a crash before that only redelivers them). On any other
        error the rows stay acked in memory and are never resent."""
        s = self._s
        wanted = set(rowids)  # once: rebuilt per row it made a 500-row ack quadratic (issue 21)
        with s.lock:
            todo = list(rowids) + [i for i in s.acked_undeleted if i not in wanted]
            s.inflight.difference_update(rowids)
            s.acked_undeleted.update(rowids)
        deleted: List[Tuple[int, int]] = []
        with self._db.rlock:
            s.check_open()
            attempt = 0
            while True:
                try:
                    step = self.ack_rows_per_txn()
                    for i in range(0, len(todo), step):
                        chunk = todo[i : i + step]
                        with self._write_txn():
                            rows = self._delete_acked(chunk)
                        deleted += rows
                        with s.lock:
                            s.acked_undeleted.difference_update(chunk)
                    break
                except sqlite3.Error as exc:
                    if not is_disk_full(exc):
                        raise
                    self._db.checkpoint(self._db.r)
                    decision = self._space.step("ack", attempt=attempt)
                    if decision.keep is not None:
                        with self._db.wlock:
                            self._space.enter_full("SQLITE_FULL on ack", keep=decision.keep)
                    if decision.action != "retry":
                        s.warn(
                            "ack",
                            f"outbox {self.path}: disk full: {len(s.acked_undeleted)} acknowledged messages "
                            "not deleted yet (retried; a restart before that redelivers them)",
                            logging.ERROR,
                        )
                        break
                    attempt += 1
        with s.lock:
            s.count -= len(deleted)
            s.bytes -= sum(size for _, size in deleted)
        return sum(1 for i, _ in deleted if i in wanted)  # wanted: a set, built once

    def ack_and_claim(
        self, rowids: Sequence[int], n: int, newest_first: bool = False
    ) -> Tuple[int, List[Message]]:
        """:meth:`ack` then :meth:`claim` in ONE write transaction: the batched drain acks one
        batch and claims the next, and each commit of the sync connection may run a checkpoint
        with its fsyncs (the small WAL kept for the full-disk reserve), so one commit instead of
        two. Any SQLite error rolls it back whole and the two separate calls run instead, with
        their own full-disk handling; the rows are deleted only in the commit, as with ack()."""
        s = self._s
        if not rowids or len(rowids) > self.ack_rows_per_txn():
            return self.ack(rowids), self.claim(n, newest_first)
        wanted = set(rowids)
        with s.lock:
            if s.acked_undeleted:  # deletes left from a full disk: ack() retries them
                pending = True
            else:
                pending = False
                s.inflight.difference_update(rowids)
                s.acked_undeleted.update(rowids)
        if pending:
            return self.ack(rowids), self.claim(n, newest_first)
        try:
            deleted, rows = self._ack_claim_txn(rowids, n, newest_first)
        except sqlite3.Error:
            return self.ack(rowids), self.claim(n, newest_first)  # nothing of it was committed
        ids = [row[0] for row in rows]
        with s.lock:
            s.acked_undeleted.difference_update(rowids)
            s.inflight.update(ids)
            s.count -= len(deleted)
            s.bytes -= sum(int(b) for _, b in deleted)
        msgs = [Message(row[0], row[1], row[2], row[3], int(row[4]) + 1) for row in rows]
        return sum(1 for i, _ in deleted if i in wanted), msgs

    def _ack_claim_txn(
        self, rowids: Sequence[int], n: int, newest_first: bool
    ) -> Tuple[List[Tuple[int, int]], List[Any]]:
        s, r = self._s, self._db.r
        order = "DESC" if newest_first else "ASC"
        with self._db.rlock:
            s.check_open()
            with self._write_txn():
                deleted = self._delete_acked(rowids)
                with s.lock:
                    skip = s.inflight | s.acked_undeleted
                rows = self._claimable(n, order, skip)
                if rows:
                    where, args = id_filter([row[0] for row in rows])
                    r.execute(f"UPDATE messages SET attempts = attempts + 1 WHERE {where}", args)
            if not rows:
                self._settle_wal()
        return deleted, rows

    def _claimable(self, n: int, order: str, skip: Set[int]) -> List[Any]:
        """Up to ``n`` rows not in ``skip`` (in flight, acked), in ``order``. During a drain the
        rows in flight are one run of consecutive ids: SQLite skips them (``NOT BETWEEN``)
        instead of handing them to Python on every claim (a batched drain read 1,000 rows with
        their payloads to claim 500). Caller holds ``rlock``."""
        cols = "SELECT id, msg_id, topic, payload, attempts FROM messages"
        r = self._db.r
        if skip:
            lo, hi = min(skip), max(skip)
            if hi - lo + 1 == len(skip):
                sql = f"{cols} WHERE id NOT BETWEEN ? AND ? ORDER BY id {order} LIMIT ?"
                return r.execute(sql, (lo, hi, n)).fetchall()
        rows = r.execute(f"{cols} ORDER BY id {order} LIMIT ?", (n + len(skip),)).fetchall()
        return [row for row in rows if row[0] not in skip][:n]

    def _settle_wal(self) -> None:
        """Nothing left to claim: give the WAL a batched drain grew (SYNC_WAL_PAGES, see
        ``Space.tune_sync_wal``) back to the filesystem -- one checkpoint per drain instead of one
        per batch. Caller holds ``rlock``."""
        try:
            size = os.stat(f"{self.path}-wal").st_size
        except OSError:
            return
        if size > IDLE_WAL_BYTES:
            self._db.checkpoint(self._db.r)

    def ack_rows_per_txn(self) -> int:
        """Rows deleted per transaction: 500; on a full disk (capped) as many as fit in the bytes
        of one full-disk commit slice on average, so the delete's WAL fits in what is left of the
        reserve (a 500-row batch of 1 KiB results did not once the queue reopened on a brim-full
        disk, and its rows stayed acked but undeleted)."""
        s = self._s
        if not s.capped:
            return 500
        with s.lock:
            avg = s.bytes / s.count if s.count > 0 else 1.0
        return max(1, min(500, int(commit_slice_bytes(self._space.reserve.size) / max(avg, 1.0))))

    @contextlib.contextmanager
    def _write_txn(self) -> Iterator[None]:
        """One write transaction on the claims connection (caller holds ``rlock``): committed
        whole, or rolled back whole on any error."""
        r = self._db.r
        r.execute("BEGIN IMMEDIATE")
        try:
            yield
            r.execute("COMMIT")
        except BaseException:
            if r.in_transaction:
                r.execute("ROLLBACK")
            raise

    def _delete_acked(self, ids: Sequence[int]) -> List[Tuple[int, int]]:
        """Delete these rows and keep the meta row count with them; (id, size) of those deleted."""
        r = self._db.r
        where, args = id_filter(ids)
        if outbox_db.HAS_RETURNING:  # looked up per call: tests run both paths on any SQLite
            rows = r.execute(f"DELETE FROM messages WHERE {where} RETURNING id, size", args).fetchall()
        else:  # SQLite < 3.35 (Jetson Nano's Ubuntu 18.04: 3.22; Pi OS Bullseye: 3.34): same transaction
            rows = r.execute(f"SELECT id, size FROM messages WHERE {where}", args).fetchall()
            r.execute(f"DELETE FROM messages WHERE {where}", args)
        r.execute(ROWS_DELTA, (-len(rows),))
        return [(int(a), int(b)) for a, b in rows]

    def release(self, rowids: Optional[Sequence[int]] = None) -> int:
        """Return in-flight rows (all when ``rowids`` is None) to pending, e.g. after a disconnect."""
        s = self._s
        with s.lock:
            if rowids is None:
                changed = len(s.inflight)
                s.inflight.clear()
            else:
                changed = len(s.inflight & set(rowids))
                s.inflight.difference_update(rowids)
        return changed
