"""What the outbox's parts share: the in-memory figures (under one lock) and the two connections.

The outbox (:mod:`edge_agent.adapters.outbox.outbox`) is assembled from parts, each a class that is
handed what it works on in its constructor: :class:`QueueState` and :class:`Connections` here,
the marks ledger (``outbox_marks.Ledger``), the commit path (``outbox_writer.Writer``), the disk
space (``outbox_space.Space``) and the sync side (``outbox_claims.Claims``), over the files
``outbox_open.open_queue`` opens. No part reaches into another's attributes; what one needs of
another is a method of that other (docs/architecture.md has the table).
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
import time
from pathlib import Path
from typing import Dict, List, Optional, Set, Tuple

from edge_agent.errors import QueueError

log = logging.getLogger("edge_agent.outbox")

Batch = List[Tuple[str, str, bytes, float, int]]  # (msg_id, topic, payload, created, seq)


def batch_bytes(batch: Batch) -> int:
    return sum(len(b[2]) for b in batch)


class QueueState:
    """The queue's figures in memory; every field is read and written under ``lock``.

    ``count``/``bytes`` are the rows in the file, ``batch`` the rows not committed yet, and
    ``committing`` a batch taken out for commit until it lands in ``count`` or back in ``batch``.
    ``inflight`` (claimed, not acked) and ``acked_undeleted`` (acked, but the DELETE met a full
    disk) live in memory only: a crash forgets them and only causes a redelivery.
    """

    def __init__(self, path: Path, counters: Dict[str, int]) -> None:
        self.path = path
        self.lock = threading.Lock()
        self.cond = threading.Condition(self.lock)
        self.counters = counters
        self.count = 0
        self.bytes = 0
        self.batch: Batch = []
        self.batch_bytes = 0
        self.batch_since = 0.0
        self.committing: Tuple[int, int] = (0, 0)
        self.inflight: Set[int] = set()
        self.acked_undeleted: Set[int] = set()
        # tallies (outbox.tallies): the stored values, and the operations of rows not committed yet
        self.tallies: Dict[str, int] = {}
        self.tally_ops: Dict[int, Tuple[Tuple[str, str, int], ...]] = {}  # seq -> operations
        # sequence (see outbox_marks.Ledger.resume): handed out, committed, reserved on disk
        self.boot = 0
        self.seq = self.seq_reserved = self.seq_at_open = self.seq_committed = 0
        self.skipped_to = 0
        self.ahead = 16  # the reservation written ahead of seq at each commit
        self.dirty = False  # counters or marks differ from the file: the next commit writes them
        self.disk_full = False  # reject_new: refusing until a commit works
        self.capped = False  # the file may not grow: only freed pages are reused
        self.full_drops = 0  # rows dropped in the current full-disk streak
        self.wrote_unclean = False  # this run wrote a reservation (clean = 0): close must write
        self.rejecting = False
        self.closing = False
        self.closed = False
        self._last_warn: Dict[str, float] = {}

    def check_open(self) -> None:
        """A closed queue answers QueueError, not a crash on a closed connection."""
        if self.closed:
            raise QueueError(f"{self.path}: queue is closed")

    def requeue(self, batch: Batch) -> None:
        """A batch that could not be committed goes back in front of the unflushed rows."""
        with self.lock:
            self.batch[:0] = batch
            self.batch_bytes += batch_bytes(batch)
            self.committing = (0, 0)

    def warn(self, key: str, msg: str, level: int = logging.WARNING, period: float = 10.0) -> None:
        """Log ``msg`` at most once per ``period`` seconds per ``key`` (not once per frame)."""
        now = time.monotonic()
        if now - self._last_warn.get(key, -1e9) >= period:
            self._last_warn[key] = now
            log.log(level, "%s", msg)


class Connections:
    """The writer connection ``w`` (``synchronous=FULL``: commits, drops, expiry) under ``wlock``
    and the sync side's ``r`` (claims and acks) under ``rlock``: an ack never waits for a commit's
    fsync behind the same connection."""

    def __init__(self, w: sqlite3.Connection, r: sqlite3.Connection) -> None:
        self.w = w
        self.r = r
        self.wlock = threading.Lock()
        self.rlock = threading.Lock()

    def checkpoint(self, conn: Optional[sqlite3.Connection] = None) -> None:
        """TRUNCATE gives the WAL's bytes back to the filesystem (best effort)."""
        with contextlib.suppress(sqlite3.Error):
            (conn or self.w).execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()

    def set_cap(self, pages: int) -> None:
        for conn in (self.w, self.r):
            conn.execute(f"PRAGMA max_page_count={int(pages)}").fetchall()

    def close(self) -> None:
        """Close both, never under a claim/ack or a commit still running on another thread."""
        with self.wlock, self.rlock:
            self.r.close()
            self.w.close()
