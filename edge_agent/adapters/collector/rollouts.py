"""Staged rollouts in the collector's database (tables ``rollouts`` and ``rollout_verdicts``,
migration 0004): the rollout's state and every device verdict, SQLite and PostgreSQL.

In the database rather than a state file on the operator's machine: the verdicts belong next
to the fleet's other history (``fleet history``, Grafana), any operator machine can resume or
inspect a rollout, and the state survives the process that started it. Each write is its own
statement (the connections autocommit); a verdict is written once (``ON CONFLICT DO NOTHING``
on rollout, device, verdict), so a resumed watcher that sees the same retained status again
changes nothing.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional, Protocol, cast

from edge_agent.adapters.collector.migrations import DbError

if TYPE_CHECKING:
    from edge_agent.adapters.collector.db import CollectorDb

_COLS = (
    "id, {created}, {updated}, package, package_sha256, name, version, vid, grp, canary, "
    "halt_after, wave, stages, state, stage, pushed, reason"
)


@dataclass
class Rollout:
    id: str
    created: float
    updated: float
    package: str  # the path it was started with
    package_sha256: str
    name: str
    version: str
    vid: str  # the version id devices report as model_update.current.id
    group: str
    canary: str  # as given: "1", "10%"
    halt_after: int
    wave: int
    stages: list[list[str]]  # stage 0 = the canaries
    state: str  # running, halted, done
    stage: int
    pushed: int  # highest stage whose push the broker acknowledged; -1 none
    reason: Optional[str] = None

    def transfer_id(self, stage: int) -> str:
        """One transfer per stage, fixed by the rollout: a resumed push re-sends under it and
        the devices skip the chunks they already have."""
        return f"{self.id}-s{stage}"

    def stage_of(self, device: str) -> Optional[int]:
        return next((i for i, s in enumerate(self.stages) if device in s), None)

    def to_json(self) -> dict[str, Any]:
        return {**self.__dict__}


@dataclass(frozen=True)
class VerdictRow:
    rollout: str
    device: str
    stage: int
    transfer_id: str
    verdict: str
    detail: str
    at: float

    def to_json(self) -> dict[str, Any]:
        return {**self.__dict__}


def _ts(db: CollectorDb) -> str:
    return "?" if db.dialect == "sqlite" else "to_timestamp(?)"


def _ep(db: CollectorDb, col: str) -> str:
    return col if db.dialect == "sqlite" else f"EXTRACT(EPOCH FROM {col})::float8"


class _Cursor(Protocol):
    """What a sqlite3 and a psycopg cursor both offer, as used here."""

    rowcount: int

    def fetchone(self) -> Optional[tuple[Any, ...]]: ...

    def fetchall(self) -> list[tuple[Any, ...]]: ...


def _x(db: CollectorDb, sql: str, params: tuple[Any, ...] = ()) -> _Cursor:
    """One statement; a database without the rollout tables is one line saying what to do."""
    try:
        return cast("_Cursor", db._x(sql, params))
    except db.errors() as exc:
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if "rollout" in text and ("no such table" in text or "does not exist" in text):
            raise DbError(
                f"{db.url.split('@')[-1]}: no rollout tables (schema {db.schema_version()}): start "
                "this version's `edge-agent collect` on it once (it migrates the schema)"
            ) from None
        raise DbError(f"rollout tables: {text}") from None


def create(db: CollectorDb, r: Rollout) -> None:
    ph = ", ".join(["?", _ts(db), _ts(db), *["?"] * 14])  # created, updated: timestamps
    _x(
        db,
        f"INSERT INTO rollouts ({_COLS.format(created='created', updated='updated')}) VALUES ({ph})",
        (
            r.id,
            r.created,
            r.updated,
            r.package,
            r.package_sha256,
            r.name,
            r.version,
            r.vid,
            r.group,
            r.canary,
            r.halt_after,
            r.wave,
            json.dumps(r.stages),
            r.state,
            r.stage,
            r.pushed,
            r.reason,
        ),
    )


def _row(row: tuple[Any, ...]) -> Rollout:
    return Rollout(
        id=str(row[0]),
        created=float(row[1]),
        updated=float(row[2]),
        package=str(row[3]),
        package_sha256=str(row[4]),
        name=str(row[5]),
        version=str(row[6]),
        vid=str(row[7]),
        group=str(row[8]),
        canary=str(row[9]),
        halt_after=int(row[10]),
        wave=int(row[11]),
        stages=[[str(d) for d in s] for s in json.loads(row[12])],
        state=str(row[13]),
        stage=int(row[14]),
        pushed=int(row[15]),
        reason=None if row[16] is None else str(row[16]),
    )


def _select(db: CollectorDb) -> str:
    return "SELECT " + _COLS.format(created=_ep(db, "created"), updated=_ep(db, "updated")) + " FROM rollouts"


def get(db: CollectorDb, rollout_id: str) -> Optional[Rollout]:
    row = _x(db, _select(db) + " WHERE id = ?", (rollout_id,)).fetchone()
    return None if row is None else _row(row)


def listing(db: CollectorDb, limit: int = 50) -> list[Rollout]:
    """The newest rollouts first."""
    rows = _x(db, _select(db) + " ORDER BY created DESC, id LIMIT ?", (limit,)).fetchall()
    return [_row(r) for r in rows]


def update(db: CollectorDb, r: Rollout) -> None:
    """Store ``r``'s state, stage, pushed stage and reason (the rest never changes)."""
    r.updated = time.time()
    _x(
        db,
        f"UPDATE rollouts SET state = ?, stage = ?, pushed = ?, reason = ?, updated = {_ts(db)} WHERE id = ?",
        (r.state, r.stage, r.pushed, r.reason, r.updated, r.id),
    )


def add_verdict(db: CollectorDb, v: VerdictRow) -> bool:
    """True when the row is new (the first time this device gave this verdict)."""
    cur = _x(
        db,
        "INSERT INTO rollout_verdicts (rollout, device, stage, transfer_id, verdict, detail, at) "
        f"VALUES (?, ?, ?, ?, ?, ?, {_ts(db)}) ON CONFLICT DO NOTHING",
        (v.rollout, v.device, v.stage, v.transfer_id, v.verdict, v.detail[:2000], v.at),
    )
    return int(cur.rowcount) > 0


def _verdicts(db: CollectorDb, where: str, params: tuple[Any, ...]) -> list[VerdictRow]:
    rows = _x(
        db,
        f"SELECT rollout, device, stage, transfer_id, verdict, detail, {_ep(db, 'at')} "
        f"FROM rollout_verdicts WHERE {where} ORDER BY at, device, verdict",
        params,
    ).fetchall()
    return [
        VerdictRow(str(a), str(b), int(c), str(d), str(e), str(f), float(g)) for a, b, c, d, e, f, g in rows
    ]


def verdicts(db: CollectorDb, rollout_id: str) -> list[VerdictRow]:
    """Every verdict of one rollout, oldest first."""
    return _verdicts(db, "rollout = ?", (rollout_id,))


def device_verdicts(db: CollectorDb, device: str, since: float = 0.0) -> list[VerdictRow]:
    """Every rollout verdict of ``device`` at or after ``since`` (unix time), oldest first: the
    rows ``fleet history DEVICE`` merges with the device's statuses."""
    return _verdicts(db, f"device = ? AND at >= {_ts(db)}", (device, since))
