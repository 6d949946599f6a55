"""Small shared helpers for outbox tests (tests/ is on sys.path)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Optional

from edge_agent.core.queue.policy import Limits

TOPIC = "edge/dev-1/detections"


def big_limits(**kw: object) -> Limits:
    """Caps far above what a test stores, overridable one at a time."""
    base: dict[str, object] = {"max_messages": 10_000_000, "max_bytes": 10**10, "max_age_s": 1e9}
    base.update(kw)
    return Limits(**base)  # type: ignore[arg-type]


def ro_int(path: Path, sql: str) -> int:
    """One integer read from a queue file opened read-only (``mode=ro``): what is on disk."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return int(conn.execute(sql).fetchone()[0])
    finally:
        conn.close()


def meta_rows(path: Path) -> int:
    """The row count the outbox keeps in its meta table (not a COUNT(*))."""
    return ro_int(path, "SELECT value FROM meta WHERE key = 'rows'")


def freelist(path: Path) -> int:
    return ro_int(path, "PRAGMA freelist_count")


class FailingDeletes:
    """A connection whose DELETEs fail with ``error``: the first ``times`` of them (None: every
    one); everything else goes to the real connection."""

    def __init__(
        self, conn: sqlite3.Connection, times: Optional[int] = None, error: str = "disk I/O error"
    ) -> None:
        self._conn = conn
        self.left = times
        self.error = error

    def execute(self, sql: str, *args: object) -> object:
        if sql.lstrip().startswith("DELETE") and (self.left is None or self.left > 0):
            if self.left is not None:
                self.left -= 1
            raise sqlite3.OperationalError(self.error)
        return self._conn.execute(sql, *args)

    def __getattr__(self, name: str) -> object:
        return getattr(self._conn, name)


class FullOnDelete(FailingDeletes):
    """The sync connection on a disk whose WAL cannot grow: the first ``times`` DELETEs fail with
    SQLITE_FULL (the message SQLite gives), later ones work."""

    def __init__(self, conn: sqlite3.Connection, times: int) -> None:
        super().__init__(conn, times, "database or disk is full")


def crash(ob: object) -> None:
    """What a kill -9 leaves of an open outbox, in-process and fast: the batch not yet committed is
    gone, no clean mark and no final counters are written, in-flight state is forgotten, the writer
    lock is released (the kernel does that for a dead process). A commit already running finishes
    first, as it would have reached the disk or not at all."""
    from edge_agent.adapters.outbox.outbox import Outbox

    assert isinstance(ob, Outbox)
    with ob._state.lock:
        ob._state.batch, ob._state.batch_bytes = [], 0
        ob._state.closed = True
        ob._state.cond.notify_all()
    ob._flusher.join(10)
    with ob.db.wlock, ob.db.rlock:
        ob.db.r.close()
        ob.db.w.close()
    ob.ledger.marks.close()
    ob._lockfile.close()


# a producer at ~4000 results/s in 0.05 s group commits: killed at a random moment by the test;
# argv: the queue file, the number of puts after which it prints 'go'
PRODUCER = r"""
import sys, time
from edge_agent.adapters.outbox.outbox import Outbox
import sqlite3
from pathlib import Path

from edge_agent.core.queue.policy import Limits
ob = Outbox(sys.argv[1], Limits(10**7, 10**10, 1e9), flush_interval_s=0.05, flush_batch=100)
i = 0
while True:
    ob.put("edge/dev-1/detections", {"n": i})
    i += 1
    if i % 20 == 0:
        time.sleep(0.005)
    if i == int(sys.argv[2]):
        print("go", flush=True)
"""
