"""Retention of the collector's messages (SQLite and PostgreSQL): rows older than their class's
age (core.messages.retention: results, objects, counts) deleted in bounded batches, each in its
own short transaction, the spans they leave recorded in ``expired`` in that same transaction.

A batch is at most ``batch`` rows, oldest device time first, found on the ``messages_time``
index: ingest waits for one batch at most (SQLite: one writer at a time; PostgreSQL: the batch
locks only the rows it deletes, ingest only inserts). PostgreSQL deletes by ``ctid`` per table
(each partition of a partitioned ``messages`` on its own: adapters.collector.partitions); two
collectors of a group never purge at once (an advisory lock; the other skips its turn).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Dict, List, NamedTuple, Optional, Tuple

from edge_agent.adapters.collector import known
from edge_agent.core.messages.retention import CLASSES, NAMED, Island, Span, merge, spans

if TYPE_CHECKING:
    from edge_agent.adapters.collector.db import CollectorDb

PURGE_LOCK = 0x6564_6766  # "edgf": one purger per database
DAY_S = 86400.0


class Ages(NamedTuple):
    """Days per class; 0 = kept for ever."""

    results: float = 0.0
    objects: float = 0.0
    counts: float = 0.0

    def cutoffs(self, now: float) -> Dict[str, float]:
        """class -> the device time before which its rows go (only the classes with an age)."""
        return {c: now - getattr(self, c) * DAY_S for c in CLASSES if getattr(self, c) > 0}


def predicate(cls: str) -> str:
    if cls in NAMED:
        return f"kind = '{cls}'"
    if cls != "results":
        raise ValueError(f"retention class {cls!r}: expected one of {', '.join(CLASSES)}")
    return "kind NOT IN (" + ", ".join(f"'{k}'" for k in NAMED) + ")"


def _t(db: CollectorDb) -> str:
    return "?" if db.dialect == "sqlite" else "to_timestamp(?)"


def tables(db: CollectorDb, before: Optional[float] = None) -> List[str]:
    """The tables holding messages rows: ``messages``, or the tables under it (the partitions of a
    partitioned one that may hold a row older than ``before``, oldest first, the default last;
    a TimescaleDB hypertable's chunks), each deleted from on its own (a ctid is per table)."""
    if db.dialect == "sqlite":
        return ["messages"]
    from edge_agent.adapters.collector import partitions

    parts = partitions.children(db)
    keep = [p.name for p in parts if before is None or p.lo is None or p.lo < before]
    return keep if partitions.is_partitioned(db) else [*keep, "messages"]


def _delete(
    db: CollectorDb, table: str, cls: str, before: float, limit: int
) -> List[Tuple[str, int, int, float]]:
    pred = predicate(cls)
    if db.dialect == "sqlite":
        got = db._x(
            f"SELECT device, boot, seq, time FROM messages WHERE {pred} AND time < ? ORDER BY time LIMIT ?",
            (before, limit),
        ).fetchall()
        db.conn.executemany(
            "DELETE FROM messages WHERE device = ? AND boot = ? AND seq = ?",
            [(d, b, s) for d, b, s, _ in got],
        )
    else:
        got = db._x(
            f"DELETE FROM ONLY {table} WHERE ctid = ANY(ARRAY(SELECT ctid FROM ONLY {table} WHERE {pred} AND "
            f"time < to_timestamp(?) ORDER BY time LIMIT ?)) "
            "RETURNING device, boot, seq, EXTRACT(EPOCH FROM time)::float8",
            (before, limit),
        ).fetchall()
    return [(str(d), int(b), int(s), float(t)) for d, b, s, t in got]


def _islands(
    db: CollectorDb, rows: Sequence[Tuple[str, int, int, float]]
) -> Dict[Tuple[str, int], List[Island]]:
    span: Dict[Tuple[str, int], Tuple[int, int]] = {}
    for d, b, s, _ in rows:
        lo, hi = span.get((d, b), (s, s))
        span[(d, b)] = (min(lo, s), max(hi, s))
    out: Dict[Tuple[str, int], List[Island]] = {}
    for (d, b), (lo, hi) in sorted(span.items()):
        got = db._x(
            "SELECT lo, hi FROM confirmed WHERE device = ? AND boot = ? AND hi >= ? AND lo <= ? ORDER BY lo",
            (d, b, lo, hi),
        ).fetchall()
        out[(d, b)] = [(int(a), int(z)) for a, z in got]
    return out


def record(db: CollectorDb, new: Sequence[Span], islands: Dict[Tuple[str, int], List[Island]]) -> None:
    """Add ``new`` to ``expired`` (in the caller's transaction), each merged with the stored spans
    of its island (or the adjacent ones, outside every island): the table stays a few rows per
    device and gap."""
    ep = "newest" if db.dialect == "sqlite" else "EXTRACT(EPOCH FROM newest)::float8"
    for s in new:
        isl = next((i for i in islands.get((s.device, s.boot), []) if i[0] <= s.lo <= i[1]), None)
        lo, hi = isl if isl is not None else (s.lo - 1, s.hi + 1)
        old = [
            Span(s.device, s.boot, int(a), int(z), int(n), float(t))
            for a, z, n, t in db._x(
                f"SELECT lo, hi, rows, {ep} FROM expired WHERE device = ? AND boot = ? AND hi >= ? AND lo <= ?",
                (s.device, s.boot, lo, hi),
            ).fetchall()
        ]
        m = merge(s, old)
        for o in old:
            db._x("DELETE FROM expired WHERE device = ? AND boot = ? AND lo = ?", (s.device, s.boot, o.lo))
        db._x(
            f"INSERT INTO expired (device, boot, lo, hi, rows, newest) VALUES (?, ?, ?, ?, ?, {_t(db)})",
            (m.device, m.boot, m.lo, m.hi, m.rows, m.newest),
        )


def _locked(db: CollectorDb) -> bool:
    if db.dialect == "sqlite":
        return True  # BEGIN IMMEDIATE: one writer
    return bool(db._x("SELECT pg_try_advisory_xact_lock(?)", (PURGE_LOCK,)).fetchone()[0])


def purge_batch(db: CollectorDb, cls: str, before: float, batch: int) -> int:
    """Delete at most ``batch`` rows of ``cls`` older than ``before`` (device time), oldest first,
    and record their spans, in one transaction; fewer than ``batch``: nothing left (or another
    collector is purging: it goes on)."""
    db._begin()
    try:
        rows: List[Tuple[str, int, int, float]] = []
        if _locked(db):
            for table in tables(db, before):
                rows += _delete(db, table, cls, before, batch - len(rows))
                if len(rows) >= batch:
                    break
        if rows:
            islands = _islands(db, rows)
            record(db, spans(rows, islands), islands)
            known.bump(db, [d for d, _, _, _ in rows])  # last: the device locks held the shortest
        db.conn.execute("COMMIT")
    except BaseException:
        db._rollback()
        raise
    return len(rows)


def due(db: CollectorDb, cls: str, before: float) -> int:
    """How many rows of ``cls`` are older than ``before`` (``fleet retention --dry-run``)."""
    return int(
        db._x(
            f"SELECT COUNT(*) FROM messages WHERE {predicate(cls)} AND time < {_t(db)}", (before,)
        ).fetchone()[0]
    )


def expired_of(db: CollectorDb, device: str) -> Tuple[int, int, Optional[float]]:
    """``(rows, spans, newest time)`` expired of ``device``."""
    ep = "MAX(newest)" if db.dialect == "sqlite" else "EXTRACT(EPOCH FROM MAX(newest))::float8"
    n, k, t = db._x(
        f"SELECT COALESCE(SUM(rows), 0), COUNT(*), {ep} FROM expired WHERE device = ?", (device,)
    ).fetchone()
    return int(n), int(k), None if t is None else float(t)
