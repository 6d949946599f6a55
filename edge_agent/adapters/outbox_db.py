"""File-level outbox operations: schema, integrity check and salvage, read-only inspection.

Greengrass' spooler recreates a corrupt database and loses the backlog. Here a file that fails
``PRAGMA quick_check`` (or is not a database at all) is moved aside under a timestamped name and
every row that can still be read is copied, one by one, into a fresh file. What could not be read
is counted and logged, never silently dropped.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Optional

from edge_agent.errors import QueueError

log = logging.getLogger("edge_agent.outbox")

SCHEMA = """
CREATE TABLE IF NOT EXISTS messages(
    id INTEGER PRIMARY KEY AUTOINCREMENT, msg_id TEXT NOT NULL, topic TEXT NOT NULL,
    payload BLOB NOT NULL, size INTEGER NOT NULL, created REAL NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0, state INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value INTEGER NOT NULL);
"""

STATS_COUNTERS = (
    "dropped",
    "expired",
    "rejected",
    "salvaged",
    "lost",
    "corrupt_files",
    "crashes",
    "seq_skipped",
)
# a gap between the last rows readable from either end is probed id by id up to this many ids
MAX_PROBE = 5_000_000
_COLUMNS = "msg_id, topic, payload, size, created, attempts"


def connect(path: Path, synchronous: str = "FULL") -> sqlite3.Connection:
    """Open (creating if needed) the outbox file with its pragmas and schema.

    An existing file is opened without a single write: ``auto_vacuum`` and ``journal_mode`` are set
    only on a new file (on an existing one they would be a write at every open, which fails on a
    full disk and trapped the backlog in a restart loop, issue 11). A new file is created 0600
    first, so SQLite's ``-wal``/``-shm`` (created with the database's mode) are private too.
    """
    new = not path.exists() or path.stat().st_size == 0
    if new:
        os.close(os.open(str(path), os.O_WRONLY | os.O_CREAT, 0o600))
    conn = sqlite3.connect(str(path), timeout=30.0, isolation_level=None, check_same_thread=False)
    try:
        if new:
            conn.execute("PRAGMA auto_vacuum=INCREMENTAL")  # effective only before the first table
            conn.execute("PRAGMA journal_mode=WAL")
        elif conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={synchronous}")
        # a small WAL: on a full disk the reserve must cover the WAL plus what a checkpoint adds to
        # the main file; 64 pages (256 KiB) keeps both well under the 1 MiB default reserve
        conn.execute("PRAGMA wal_autocheckpoint=64").fetchall()
        # Debian builds SQLite with SECURE_DELETE on: every freed page is zeroed, so deleting 100
        # results with snapshots wrote ~1 MB to the WAL and acks failed on a full disk. FAST zeroes
        # only within pages already being written.
        conn.execute("PRAGMA secure_delete=FAST").fetchall()
        conn.execute("PRAGMA journal_size_limit=1048576").fetchall()
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not {"messages", "meta"} <= tables:
            conn.executescript(SCHEMA)
    except BaseException:
        conn.close()
        raise
    return conn


def lock_queue(path: Path) -> IO[bytes]:
    """Take the single-writer lock beside ``path`` (released by the kernel even on SIGKILL)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(str(path.with_name(path.name + ".lock")), os.O_WRONLY | os.O_CREAT, 0o600)
        lockfile = os.fdopen(fd, "wb")
    except OSError as exc:
        raise QueueError(f"{path}: cannot create the queue directory or lock file: {exc}") from None
    try:
        fcntl.flock(lockfile, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        lockfile.close()
        raise QueueError(f"{path}: queue is in use by another process (stop it first)") from None
    return lockfile


def is_disk_full(exc: sqlite3.Error) -> bool:
    """SQLITE_FULL (also what ENOSPC surfaces as) or the same by message on Pythons without codes."""
    return getattr(exc, "sqlite_errorcode", None) == 13 or "disk is full" in str(exc)


def is_corrupt(exc: sqlite3.Error) -> bool:
    """SQLITE_CORRUPT / SQLITE_NOTADB: the file itself is damaged (vs. a full disk or I/O error)."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (11, 26)
    text = str(exc)
    return "malformed" in text or "not a database" in text


@dataclass(frozen=True)
class Recovery:
    """What happened to a corrupt outbox file."""

    moved_to: Path
    reason: str
    salvaged: int
    lost: int
    # True when the table could not be walked at all, so the loss is unknown (at least ``lost``)
    lost_unknown: bool


def integrity_problem(path: Path) -> Optional[str]:
    """``None`` if ``path`` is absent or passes ``PRAGMA quick_check``, else what is wrong."""
    if not path.exists():
        return None
    conn = sqlite3.connect(str(path), isolation_level=None)
    try:
        rows = conn.execute("PRAGMA quick_check").fetchall()
    except sqlite3.DatabaseError as exc:
        if is_corrupt(exc):
            return str(exc)
        raise  # full disk, I/O error, busy: not a reason to move the file aside
    finally:
        conn.close()
    if rows == [("ok",)]:
        return None
    return "; ".join(str(r[0]) for r in rows[:3])


def _move_aside(path: Path) -> Path:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    aside = path.with_name(f"{path.name}.corrupt-{stamp}")
    n = 1
    while aside.exists():
        aside = path.with_name(f"{path.name}.corrupt-{stamp}-{n}")
        n += 1
    for suffix in ("-wal", "-shm"):  # the WAL holds committed rows too: keep it with its database
        side = path.with_name(path.name + suffix)
        if side.exists():
            side.rename(aside.with_name(aside.name + suffix))
    path.rename(aside)
    return aside


def _scan_ids(src: sqlite3.Connection, order: str) -> tuple[list[int], bool]:
    """Row ids readable walking the table from one end; ``complete`` is False if the walk broke."""
    ids: list[int] = []
    try:
        for (rid,) in src.execute(f"SELECT id FROM messages ORDER BY id {order}"):
            ids.append(int(rid))
    except sqlite3.DatabaseError:
        return ids, False
    return ids, True


def _candidate_ids(src: sqlite3.Connection) -> tuple[list[int], bool]:
    asc, complete = _scan_ids(src, "ASC")
    if complete:
        return asc, False
    desc, _ = _scan_ids(src, "DESC")
    known = set(asc) | set(desc)
    if not known:
        return [], True
    lo = max(asc) if asc else 0
    hi = min(desc) if desc else max(known) + 1
    if hi - lo - 1 > MAX_PROBE:
        log.error("outbox salvage: gap of %d ids between readable rows; probing %d", hi - lo - 1, MAX_PROBE)
        hi = lo + MAX_PROBE + 1
    return sorted(known | set(range(lo + 1, hi))), False


def _salvage(aside: Path, dest: sqlite3.Connection) -> tuple[int, int, bool]:
    try:
        src = sqlite3.connect(f"file:{aside}?mode=ro", uri=True, isolation_level=None)
    except sqlite3.DatabaseError:
        return 0, 0, True
    salvaged = lost = 0
    try:
        try:
            ids, unknown = _candidate_ids(src)
        except sqlite3.DatabaseError:  # not a database, or no readable schema
            return 0, 0, True
        dest.execute("BEGIN IMMEDIATE")
        for rid in ids:
            try:
                row = src.execute(f"SELECT {_COLUMNS} FROM messages WHERE id = ?", (rid,)).fetchone()
            except sqlite3.DatabaseError:
                lost += 1
                continue
            if row is None:
                continue
            msg_id, topic, payload, _size, created, attempts = row
            if not (isinstance(msg_id, str) and isinstance(topic, str) and isinstance(payload, bytes)):
                lost += 1
                continue
            dest.execute(
                f"INSERT INTO messages(id, {_COLUMNS}, state) VALUES (?, ?, ?, ?, ?, ?, ?, 0)",
                (rid, msg_id, topic, payload, len(payload), float(created or 0.0), int(attempts or 0)),
            )
            salvaged += 1
        try:
            for key, value in src.execute("SELECT key, value FROM meta"):
                dest.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, int(value)))
        except sqlite3.DatabaseError:
            log.warning("outbox salvage: counters in %s unreadable; they restart from zero", aside)
        dest.execute("COMMIT")
        return salvaged, lost, unknown
    finally:
        src.close()


def recover_if_corrupt(path: Path, open_fresh: Callable[[Path], sqlite3.Connection]) -> Optional[Recovery]:
    """Check ``path``; if corrupt, move it aside and salvage into a fresh file made by ``open_fresh``."""
    problem = integrity_problem(path)
    if problem is None:
        return None
    aside = _move_aside(path)
    dest = open_fresh(path)
    try:
        salvaged, lost, unknown = _salvage(aside, dest)
    finally:
        dest.close()
    log.error(
        "outbox %s failed its integrity check (%s): moved aside to %s; salvaged %d messages, lost %d%s",
        path,
        problem,
        aside,
        salvaged,
        lost,
        " (table unreadable: loss unknown)" if unknown else "",
    )
    return Recovery(aside, problem, salvaged, lost, unknown)


def iso_time(ts: Optional[float]) -> Optional[str]:
    """Unix time -> ``2026-11-29T19:33:39Z`` (or None)."""
    if ts is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


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


def read_stats(path: Path) -> dict[str, Any]:
    """The figures ``Outbox.stats()`` gives, read from the file without taking the writer lock."""
    conn = open_readonly(path)
    try:
        stats: dict[str, Any] = {"pending": 0, "inflight": 0, "unflushed": 0, "bytes": 0}
        sql = "SELECT state, count(*), total(size) FROM messages GROUP BY state"
        for state, n, size in conn.execute(sql):
            stats["pending"] += int(n)
            stats["bytes"] += int(size)
            if state == 1:
                stats["inflight"] = int(n)
        row = conn.execute("SELECT created FROM messages ORDER BY id LIMIT 1").fetchone()
        stats["oldest"] = iso_time(row[0] if row else None)
        stats["path"] = str(path)
        counters = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        stats["seq"] = int(counters.get("seq_committed", 0))  # the last committed one
        stats["boot"] = max(1, int(counters.get("boot", 0)))
        stats["disk_full"] = False  # only the writer knows; see the running agent's status
        for key in STATS_COUNTERS:
            stats[key] = int(counters.get(key, 0))
        return stats
    finally:
        conn.close()


def iter_messages(path: Path, limit: Optional[int] = None) -> Iterator[dict[str, Any]]:
    """Stored messages oldest first, as ``{"id", "topic", "created", "attempts", "payload"}``."""
    conn = open_readonly(path)
    try:
        sql = "SELECT id, topic, payload, created, attempts FROM messages ORDER BY id"
        cursor = conn.execute(sql + " LIMIT ?", (limit,)) if limit is not None else conn.execute(sql)
        for rowid, topic, payload, created, attempts in cursor:
            try:
                body: Any = json.loads(payload)
            except ValueError:
                body = payload.decode("utf-8", "replace")
            yield {
                "seq": rowid,
                "topic": topic,
                "created": iso_time(created),
                "attempts": attempts,
                "payload": body,
            }
    finally:
        conn.close()
