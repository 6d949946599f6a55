"""PostgreSQL: ``messages`` partitioned by day of ``time`` (native declarative partitioning),
made once by ``edge-agent fleet db partition`` and kept by the collector's maintenance.

A partitioned table's unique keys must hold its partition column, so the key becomes
``(device, boot, seq, time)``: a redelivery carries the same ``ts``, so it is still one row per
message (the trust check finds another message with the same key in every partition). A row
whose time has no partition (a clock years off) lands in ``messages_default``. Partitions are
made ``AHEAD_DAYS`` ahead, and a partition whose whole day is past every class's age is dropped
whole (its spans recorded in ``expired`` first), not deleted row by row.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import TYPE_CHECKING, Dict, List, NamedTuple, Optional, Tuple

from edge_agent.adapters.collector.migrations import DbError
from edge_agent.core.messages.retention import NAMED, Span

if TYPE_CHECKING:
    from edge_agent.adapters.collector.db import CollectorDb

AHEAD_DAYS = 7
DAY_S = 86400
DEFAULT = "messages_default"
_NAME = re.compile(r"^messages_p(\d{8})$")
INDEXES = (
    "CREATE INDEX messages_device_seq ON messages (device, seq)",
    "CREATE INDEX messages_time ON messages (time)",
    "CREATE INDEX messages_device_camera_time ON messages (device, camera, time) WHERE camera IS NOT NULL",
)


class Part(NamedTuple):
    name: str
    lo: Optional[float]  # unix time of its first day (None: the default partition)
    hi: Optional[float]


def name_of(day: dt.date) -> str:
    return f"messages_p{day:%Y%m%d}"


def bounds(day: dt.date) -> str:
    """The day's partition bounds (DDL takes no parameters: literals of a date, UTC)."""
    return (
        f"FOR VALUES FROM ('{day.isoformat()} 00:00:00+00') TO ('{day + dt.timedelta(days=1)} 00:00:00+00')"
    )


def _day(ts: float) -> dt.date:
    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).date()


def _ts(day: dt.date) -> float:
    return dt.datetime(day.year, day.month, day.day, tzinfo=dt.timezone.utc).timestamp()


def is_partitioned(db: CollectorDb) -> bool:
    row = db._x("SELECT c.relkind FROM pg_class c WHERE c.oid = to_regclass('messages')").fetchone()
    return row is not None and row[0] == "p"


def leaves(db: CollectorDb) -> Optional[List[Part]]:
    """The partitions, oldest first and the default last; None: ``messages`` is not partitioned."""
    if db.dialect != "postgresql" or not is_partitioned(db):
        return None
    return children(db)


def children(db: CollectorDb) -> List[Part]:
    """The tables under ``messages`` (partitions, or a hypertable's chunks), by day when named so."""
    names = [
        str(r[0])
        for r in db._x(
            "SELECT i.inhrelid::regclass::text FROM pg_inherits i WHERE i.inhparent = to_regclass('messages')"
        ).fetchall()
    ]
    out = []
    for n in names:
        m = _NAME.match(n)
        if m:
            day = dt.datetime.strptime(m.group(1), "%Y%m%d").date()
            out.append(Part(n, _ts(day), _ts(day) + DAY_S))
    out.sort(key=lambda p: p.lo or 0.0)
    out += [Part(n, None, None) for n in sorted(names) if not _NAME.match(n)]
    return out


def _add_day(db: CollectorDb, day: dt.date) -> None:
    """One day's partition; rows of that day already in the default partition move into it."""
    name, lo, hi = name_of(day), _ts(day), _ts(day) + DAY_S
    db._x(f'CREATE TABLE "{name}" (LIKE messages INCLUDING DEFAULTS)')
    db._x(
        f'WITH moved AS (DELETE FROM "{DEFAULT}" WHERE time >= to_timestamp(?) AND time < to_timestamp(?) '
        f'RETURNING *) INSERT INTO "{name}" SELECT * FROM moved',
        (lo, hi),
    )
    db._x(f'ALTER TABLE messages ATTACH PARTITION "{name}" {bounds(day)}')


