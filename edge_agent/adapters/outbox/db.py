"""File-level outbox operations: schema, integrity check and salvage, read-only inspection.

Greengrass' spooler recreates a corrupt database and loses the backlog. Here a file that fails
``PRAGMA quick_check`` (or is not a database at all) is moved aside under a timestamped name and
every row that can still be read -- page by page (outbox_pages), so a truncated or partly
overwritten file still yields each intact row -- is copied into a fresh file. What could not be read
is counted (``salvaged + lost`` = the row count the file kept in meta) and logged.
"""

from __future__ import annotations

import fcntl
import logging
import os
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Optional

from edge_agent.adapters.outbox.pages import scan_file
from edge_agent.core.queue.policy import Marks
from edge_agent.errors import QueueError

log = logging.getLogger("edge_agent.outbox")

# The agent's SQL stays within SQLite 3.22 (Ubuntu 18.04, the Jetson Nano's JetPack 4.6): no
# UPSERT, window functions or RETURNING there; RETURNING (3.35) only where this is checked
# (tests/adapters/outbox/test_old_sqlite.py runs the outbox on SQLite 3.34.1, Pi OS Bullseye's)
HAS_RETURNING = sqlite3.sqlite_version_info >= (3, 35, 0)

SCHEMA = """
CREATE TABLE IF NOT EXISTS messages(
    id INTEGER PRIMARY KEY AUTOINCREMENT, msg_id TEXT NOT NULL, topic TEXT NOT NULL,
    payload BLOB NOT NULL, size INTEGER NOT NULL, created REAL NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0, state INTEGER NOT NULL DEFAULT 0,
    boot INTEGER, seq INTEGER, due REAL NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value INTEGER NOT NULL);
INSERT OR IGNORE INTO meta(key, value) VALUES ('rows', 0);
"""
# state: PENDING (not sent, or sent and not acknowledged yet: in flight lives in memory) or SENT
# (the broker's PUBACK came, the collector's confirmation not yet: [mqtt] confirm = "collector").
# boot/seq: the row's numbers (NULL in rows stored before they were columns: such a row is
# deleted on its PUBACK, as before); due: when a SENT row is sent again if still unconfirmed.
PENDING, SENT = 0, 1
# partial indexes: only SENT rows are in them, so with confirm = "puback" (every row PENDING) an
# insert or delete pays nothing for them
INDEXES = """
CREATE INDEX IF NOT EXISTS messages_sent_seq ON messages(boot, seq) WHERE state = 1;
CREATE INDEX IF NOT EXISTS messages_sent_due ON messages(due) WHERE state = 1;
"""
# a queue file from before the columns: migrated in place at its first open (one transaction,
# schema only: old rows keep NULL numbers; ALTER TABLE ADD COLUMN rewrites no row)
_ADDED = (("boot", "INTEGER"), ("seq", "INTEGER"), ("due", "REAL NOT NULL DEFAULT 0"))
# meta 'rows' is the number of rows in messages, kept in the same transaction as every insert and
# delete, so a salvage knows what was there: salvaged + lost = rows (a file from before it existed
# has no 'rows': the loss is then reported as unknown)
ROWS_DELTA = "UPDATE meta SET value = value + ? WHERE key = 'rows'"

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
_COLUMNS = "msg_id, topic, payload, size, created, attempts"
# WAL autocheckpoint, in pages. WAL_PAGES: every connection at open, and the sync connection
# while the queue is capped (full disk) -- what the reserve covers. SYNC_WAL_PAGES: the sync
# connection otherwise (outbox_space.Space.tune_sync_wal says why that is safe).
WAL_PAGES = 64
SYNC_WAL_PAGES = 1024


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
        conn.execute(f"PRAGMA wal_autocheckpoint={WAL_PAGES}").fetchall()
        # Debian builds SQLite with SECURE_DELETE on: every freed page is zeroed, so deleting 100
        # results with snapshots wrote ~1 MB to the WAL and acks failed on a full disk. FAST zeroes
        # only within pages already being written.
        conn.execute("PRAGMA secure_delete=FAST").fetchall()
        conn.execute("PRAGMA journal_size_limit=1048576").fetchall()
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not {"messages", "meta"} <= tables:
            conn.executescript(SCHEMA)
        _migrate(conn)
    except BaseException:
        conn.close()
        raise
    return conn


