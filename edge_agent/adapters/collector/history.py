"""The health history table (``status_history``, schema 4) and the fleet-wide reads over the
devices the metrics and ``fleet gaps`` need, for SQLite and PostgreSQL.

Each status is one row, inserted in the store's transaction (a status is history exactly when it
is stored). Thinning and expiry run from the collector's maintenance in their own short
transactions of at most ``batch`` rows each, so ingest waits for one batch at most.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Optional

from edge_agent.core.messages.fleet import LOSS_COUNTERS, DeviceStatus
from edge_agent.core.messages.health_history import Health, Row, health, thin

if TYPE_CHECKING:
    from edge_agent.adapters.collector.db import CollectorDb

FIELDS = Health._fields
COLS = ("device", "time", "received", "state", *FIELDS, "body")


def _ep(col: str, dialect: str) -> str:
    return col if dialect == "sqlite" else f"EXTRACT(EPOCH FROM {col})::float8"


def insert(db: CollectorDb, statuses: Sequence[DeviceStatus], received: float) -> None:
    """One history row per status (inside the caller's transaction)."""
    if not statuses:
        return
    if db.dialect == "sqlite":
        marks = ", ".join("?" for _ in COLS)
    else:
        times = {"time", "received"}
        marks = ", ".join(
            "to_timestamp(%s)" if c in times else ("%s::jsonb" if c == "body" else "%s") for c in COLS
        )
    rows = []
    for s in statuses:
        h = s.health if s.health is not None else health(json.loads(s.body))
        vals: list[Any] = list(h)
        if db.dialect == "sqlite" and h.disk_full is not None:
            vals[FIELDS.index("disk_full")] = int(h.disk_full)
        rows.append((s.device, s.ts, received, s.state, *vals, s.body))
    sql = f"INSERT INTO status_history ({', '.join(COLS)}) VALUES ({marks})"
    if db.dialect == "sqlite":
        db.conn.executemany(sql, rows)
    else:  # psycopg 3: executemany is the cursor's (pipelined)
        with db.conn.cursor() as cur:
            cur.executemany(sql, rows)


def rows(
    db: CollectorDb, device: str, since: Optional[float], limit: int, body: bool = False
) -> list[dict[str, Any]]:
    """The device's history from ``since`` (unix time; None: all), oldest first; with more than
    ``limit`` rows, the newest ``limit``."""
    d = db.dialect
    cols = ["time", "received", "state", *FIELDS, *(["body"] if body else [])]
    sel = ", ".join(_ep(c, d) if c in ("time", "received") else c for c in cols)
    where = "device = ?" + (
        f" AND time >= {'?' if d == 'sqlite' else 'to_timestamp(?)'}" if since is not None else ""
    )
    params: list[Any] = [device] + ([since] if since is not None else []) + [limit]
    got = db._x(
        f"SELECT {sel} FROM status_history WHERE {where} ORDER BY time DESC, id DESC LIMIT ?", params
    ).fetchall()
    out = []
    for r in reversed(got):
        row = dict(zip(cols, r))
        if row.get("disk_full") is not None:
            row["disk_full"] = bool(row["disk_full"])
        if body and isinstance(row.get("body"), str):
            row["body"] = json.loads(row["body"])
        out.append(row)
    return out


def known(db: CollectorDb, device: str) -> bool:
    return db._x("SELECT 1 FROM devices WHERE device = ?", (device,)).fetchone() is not None or (
        db._x("SELECT 1 FROM status_history WHERE device = ? LIMIT 1", (device,)).fetchone() is not None
    )


def _t(db: CollectorDb) -> str:
    return "?" if db.dialect == "sqlite" else "to_timestamp(?)"


def expire(db: CollectorDb, before: float, batch: int) -> int:
    """Delete at most ``batch`` rows older than ``before``, oldest first (own transaction)."""
    db._begin()
    try:
        n = db._x(
            f"DELETE FROM status_history WHERE id IN (SELECT id FROM status_history WHERE time < {_t(db)} "
            "ORDER BY time LIMIT ?)",
            (before, batch),
        ).rowcount
        db.conn.execute("COMMIT")
    except BaseException:
        db._rollback()
        raise
    return int(n)


def due(db: CollectorDb, before: float) -> int:
    """How many rows are older than ``before`` (``fleet retention --dry-run``)."""
    return int(db._x(f"SELECT COUNT(*) FROM status_history WHERE time < {_t(db)}", (before,)).fetchone()[0])


def thin_batch(db: CollectorDb, before: float, bucket_s: float, batch: int) -> tuple[int, int]:
    """Thin at most ``batch`` not yet thinned rows older than ``before`` (core.history.thin):
    ``(deleted, fetched)`` in one transaction; fetched < ``batch``: nothing left to thin."""
    db._begin()
    try:
        got = db._x(
            f"SELECT id, device, {_ep('time', db.dialect)}, state, update_at FROM status_history "
            f"WHERE thinned = 0 AND time < {_t(db)} ORDER BY time, id LIMIT ?",
            (before, batch),
        ).fetchall()
        found = [
            Row(int(i), str(dv), float(t), str(s), None if u is None else float(u)) for i, dv, t, s, u in got
        ]
        drop, keep = thin(found, bucket_s, complete=len(found) < batch)
        for part, sql in (
            (drop, "DELETE FROM status_history WHERE id IN ({})"),
            (keep, "UPDATE status_history SET thinned = 1 WHERE id IN ({})"),
        ):
            for i in range(0, len(part), 500):
                chunk = part[i : i + 500]
                db._x(sql.format(", ".join("?" for _ in chunk)), chunk)
        db.conn.execute("COMMIT")
    except BaseException:
        db._rollback()
        raise
    return len(drop), len(found)


# ---- fleet-wide reads -------------------------------------------------------------------------
def gap_rows_all(db: CollectorDb) -> list[tuple[str, int, int, Optional[int], int]]:
    """``(device, first, last, boot_before, boot_after)`` of every device's gaps."""
    got = db._x(
        "SELECT device, first_seq, last_seq, boot_before, boot_after FROM gaps ORDER BY device, first_seq"
    ).fetchall()
    return [(str(v), int(a), int(b), None if c is None else int(c), int(e)) for v, a, b, c, e in got]


def counters_all(db: CollectorDb) -> dict[str, dict[str, int]]:
    got = db._x(f"SELECT device, {', '.join(LOSS_COUNTERS)} FROM devices").fetchall()
    return {str(r[0]): {k: int(v or 0) for k, v in zip(LOSS_COUNTERS, r[1:])} for r in got}


def metric_rows(db: CollectorDb, limit: int) -> tuple[list[dict[str, Any]], int]:
    """What the per-device metrics need, for at most ``limit`` devices (by id), and how many
    devices there are. Gaps come from the ``confirmed`` islands (a few rows per device): the
    ``gaps`` view scans every message and would cost a full table scan per scrape."""
    d = db.dialect
    total = int(db._x("SELECT COUNT(*) FROM devices").fetchone()[0])
    got = db._x(
        f"SELECT device, state, {_ep('last_seen', d)}, crashes, conflicts, status FROM devices "
        "ORDER BY device LIMIT ?",
        (limit,),
    ).fetchall()
    islands = db._x(
        "SELECT device, COUNT(*), COALESCE(SUM(lo - prev - 1), 0) FROM (SELECT device, lo, "
        "COALESCE(LAG(hi) OVER (PARTITION BY device ORDER BY lo), 0) AS prev FROM confirmed) AS c "
        "WHERE lo > prev + 1 GROUP BY device"
    ).fetchall()
    gaps = {str(v): (int(n), int(m)) for v, n, m in islands}
    out = []
    for dev, state, seen, crashes, conflicts, status in got:
        body = status if isinstance(status, dict) else (json.loads(status) if status else {})
        h = health(body) if isinstance(body, dict) and body else None  # None: no status yet
        n, missing = gaps.get(str(dev), (0, 0))
        out.append(
            {
                "device": str(dev),
                "state": state,
                "last_seen": seen,
                "crashes": crashes,
                "conflicts": int(conflicts or 0),
                "gaps": n,
                "missing": missing,
                "health": h,
            }
        )
    return out, total
