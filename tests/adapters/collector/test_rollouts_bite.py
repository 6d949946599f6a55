"""The rollout tables' edges (adapters/collector/rollouts.py) that test_rollouts_db.py leaves
open: the listing's default bound, a PostgreSQL database without the tables named without the
credentials of its URL, a driver error without a message, and which stage a device is in."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from support.collector import Postgres, sqlite_url

from edge_agent.adapters.collector import rollouts
from edge_agent.adapters.collector.db import CollectorDb, DbError
from edge_agent.adapters.collector.rollouts import Rollout


def rollout(rid: str = "r0123456789", created: float = 1_764_000_000.0) -> Rollout:
    stages = [["cam-1"], ["cam-2", "cam-3", "cam-4"], ["cam-5"]]
    return Rollout(
        rid,
        created,
        created,
        "/p.pkg",
        "ab" * 32,
        "demo",
        "2.0",
        "v",
        "g",
        "1",
        1,
        3,
        stages,
        "running",
        0,
        -1,
    )


def test_the_listing_shows_the_50_newest_rollouts_by_default(url: str) -> None:
    db = CollectorDb(url)
    db.migrate()
    try:
        for n in range(51):
            rollouts.create(db, rollout(f"r{n:02d}", created=1_764_000_000.0 + n))
        ids = [r.id for r in rollouts.listing(db)]
        assert ids == [f"r{n:02d}" for n in range(50, 0, -1)]  # r00, the oldest, left out
        assert [r.id for r in rollouts.listing(db, limit=2)] == ["r50", "r49"]
    finally:
        db.close()


def test_a_postgresql_database_without_the_rollout_tables_says_to_migrate(postgres: Postgres) -> None:
    """The line names the server and database, never the user and password of the URL."""
    url = postgres.url.replace("postgres@", "postgres:s3cret@")  # trust auth ignores the password
    db = CollectorDb(url)
    try:
        db.conn.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public")
        db._x("CREATE TABLE schema_version (version INTEGER PRIMARY KEY, name TEXT NOT NULL)")
        db._x("INSERT INTO schema_version VALUES (3, '0003_confirm.sql')")
        with pytest.raises(DbError) as err:
            rollouts.listing(db)
        line = str(err.value)
        assert line.startswith(f"127.0.0.1:{postgres.port}/postgres: no rollout tables (schema 3): start")
        assert "s3cret" not in line and "\n" not in line
    finally:
        db.close()


def test_a_device_is_in_the_stage_that_lists_it() -> None:
    r = rollout()  # stages: [cam-1], [cam-2, cam-3, cam-4], [cam-5]
    assert [r.stage_of(d) for d in ("cam-1", "cam-2", "cam-4", "cam-5")] == [0, 1, 1, 2]
    assert r.stage_of("cam-9") is None and r.stage_of("cam") is None
    assert r.transfer_id(2) == "r0123456789-s2"


@pytest.mark.parametrize("message", ["", "  \n "])
def test_a_driver_error_without_a_message_is_named_by_its_type(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, message: str
) -> None:
    """Some driver errors carry no text (a dropped connection can): the line then names the
    error's class, never an IndexError from the empty text."""
    db = CollectorDb(sqlite_url(tmp_path / "fleet.db"))
    db.migrate()

    def fails(*_: object) -> object:
        raise sqlite3.OperationalError(message)

    monkeypatch.setattr(db, "_x", fails)
    try:
        with pytest.raises(DbError) as err:
            rollouts.get(db, "r0123456789")
        assert str(err.value) == "rollout tables: OperationalError"
    finally:
        db.close()
