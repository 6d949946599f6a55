"""Read-only views of an outbox file for ``queue stats|peek|export``: while the service writes,
on a read-only mount, and on a damaged file.

SQLite is tried first (``mode=ro``, then ``immutable`` when no ``-shm`` can be created and the WAL
is empty). When that fails -- a damaged file, or WAL content on a read-only mount -- the figures
and messages come from a page-level scan (outbox_pages), marked ``damaged`` / ``"source": "pages"``.
Nothing here writes, moves or repairs; the writer salvages at its next start.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Optional

from edge_agent.adapters.outbox.db import STATS_COUNTERS, is_corrupt, iso_time
from edge_agent.adapters.outbox.marks import read_marks
from edge_agent.adapters.outbox.pages import PageScan, scan_file
from edge_agent.errors import QueueError


def open_readonly(path: Path) -> sqlite3.Connection:
    """Read-only view for ``queue stats/peek/export`` while the service may be writing.

    A WAL reader needs the ``-shm`` index, which it cannot create on a read-only mount or a full
    disk; when there is no WAL content to miss, the file is then opened ``immutable`` instead.
    """
    if not path.exists():
        raise QueueError(f"{path}: no queue file there (check [queue] path)")
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None, timeout=10.0)
        conn.execute("SELECT 1 FROM messages LIMIT 1").fetchall()
        return conn
    except sqlite3.DatabaseError as exc:
        if is_corrupt(exc):
            raise QueueError(f"{path}: not a readable outbox database: {exc}") from None
        first = exc
    wal = path.with_name(path.name + "-wal")
    if wal.exists() and wal.stat().st_size > 0:
        raise QueueError(
            f"{path}: cannot open read-only ({first}) and its WAL holds data an immutable read would miss"
        )
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True, isolation_level=None)
        conn.execute("SELECT 1 FROM messages LIMIT 1").fetchall()
    except sqlite3.DatabaseError as exc:
        raise QueueError(f"{path}: not a readable outbox database: {exc}") from None
    return conn


def _counters(stats: dict[str, Any], counters: dict[str, Any]) -> dict[str, Any]:
    stats["seq"] = int(counters.get("seq_committed", 0))  # the last committed one
    stats["boot"] = max(1, int(counters.get("boot", 0)))
    stats["disk_full"] = False  # only the writer knows; see the running agent's status
    for key in STATS_COUNTERS:
        stats[key] = int(counters.get(key, 0))
    return stats


def _scan(path: Path, why: QueueError) -> PageScan:
    try:
        return scan_file(path)
    except OSError as exc:
        raise QueueError(f"{why}; and the file cannot be read for a page scan: {exc.strerror}") from None


def _stats_from_scan(path: Path, why: QueueError) -> dict[str, Any]:
    found = _scan(path, why)
    msgs = found.messages
    oldest = min((m[3] for m in msgs.values()), default=None)
    stats: dict[str, Any] = {
        "pending": len(msgs),
        "inflight": 0,
        "unflushed": 0,
        "bytes": sum(len(m[2]) for m in msgs.values()),
        "oldest": iso_time(oldest),
        "sent": 0,  # a page scan does not tell SENT rows: every row counts as pending
        "oldest_unconfirmed_s": None,
        "path": str(path),
    }
    _counters(stats, found.meta)
    there = found.meta.get("rows")
    kept = read_marks(path)  # the header or the meta page may be what is gone: the marks still say
    if kept is not None and (there is None or kept.committed >= found.meta.get("seq_committed", 0)):
        there = kept.rows
        stats["seq"] = max(stats["seq"], kept.committed)
    stats["damaged"] = True
    stats["damaged_pages"] = found.damaged_pages
    stats["unreadable_rows"] = max(0, there - len(msgs)) if there is not None else None
    stats["note"] = f"read page by page: {why}"
    return stats


def _sent(conn: sqlite3.Connection) -> tuple[int, Optional[float]]:
    """(SENT rows, age in s of the oldest): acknowledged by the broker, not confirmed by the
    collector yet; (0, None) for a file from before the state was kept."""
    cols = {r[1] for r in conn.execute("PRAGMA table_info(messages)")}
    if "seq" not in cols:
        return 0, None
    n = int(conn.execute("SELECT count(*) FROM messages WHERE state = 1").fetchone()[0])
    row = conn.execute("SELECT min(created) FROM messages WHERE state = 1").fetchone()
    if row is None or row[0] is None:
        return n, None
    return n, round(max(0.0, time.time() - float(row[0])), 1)


def read_stats(path: Path) -> dict[str, Any]:
    """The figures ``Outbox.stats()`` gives, read from the file without taking the writer lock;
    from a page scan (with ``damaged``) when SQLite cannot read it."""
    try:
        conn = open_readonly(path)
    except QueueError as exc:
        if not path.exists():
            raise
        return _stats_from_scan(path, exc)
    try:
        stats: dict[str, Any] = {"pending": 0, "inflight": 0, "unflushed": 0, "bytes": 0}
        n, size = conn.execute("SELECT count(*), total(size) FROM messages").fetchone()
        stats["pending"], stats["bytes"] = int(n), int(size)
        row = conn.execute("SELECT created FROM messages ORDER BY id LIMIT 1").fetchone()
        stats["oldest"] = iso_time(row[0] if row else None)
        stats["sent"], stats["oldest_unconfirmed_s"] = _sent(conn)
        stats["path"] = str(path)
        return _counters(stats, dict(conn.execute("SELECT key, value FROM meta").fetchall()))
    except sqlite3.DatabaseError as exc:  # damage deeper in the file than the first page
        return _stats_from_scan(path, QueueError(f"{path}: {exc}"))
    finally:
        conn.close()


def _row(rowid: int, topic: str, payload: object, created: Any, attempts: int) -> dict[str, Any]:
    # SQLite reads a damaged record's missing columns as NULL without an error: a None payload made
    # `queue export` die with TypeError half-way through a damaged file
    body: object = payload
    if isinstance(payload, (bytes, str)):
        try:
            body = json.loads(payload)
        except ValueError:
            body = payload.decode("utf-8", "replace") if isinstance(payload, bytes) else payload
    return {
        "rowid": rowid,
        "topic": topic,
        "created": iso_time(created),
        "attempts": attempts,
        "payload": body,
    }


def iter_messages(path: Path, limit: Optional[int] = None) -> Iterator[dict[str, Any]]:
    """Stored messages oldest first, as ``{"rowid", "topic", "created", "attempts", "payload"}``;
    from a page scan when SQLite cannot read the file (or stops reading it half-way)."""
    done: set[int] = set()
    try:
        conn = open_readonly(path)
    except QueueError as exc:
        if not path.exists():
            raise
        why = exc
    else:
        try:
            sql = "SELECT id, topic, payload, created, attempts FROM messages ORDER BY id"
            cursor = conn.execute(sql + " LIMIT ?", (limit,)) if limit is not None else conn.execute(sql)
            for rowid, topic, payload, created, attempts in cursor:
                done.add(rowid)
                yield _row(rowid, topic, payload, created, attempts)
            return
        except sqlite3.DatabaseError as exc:
            why = QueueError(f"{path}: {exc}")
        finally:
            conn.close()
    found = _scan(path, why)
    for rid in sorted(found.messages):
        if limit is not None and len(done) >= limit:
            return
        if rid not in done:
            done.add(rid)
            _msg_id, topic, payload, created, attempts = found.messages[rid]
            yield _row(rid, topic, payload, created, attempts)
