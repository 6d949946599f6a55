"""The rollout tables (migration 0004, adapters/collector/rollouts.py) on a fresh SQLite file and
a real PostgreSQL: a rollout round-trips, a verdict is stored once, the per-device query that
``fleet history`` merges, and a database without the tables is one line saying what to do."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import pytest
from support.collector import sqlite_url

from edge_agent.adapters.collector import rollouts
from edge_agent.adapters.collector.db import CollectorDb, DbError
from edge_agent.adapters.collector.rollouts import Rollout, VerdictRow


def rollout(rid: str = "r0123456789", created: float = 1_764_000_000.5) -> Rollout:
    return Rollout(
        id=rid,
        created=created,
        updated=created,
        package="/srv/pkgs/demo-2.0.pkg",
        package_sha256="ab" * 32,
        name="demo",
        version="2.0",
        vid="demo-2.0-abcdef12",
        group="fleet-a",
        canary="20%",
        halt_after=2,
        wave=3,
        stages=[["cam-1"], ["cam-2", "cam-3", "cam-4"], ["cam-5"]],
        state="running",
        stage=0,
        pushed=-1,
    )


def test_a_rollout_round_trips_and_its_state_moves(url: str) -> None:
    db = CollectorDb(url)
    db.migrate()
    try:
        r = rollout()
        rollouts.create(db, r)
        assert rollouts.get(db, r.id) == r
        assert rollouts.get(db, "r-nothing") is None
        r.state, r.stage, r.pushed, r.reason = "halted", 1, 1, "2 failed (--halt-after 2): cam-2 refused"
        before = time.time()
        rollouts.update(db, r)
        got = rollouts.get(db, r.id)
        assert got is not None and got.state == "halted" and got.stage == 1 and got.pushed == 1
        assert got.reason == r.reason and got.updated >= before - 1 and abs(got.created - r.created) < 1e-3
        newer = rollout("r-newer", created=r.created + 10)
        rollouts.create(db, newer)
        assert [x.id for x in rollouts.listing(db)] == ["r-newer", r.id]  # newest first
        with pytest.raises(DbError, match="rollout tables: "):  # the same id twice
            rollouts.create(db, newer)
    finally:
        db.close()


def test_a_verdict_is_stored_once_and_queried_per_device(url: str) -> None:
    db = CollectorDb(url)
    db.migrate()
    try:
        rollouts.create(db, rollout())
        t = 1_764_000_100.0
        rows = [
            VerdictRow("r0123456789", "cam-1", 0, "r0123456789-s0", "switched", "gate passed", t),
            VerdictRow("r0123456789", "cam-1", 0, "r0123456789-s0", "passed", "trial over", t + 5),
            VerdictRow("r0123456789", "cam-2", 1, "r0123456789-s1", "refused", "x" * 5000, t + 9),
        ]
        assert [rollouts.add_verdict(db, v) for v in rows] == [True, True, True]
        # the same verdict seen again (a resumed watcher, the retained status) changes nothing
        assert rollouts.add_verdict(db, replace(rows[1], at=t + 60, detail="again")) is False
        got = rollouts.verdicts(db, "r0123456789")
        assert [(v.device, v.verdict) for v in got] == [
            ("cam-1", "switched"),
            ("cam-1", "passed"),
            ("cam-2", "refused"),
        ]
        assert got[1] == rows[1] and len(got[2].detail) == 2000  # bounded
        assert [v.verdict for v in rollouts.device_verdicts(db, "cam-1")] == ["switched", "passed"]
        assert [v.verdict for v in rollouts.device_verdicts(db, "cam-1", since=t + 1)] == ["passed"]
        assert rollouts.device_verdicts(db, "cam-9") == []
    finally:
        db.close()


def test_a_database_without_the_rollout_tables_says_to_migrate(tmp_path: Path) -> None:
    db = CollectorDb(sqlite_url(tmp_path / "old.db"))
    db._x("CREATE TABLE schema_version (version INTEGER PRIMARY KEY, name TEXT NOT NULL)")
    db._x("INSERT INTO schema_version VALUES (3, '0003_confirm.sql')")
    try:
        with pytest.raises(
            DbError, match=r"no rollout tables \(schema 3\): start this version's `edge-agent collect`"
        ):
            rollouts.listing(db)
    finally:
        db.close()
