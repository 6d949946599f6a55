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
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, List, NamedTuple, Optional, Set, Tuple

from edge_agent.adapters.outbox import db as outbox_db
from edge_agent.adapters.outbox.db import PENDING, ROWS_DELTA, SENT, WAL_PAGES, is_disk_full
from edge_agent.adapters.outbox.space import Space
from edge_agent.adapters.outbox.state import Connections, QueueState
from edge_agent.core.messages.confirm import Confirms, RangeSet
from edge_agent.core.queue.policy import commit_slice_bytes


def _message(row: Sequence[Any]) -> Message:
    """A claimed row (the attempt count as written by the claim)."""
    boot, seq = row[5], row[6]
    return Message(
        row[0],
        row[1],
        row[2],
        row[3],
        int(row[4]) + 1,
        None if boot is None else int(boot),
        None if seq is None else int(seq),
    )


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


# a SENT row unconfirmed is sent again after confirm_timeout_s, doubling per attempt, at most this
# (or confirm_timeout_s when that is longer): a collector down for a day costs a resend an hour
CONFIRM_MAX_S = 3600.0
_CLAIM_COLS = "id, msg_id, topic, payload, attempts, boot, seq"


class Message(NamedTuple):
    """A claimed row: ``rowid`` is the local key, ``msg_id`` the id consumers de-duplicate on.
    (A NamedTuple: a frozen dataclass's __init__ was 10 % of a batched drain's sync thread.)"""

    rowid: int
    msg_id: str
    topic: str
    payload: bytes
    attempts: int
    boot: Optional[int] = None  # None: a row stored before the numbers were columns
    seq: Optional[int] = None


