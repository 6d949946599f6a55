"""Fixtures of the collector tests: a throw-away PostgreSQL cluster (skips with the reason when
PostgreSQL or psycopg is absent) next to the shared mosquitto fixture, and ``url``: each test
once on a fresh SQLite file and once on an emptied PostgreSQL database."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from edge_agent.adapters.collector.db import CollectorDb
from support.collector import Postgres, find_pg_bin, sqlite_url


@pytest.fixture(scope="module")
def postgres() -> Iterator[Postgres]:
    if find_pg_bin() is None:
        pytest.skip("PostgreSQL not installed (initdb/pg_ctl: Debian package 'postgresql'); CI installs it")
    pytest.importorskip("psycopg", reason="psycopg 3 absent: pip install 'onnx-edge-agent[collector]'")
    pg = Postgres()
    pg.start()
    try:
        yield pg
    finally:
        pg.cleanup()


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield sqlite_url(tmp_path / "fleet.db")
        return
    pg: Postgres = request.getfixturevalue("postgres")
    db = CollectorDb(pg.url)
    db.conn.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public")
    db.close()
    yield pg.url