def ensure_ahead(db: CollectorDb, now: float, ahead_days: int = AHEAD_DAYS) -> int:
    """Make the partitions of today and the next ``ahead_days`` days that are missing (one short
    transaction); how many were made."""
    have = {p.name for p in leaves(db) or []}
    today = _day(now)
    want = [today + dt.timedelta(days=i) for i in range(ahead_days + 1)]
    todo = [d for d in want if name_of(d) not in have]
    if not todo:
        return 0
    db._begin()
    try:
        db._x("SET LOCAL lock_timeout = '2s'")  # ATTACH waits for ingest: never stall it for long
        for d in todo:
            _add_day(db, d)
        db.conn.execute("COMMIT")
    except BaseException:
        db._rollback()
        raise
    return len(todo)


def span_rows(db: CollectorDb, table: str) -> List[Span]:
    """The spans of every row of ``table`` (one query): per confirmed island, or per run of
    consecutive seqs outside every island (core.messages.retention)."""
    got = db._x(
        "SELECT device, boot, MIN(seq), MAX(seq), COUNT(*), EXTRACT(EPOCH FROM MAX(time))::float8 FROM ("
        "SELECT p.device, p.boot, p.seq, p.time, c.lo AS island, CASE WHEN c.lo IS NULL THEN p.seq - "
        "ROW_NUMBER() OVER (PARTITION BY p.device, p.boot, c.lo IS NULL ORDER BY p.seq) END AS run "
        f"FROM {table} p LEFT JOIN confirmed c ON c.device = p.device AND c.boot = p.boot "
        "AND p.seq BETWEEN c.lo AND c.hi) AS t GROUP BY device, boot, island, run"
    ).fetchall()
    return [Span(str(d), int(b), int(lo), int(hi), int(n), float(t)) for d, b, lo, hi, n, t in got]


def drop_before(db: CollectorDb, before: float) -> Tuple[int, Dict[str, int]]:
    """Drop the day partitions wholly older than ``before``, oldest first, each in its own
    transaction with its spans recorded; ``(partitions, rows by class)`` dropped."""
    from edge_agent.adapters.collector import known, purge

    dropped = 0
    rows: Dict[str, int] = {}
    for p in leaves(db) or []:
        if p.hi is None or p.hi > before:
            continue
        db._begin()
        try:
            if not purge._locked(db):
                db._rollback()
                break
            found = span_rows(db, p.name)
            named = ", ".join(f"'{k}'" for k in NAMED)
            by_class = db._x(
                f"SELECT CASE WHEN kind IN ({named}) THEN kind ELSE 'results' END, COUNT(*) "
                f"FROM {p.name} GROUP BY 1"
            ).fetchall()
            islands: Dict[Tuple[str, int], List[Tuple[int, int]]] = {}
            for s in found:
                got = db._x(
                    "SELECT lo, hi FROM confirmed WHERE device = ? AND boot = ? AND hi >= ? AND lo <= ? ORDER BY lo",
                    (s.device, s.boot, s.lo, s.hi),
                ).fetchall()
                islands.setdefault((s.device, s.boot), []).extend((int(a), int(z)) for a, z in got)
            purge.record(db, found, islands)
            known.bump(db, [s.device for s in found])
            db._x("SET LOCAL lock_timeout = '2s'")
            db._x(f"DROP TABLE {p.name}")
            db.conn.execute("COMMIT")
        except BaseException:
            db._rollback()
            raise
        dropped += 1
        for cls, n in by_class:
            rows[str(cls)] = rows.get(str(cls), 0) + int(n)
    return dropped, rows