class Claims:
    """The sync side on the ``db.r`` connection (under ``db.rlock``). SQLite errors pass through
    (the outbox translates them at its boundary); a full disk on ack is handled here, by the
    policy's ``ack`` steps (``core.queue_policy.full_disk_step``) carried out through ``space``."""

    def __init__(self, path: Path, db: Connections, state: QueueState, space: Space) -> None:
        self.path = path
        self._db = db
        self._s = state
        self._space = space
        # [mqtt] confirm = "collector": a PUBACK makes a row SENT (kept until a confirmation),
        # resent after this many seconds (doubling per attempt, at most CONFIRM_MAX_S); None:
        # "puback", the row is deleted on its PUBACK (set by the sync: Outbox.confirm_with)
        self.confirm_timeout: Optional[float] = None
        self.confirmed = RangeSet()  # what confirmations said is stored (this run)
        self.confirmations = 0  # confirmation messages applied
        self.confirmed_rows = 0  # rows deleted by them
        self._pending_from = 0  # confirm mode: no PENDING row has a lower id (SENT rows below)

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
        return [_message(row) for row in rows]

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
                            rows = self._settle(chunk)
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
        msgs = [_message(row) for row in rows]
        return sum(1 for i, _ in deleted if i in wanted), msgs

    def _ack_claim_txn(
        self, rowids: Sequence[int], n: int, newest_first: bool
    ) -> Tuple[List[Tuple[int, int]], List[Any]]:
        s, r = self._s, self._db.r
        order = "DESC" if newest_first else "ASC"
        with self._db.rlock:
            s.check_open()
            with self._write_txn():
                deleted = self._settle(rowids)
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
        cols = f"SELECT {_CLAIM_COLS} FROM messages"
        r = self._db.r
        if self.confirm_timeout is not None:
            return self._claimable_confirming(n, order, skip)
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

    def _settle(self, ids: Sequence[int]) -> List[Tuple[int, int]]:
        """Rows the broker acknowledged: deleted (confirm = "puback"; a row without numbers; a row
        a confirmation already covered) or made SENT until a confirmation; (id, size) deleted."""
        if self.confirm_timeout is None:
            return self._delete_acked(ids)
        r = self._db.r
        where, args = id_filter(ids)
        rows = r.execute(f"SELECT id, boot, seq FROM messages WHERE {where}", args).fetchall()
        gone = [i for i, b, q in rows if q is None or b is None or self.confirmed.covers(int(b), int(q))]
        dead = set(gone)
        keep = [i for i, _, _ in rows if i not in dead]
        if keep:
            w2, a2 = id_filter(keep)
            t = self.confirm_timeout
            r.execute(
                f"UPDATE messages SET state = {SENT}, due = ? + min(? * (1 << min(max(attempts - 1, 0), 20)), ?) "
                f"WHERE {w2}",
                [time.time(), t, max(t, CONFIRM_MAX_S), *a2],
            )
        return self._delete_acked(gone) if gone else []

    def _claimable_confirming(self, n: int, order: str, skip: Set[int]) -> List[Any]:
        """confirm = "collector": PENDING rows first (oldest or newest), then SENT rows whose
        confirmation is overdue (``due`` passed), each skipping ``skip``. The PENDING scan starts at
        ``_pending_from`` so that the SENT rows piling up in front of it while no confirmation
        comes (a collector down) are not read again on every claim. Caller holds ``rlock``."""
        r = self._db.r
        cols = f"SELECT {_CLAIM_COLS} FROM messages"
        start = self._pending_from if order == "ASC" else 0
        sql, args, limit = f"{cols} WHERE state = {PENDING} AND id >= ?", [start], n + len(skip)
        lo, hi = (min(skip), max(skip)) if skip else (0, -1)
        if skip and hi - lo + 1 == len(skip):  # a drain's rows in flight: one run, skipped by SQLite
            sql, args, limit = sql + " AND id NOT BETWEEN ? AND ?", [start, lo, hi], n
        rows = r.execute(f"{sql} ORDER BY id {order} LIMIT ?", [*args, limit]).fetchall()
        if order == "ASC":
            # the lowest PENDING row (claimed or not) at or above the old floor; a claimed one may be
            # released, so the floor never passes a row in flight
            lowest = [rows[0][0]] if rows else []
            lowest += [i for i in skip if i >= start]
            if lowest:
                self._pending_from = min(lowest)
        out = [row for row in rows if row[0] not in skip][:n]
        if len(out) < n:
            due = r.execute(
                f"{cols} WHERE state = {SENT} AND due <= ? ORDER BY due LIMIT ?", (time.time(), n + len(skip))
            ).fetchall()
            out += [row for row in due if row[0] not in skip][: n - len(out)]
        return out

    def confirm(self, confirms: Confirms) -> int:
        """A confirmation from the collector: delete the SENT rows it covers; returns how many.
        Remembered for rows whose PUBACK comes after it (:meth:`_settle`)."""
        s, r = self._s, self._db.r
        self.confirmed.add(confirms)
        deleted: List[Tuple[int, int]] = []
        with self._db.rlock:
            s.check_open()
            with self._write_txn():
                for boot, ranges in confirms.items():
                    for lo, hi in ranges:
                        rows = r.execute(
                            f"SELECT id, size FROM messages WHERE state = {SENT} AND boot = ? AND seq BETWEEN ? AND ?",
                            (boot, lo, hi),
                        ).fetchall()
                        if rows:
                            deleted += self._delete_acked([int(i) for i, _ in rows])
        ids = {i for i, _ in deleted}
        with s.lock:
            s.count -= len(deleted)
            s.bytes -= sum(size for _, size in deleted)
            s.inflight.difference_update(ids)  # a resend still in flight: confirmed meanwhile
        self.confirmations += 1
        self.confirmed_rows += len(deleted)
        return len(deleted)

    def sent_stats(self) -> Tuple[int, Optional[float]]:
        """(SENT rows, the oldest one's ``created``): stored, acknowledged by the broker, not yet
        confirmed by the collector."""
        with self._db.rlock:
            self._s.check_open()
            n = self._db.r.execute(f"SELECT count(*) FROM messages WHERE state = {SENT}").fetchone()[0]
            row = self._db.r.execute(
                f"SELECT created FROM messages WHERE state = {SENT} ORDER BY boot, seq LIMIT 1"
            ).fetchone()
        return int(n), (float(row[0]) if row else None)

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
