"""Which status of a device wins its ``devices`` row (SQLite and PostgreSQL), in the store's
transaction (not by the device's clock: see :func:`upsert_status`), and what the fleet views read
back of those rows (:func:`device_rows`), the stored status's ``cameras`` map included."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from edge_agent.core.messages.fleet import LOSS_COUNTERS, DeviceStatus

if TYPE_CHECKING:
    from edge_agent.adapters.collector.db import CollectorDb


# jumps of the order a device cannot make: a forged (boot 2^31, ...) would pin a row as a forged
# ts of 9e10 did. Measured rates: a boot per start, a link per reconnect, a status per
# status_interval_s (>= 1 s: 3e7 a year)
BOOT_JUMP = 1000
LINK_JUMP = 1_000_000
STATUS_SEQ_JUMP = 1_000_000_000


def plausible(db: CollectorDb, s: DeviceStatus) -> DeviceStatus:
    """``s``, or ``s`` without its order when that jumps implausibly far past the stored one (it is
    then ordered by its clamped ts, like an old agent's, and cannot pin the row: the next real
    status has an order again and wins by ts over the order-less row)."""
    if s.order is None:
        return s
    row = db._x(
        "SELECT status_boot, status_link, status_seq FROM devices WHERE device = ? AND status_seq IS NOT NULL",
        (s.device,),
    ).fetchone()
    if row is None:
        return s
    boot, link, seq = (int(v) for v in row)
    b, k, _, q = s.order
    if b > boot + BOOT_JUMP or (
        b == boot and (k > link + LINK_JUMP or (k == link and q > seq + STATUS_SEQ_JUMP))
    ):
        return s._replace(order=None)
    return s


def upsert_status(db: CollectorDb, s: DeviceStatus, received: float) -> None:
    """The newest status wins. With the agent's ``(boot, link, offline, status_seq)`` (core.fleet
    status_order): by that tuple, so neither a forged ts nor a clock stepped back decides; the
    last will of a connection (made at its CONNECT, offline = 1) beats every status sent on that
    connection and loses to the next connection's. An old agent's status (or a stored row of
    one) without it: by ``ts`` (clamped to the receive time), an offline one by ``max(ts,
    receive time)``: a last will carries the snapshot of its connect, older than the statuses
    sent after it, and a redelivered old status (collector restart, another group member) must
    not win over it."""
    s = plausible(db, s)
    cols = ["state", "status_time", "status_order", "last_seen", "version", "model_version", "backlog"]
    cols += [
        *LOSS_COUNTERS,
        "disk_full",
        "status",
        "status_boot",
        "status_link",
        "status_rank",
        "status_seq",
    ]
    order = max(s.ts, received) if s.state == "offline" else s.ts
    vals: list[Any] = [s.state, s.ts, order, received, s.version, s.model_version, s.backlog]
    vals += [s.counters.get(k, 0) for k in LOSS_COUNTERS]
    vals += [int(s.disk_full) if db.dialect == "sqlite" else s.disk_full, s.body]
    vals += list(s.order) if s.order is not None else [None] * 4
    tup = "(excluded.status_boot, excluded.status_link, excluded.status_rank, excluded.status_seq) >= "
    tup += "(devices.status_boot, devices.status_link, devices.status_rank, devices.status_seq)"
    both = "excluded.status_seq IS NOT NULL AND devices.status_seq IS NOT NULL"
    if db.dialect == "sqlite":
        marks = ", ".join("?" for _ in cols)
        by_ts = "excluded.status_order >= COALESCE(devices.status_order, 0)"
    else:
        times = {"status_time", "status_order", "last_seen"}
        marks = ", ".join(
            "to_timestamp(%s)" if c in times else ("%s::jsonb" if c == "status" else "%s") for c in cols
        )
        by_ts = "devices.status_order IS NULL OR excluded.status_order >= devices.status_order"
    newer = f"CASE WHEN {both} THEN {tup} ELSE ({by_ts}) END"
    # the highest outbox seq the device reported is kept whichever status wins (seq plausibility)
    great0 = "max" if db.dialect == "sqlite" else "GREATEST"
    db._x(
        f"INSERT INTO devices (device, reported_seq) VALUES (?, ?) ON CONFLICT (device) DO UPDATE SET "
        f"reported_seq = {great0}(COALESCE(devices.reported_seq, 0), excluded.reported_seq)",
        (s.device, s.seq),
    )
    sets = ", ".join(f"{c} = excluded.{c}" for c in cols if c != "last_seen")
    great = "max" if db.dialect == "sqlite" else "GREATEST"
    sql = (
        f"INSERT INTO devices (device, {', '.join(cols)}) VALUES ({'?' if db.dialect == 'sqlite' else '%s'}, {marks}) "
        f"ON CONFLICT (device) DO UPDATE SET {sets}, "
        f"last_seen = {great}(COALESCE(devices.last_seen, excluded.last_seen), excluded.last_seen) WHERE {newer}"
    )
    db.conn.execute(sql, [s.device, *vals])


def _ep(col: str, dialect: str) -> str:
    return col if dialect == "sqlite" else f"EXTRACT(EPOCH FROM {col})::float8"


def _cameras(value: object) -> object:
    """The stored status's ``cameras`` (SQLite: JSON text; PostgreSQL: decoded), None without."""
    if isinstance(value, (str, bytes)):
        try:
            return json.loads(value)
        except ValueError:
            return None
    return value


def device_rows(db: CollectorDb) -> list[dict[str, Any]]:
    """Every device row with its message count, gaps, conflicts and, when its last status has a
    ``cameras`` map ([[cameras]]), that map as stored (the view bounds it: core.messages.cameras)."""
    d = db.dialect
    # the map only when it is an object (a string holding JSON is not one)
    if d == "sqlite":
        cams = "CASE json_type(status, '$.cameras') WHEN 'object' THEN json_extract(status, '$.cameras') END"
    else:
        cams = "CASE jsonb_typeof(status->'cameras') WHEN 'object' THEN status->'cameras' END"
    rows = db._x(
        f"SELECT device, state, {_ep('last_seen', d)}, {_ep('status_time', d)}, version, model_version, backlog, "
        f"{', '.join(LOSS_COUNTERS)}, conflicts, {cams} FROM devices ORDER BY device"
    ).fetchall()
    gaps = {
        dev: (n, missing)
        for dev, n, missing in db._x(
            "SELECT device, COUNT(*), SUM(last_seq - first_seq + 1) FROM gaps GROUP BY device"
        ).fetchall()
    }
    counts = dict(db._x("SELECT device, COUNT(*) FROM messages GROUP BY device").fetchall())
    out = []
    n_loss = len(LOSS_COUNTERS)
    for row in rows:
        dev = row[0]
        n, missing = gaps.get(dev, (0, 0))
        item = {
            "device": dev,
            "state": row[1],
            "last_seen": row[2],
            "status_time": row[3],
            "version": row[4],
            "model_version": row[5],
            "backlog": row[6],
            "counters": {k: row[7 + i] for i, k in enumerate(LOSS_COUNTERS)},
            "messages": int(counts.get(dev, 0)),
            "gaps": int(n),
            "missing": int(missing or 0),
            "conflicts": int(row[7 + n_loss] or 0),
        }
        cameras = _cameras(row[8 + n_loss])
        if isinstance(cameras, dict):  # only a device that reports cameras gets the key
            item["cameras"] = cameras
        out.append(item)
    return out
