"""Fixtures of the collector tests: a throw-away PostgreSQL cluster (skips with the reason when
PostgreSQL or psycopg is absent) next to the shared mosquitto fixture, and ``url``: each test
once on a fresh SQLite file and once on an emptied PostgreSQL database.

``EDGE_AGENT_TEST_PG_URL`` (set by .ci/with_pg.py): ``url``'s PostgreSQL is that running server
instead of a cluster of the test module's own. A mutation run starts pytest once per mutant, and
each started a cluster per test module: 4-7 s of ``initdb`` + ``pg_ctl start`` each at load 0.3.
One test at a time only (``--jobs 1``): every test empties the server's public schema."""

from __future__ import annotations

import os
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
    shared = os.environ.get("EDGE_AGENT_TEST_PG_URL")
    pg_url = shared if shared else request.getfixturevalue("postgres").url
    db = CollectorDb(pg_url)
    db.conn.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public")
    db.close()
    yield pg_url
