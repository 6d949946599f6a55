"""Opening the outbox's files: the marks, salvage of a corrupt file, both connections, and the
retry of an open that met a full disk (the policy's ``open`` step: give back the reserve)."""

from __future__ import annotations

import logging
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Optional

from edge_agent.adapters.outbox.db import Recovery, connect, is_corrupt, recover_if_corrupt
from edge_agent.adapters.outbox.marks import MarksFile, read_marks
from edge_agent.adapters.outbox.reserve import Reserve, free_bytes
from edge_agent.adapters.outbox.state import Connections
from edge_agent.core.queue.policy import Marks, Policy, full_disk_step
from edge_agent.errors import QueueError

log = logging.getLogger("edge_agent.outbox")


@dataclass
class Opened:
    """What opening found: the handles, the file's totals and meta, the marks kept beside it."""

    marks: MarksFile
    db: Connections
    recovery: Optional[Recovery]
    rows: int
    nbytes: int
    meta: Dict[str, int]
    kept: Optional[Marks]

    def close(self) -> None:
        self.db.close()
        self.marks.close()


def _open_files(path: Path, kept: Optional[Marks]) -> Opened:
    marks = MarksFile(path)
    try:
        recovery = recover_if_corrupt(path, connect, kept)
        w = connect(path, "FULL")
        try:
            r = connect(path, "NORMAL")
            totals = w.execute("SELECT count(*), total(size) FROM messages").fetchone()
            meta = {str(k): int(v) for k, v in w.execute("SELECT key, value FROM meta")}
        except sqlite3.Error:
            w.close()
            raise
    except BaseException:
        marks.close()
        raise
    return Opened(marks, Connections(w, r), recovery, int(totals[0]), int(totals[1]), meta, kept)


def open_queue(path: Path, policy: Policy, reserve: Reserve) -> Opened:
    """Open (salvaging a corrupt file first); on a full disk give back the reserve and retry once.
    Every failure is one QueueError naming the file (the caller holds the queue's lock)."""
    # the marks kept beside the file: they survive the loss of its header, its WAL or itself
    kept = read_marks(path)
    try:
        try:
            return _open_files(path, kept)
        except (sqlite3.Error, OSError) as exc:
            # a full disk shows as SQLITE_FULL, or as "disk I/O error" when the -shm cannot grow
            step = full_disk_step(policy, "open", free_bytes=free_bytes(path.parent))
            corrupt = isinstance(exc, sqlite3.Error) and is_corrupt(exc)
            if corrupt or step.action != "retry" or not reserve.release(keep=step.keep or 0):
                raise
            log.warning("outbox %s: disk full at open (%s): released the disk reserve", path, exc)
            return _open_files(path, kept)
    except (sqlite3.Error, OSError) as exc:
        raise QueueError(f"{path}: cannot open the queue database: {exc}") from None