def convert(db: CollectorDb, now: float, ahead_days: int = AHEAD_DAYS) -> Tuple[int, int]:
    """Make ``messages`` partitioned by day of ``time``, its rows copied, in ONE transaction
    (ingest waits for it: run it on a new database or in a quiet hour); ``(rows, partitions)``."""
    if db.dialect != "postgresql":
        raise DbError("partitioning is for PostgreSQL (SQLite deletes in batches)")
    if is_partitioned(db):
        raise DbError("messages is partitioned already")
    db._begin()
    try:
        db._x("LOCK TABLE messages IN ACCESS EXCLUSIVE MODE")
        views = db._x(
            "SELECT viewname, definition FROM pg_views WHERE schemaname = current_schema()"
        ).fetchall()
        # days from the oldest row of the last year and a day (an older one, a clock at 1970, goes
        # to the default partition) to the newest (at most a year ahead) or AHEAD_DAYS ahead
        span = db._x(
            "SELECT EXTRACT(EPOCH FROM MIN(time) FILTER (WHERE time >= to_timestamp(?)))::float8, "
            "EXTRACT(EPOCH FROM MAX(time))::float8, COUNT(*) FROM messages",
            (now - 366 * DAY_S,),
        ).fetchone()
        db._x("ALTER TABLE messages RENAME TO messages_unpartitioned")
        db._x(
            "CREATE TABLE messages (LIKE messages_unpartitioned INCLUDING DEFAULTS) PARTITION BY RANGE (time)"
        )
        db._x(f'CREATE TABLE "{DEFAULT}" PARTITION OF messages DEFAULT')
        # at most a year and a day back: rows older than that (a clock at 1970) go to the default
        first = (
            max(_day(min(span[0], now)), _day(now) - dt.timedelta(days=366))
            if span[0] is not None
            else _day(now)
        )
        last = _day(now) + dt.timedelta(days=ahead_days)
        if span[1] is not None:
            last = max(last, min(_day(span[1]), _day(now) + dt.timedelta(days=366)))
        days = (last - first).days + 1
        for i in range(days):
            d = first + dt.timedelta(days=i)
            db._x(f'CREATE TABLE "{name_of(d)}" PARTITION OF messages {bounds(d)}')
        db._x("INSERT INTO messages SELECT * FROM messages_unpartitioned")
        db._x("DROP TABLE messages_unpartitioned CASCADE")
        db._x("ALTER TABLE messages ADD PRIMARY KEY (device, boot, seq, time)")
        for sql in INDEXES:
            db._x(sql)
        _recreate(db, [(str(n), str(v)) for n, v in views])
        db.conn.execute("COMMIT")
    except BaseException:
        db._rollback()
        raise
    return int(span[2]), days + 1


def _recreate(db: CollectorDb, views: List[Tuple[str, str]]) -> None:
    """The views the CASCADE dropped, in an order that works (a view on a view after it)."""
    have = {str(r[0]) for r in db._x("SELECT viewname FROM pg_views WHERE schemaname = current_schema()")}
    todo = [(n, v) for n, v in views if n not in have]
    while todo:
        left = []
        for name, body in todo:
            db._x("SAVEPOINT v")
            try:
                db.conn.execute(f'CREATE VIEW "{name}" AS {body}')
                db._x("RELEASE SAVEPOINT v")
            except db.errors():
                db._x("ROLLBACK TO SAVEPOINT v")
                left.append((name, body))
        if len(left) == len(todo):
            raise DbError(
                f"cannot recreate the views {', '.join(n for n, _ in left)} on the partitioned table"
            )
        todo = left


def has_timescaledb(db: CollectorDb) -> bool:
    return db._x("SELECT 1 FROM pg_extension WHERE extname = 'timescaledb'").fetchone() is not None


def hypertable(db: CollectorDb) -> int:
    """``messages`` as a TimescaleDB hypertable of day chunks (the extension installed in this
    database); its rows migrated. Not the tested path: no TimescaleDB in CI. The retention then
    deletes in batches chunk by chunk (chunks are not dropped whole: their spans would be lost)."""
    if not has_timescaledb(db):
        raise DbError(
            "the timescaledb extension is not installed in this database (CREATE EXTENSION timescaledb)"
        )
    db._begin()
    try:
        db._x("ALTER TABLE messages DROP CONSTRAINT messages_pkey")
        db._x("ALTER TABLE messages ADD PRIMARY KEY (device, boot, seq, time)")
        db._x(
            "SELECT create_hypertable('messages', 'time', chunk_time_interval => INTERVAL '1 day', "
            "migrate_data => true)"
        )
        n = int(db._x("SELECT COUNT(*) FROM messages").fetchone()[0])
        db.conn.execute("COMMIT")
    except BaseException:
        db._rollback()
        raise
    return n
