"""Fixtures of the collector tests: a throw-away PostgreSQL cluster (skips with the reason when
PostgreSQL or psycopg is absent) next to the shared mosquitto fixture."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.collector import Postgres, find_pg_bin


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