def _migrate(conn: sqlite3.Connection) -> None:
    """Add what an older queue file lacks (columns, indexes); writes nothing when it has them."""
    have = {r[1] for r in conn.execute("PRAGMA table_info(messages)")}
    indexes = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    missing = [(c, t) for c, t in _ADDED if c not in have]
    if not missing and {"messages_sent_seq", "messages_sent_due"} <= indexes:
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        for col, decl in missing:
            conn.execute(f"ALTER TABLE messages ADD COLUMN {col} {decl}")
        for stmt in INDEXES.strip().splitlines():
            conn.execute(stmt)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    if missing:
        log.info("outbox: queue file migrated in place (added %s)", ", ".join(c for c, _ in missing))


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
    # True when the file did not say how many rows it held: ``lost`` is then the number of damaged
    # pages (each held at least one row), a lower bound
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


def _put_back(aside: Path, path: Path) -> None:
    """Undo :func:`_move_aside` after a salvage that did not complete: the damaged file (with its
    ``-wal``/``-shm``, if any) replaces the fresh one made for it (renames: no free byte needed).
    The fresh file's own ``-wal`` (left when its close could not checkpoint) must not stay: SQLite
    would read its frames as the damaged file's."""
    try:
        for suffix in ("-wal", "-shm"):
            side, fresh = aside.with_name(aside.name + suffix), path.with_name(path.name + suffix)
            fresh.unlink(missing_ok=True)
            if side.exists():
                side.rename(fresh)
        aside.rename(path)
    except OSError as exc:
        log.error(
            "outbox %s: cannot put the damaged file %s back after a failed salvage: %s", path, aside, exc
        )


def _salvage(aside: Path, dest: sqlite3.Connection, kept: Optional[Marks]) -> tuple[int, int, bool]:
    """Copy every row a page-level scan finds (outbox_pages) into ``dest``; (salvaged, lost, unknown)."""
    try:
        found = scan_file(aside)
    except OSError as exc:
        log.error("outbox salvage: cannot read %s: %s", aside, exc)
        return 0, 0, True
    dest.execute("BEGIN IMMEDIATE")
    for rid in sorted(found.messages):
        msg_id, topic, payload, created, attempts = found.messages[rid]
        dest.execute(
            f"INSERT INTO messages(id, {_COLUMNS}, state) VALUES (?, ?, ?, ?, ?, ?, ?, 0)",
            (rid, msg_id, topic, payload, len(payload), created, attempts),
        )
    for key, value in found.meta.items():
        if key != "rows":
            dest.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, int(value)))
    salvaged = len(found.messages)
    dest.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('rows', ?)", (salvaged,))
    dest.execute("COMMIT")
    # the last known row count: the file's own (meta), or the marks file's when that saw the same or a
    # later commit (a damaged header or meta page leaves only the marks to say what was there)
    there = found.meta.get("rows")
    if kept is not None and (there is None or kept.committed >= found.meta.get("seq_committed", 0)):
        there = kept.rows
    if there is None:
        return salvaged, found.damaged_pages, True
    return salvaged, max(0, there - salvaged), False


def recover_if_corrupt(
    path: Path, open_fresh: Callable[[Path], sqlite3.Connection], kept: Optional[Marks] = None
) -> Optional[Recovery]:
    """Check ``path``; if corrupt, move it aside and salvage into a fresh file made by ``open_fresh``
    (``kept``: the marks kept beside the file, for the last known row count)."""
    problem = integrity_problem(path)
    if problem is None:
        return None
    aside = _move_aside(path)
    try:
        dest = open_fresh(path)
        try:
            salvaged, lost, unknown = _salvage(aside, dest, kept)
        finally:
            dest.close()
    except BaseException:
        # e.g. a full disk before the salvage committed: the damaged file goes back in place, so
        # the open's retry (once the reserve is given back) salvages it; left aside, the retry
        # started an empty queue and counted every row lost, salvageable ones included
        _put_back(aside, path)
        raise
    log.error(
        "outbox %s failed its integrity check (%s): moved aside to %s; salvaged %d messages, lost %d%s",
        path,
        problem,
        aside,
        salvaged,
        lost,
        " damaged pages (how many rows they held is unknown)" if unknown else "",
    )
    return Recovery(aside, problem, salvaged, lost, unknown)


def iso_time(ts: Optional[float]) -> Optional[str]:
    """Unix time -> ``2026-11-29T19:33:39Z`` (or None, also for a value no calendar holds: a
    damaged row's ``created`` of 1e300 made ``queue export`` die with OverflowError, a text one
    with TypeError)."""
    if ts is None:
        return None
    try:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))
    except (OverflowError, ValueError, OSError, TypeError):
        return None
