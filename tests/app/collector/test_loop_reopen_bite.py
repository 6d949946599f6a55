"""The collector on a PostgreSQL server with password authentication (app/collector/loop.py,
issue 36's mutation run): the password reaches the connection and every reconnection, a
connection the server dropped is reopened and the round stored, and a failed reconnection is
one line, retried at the next try. One cluster of the module's own (its password is the point)."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator

import pytest
from support.collector import Postgres, Stop, find_pg_bin

from edge_agent.adapters.collector.db import CollectorDb, DbError
from edge_agent.adapters.collector.subscriber import Inbound
from edge_agent.app.collector.loop import Collector
from edge_agent.core.config.collector import CollectorConfig

pytestmark = pytest.mark.slow
PASSWORD = "loop-Pw-4e2"


@pytest.fixture(scope="module")
def pg() -> Iterator[Postgres]:
    if find_pg_bin() is None:
        pytest.skip("PostgreSQL not installed (initdb/pg_ctl: Debian package 'postgresql'); CI installs it")
    pytest.importorskip("psycopg", reason="psycopg 3 absent: pip install 'onnx-edge-agent[collector]'")
    server = Postgres(password=PASSWORD)
    server.start()
    try:
        yield server
    finally:
        server.cleanup()


@pytest.fixture
def col(pg: Postgres) -> Iterator[tuple[Collector, list[list[int]]]]:
    db = CollectorDb(pg.url, PASSWORD)
    db.conn.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public")
    db.close()
    c = Collector(CollectorConfig(db=pg.url), None, None, db_password=PASSWORD)
    c.db.migrate()
    acked: list[list[int]] = []
    c.sub.ack = lambda msgs: acked.append([m.mid for m in msgs]) or len(msgs)  # type: ignore[method-assign,func-returns-value]
    yield c, acked
    c.db.close()


def inbound(seq: int) -> Inbound:
    body = {"id": f"r{seq}", "seq": seq, "boot": 1, "device_id": "cam-1", "ts": 1796000000.0 + seq}
    return Inbound("edge/cam-1/detections", json.dumps(body).encode(), seq, 1, 1)


def drop_connection(pg: Postgres, c: Collector) -> None:
    """The server ends the collector's session (a restart or failover looks the same to it)."""
    pid = c.db.conn.info.backend_pid
    admin = CollectorDb(pg.url, PASSWORD)
    try:
        admin.conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
    finally:
        admin.close()


def stored(pg: Postgres) -> int:
    db = CollectorDb(pg.url, PASSWORD)
    try:
        return int(db._x("SELECT COUNT(*) FROM messages").fetchone()[0])
    finally:
        db.close()


def test_a_connection_the_server_dropped_is_reopened_with_the_password(
    pg: Postgres, col: tuple[Collector, list[list[int]]]
) -> None:
    c, acked = col
    c._round([inbound(1)], threading.Event())
    drop_connection(pg, c)
    stop = Stop(stop_after=5)  # a collector that never reconnects would be stopped here, un-acked
    c._round([inbound(2)], stop)
    assert acked == [[1], [2]] and stored(pg) == 2
    assert len(stop.waits) == 1 and c.metrics.db_errors == 1


def test_a_failed_reconnection_is_one_line_and_the_next_try_reconnects(
    pg: Postgres, col: tuple[Collector, list[list[int]]], caplog: pytest.LogCaptureFixture
) -> None:
    c, acked = col
    caplog.set_level(logging.ERROR, "edge_agent.collector")
    real = c._open_db
    fails = [DbError("postgresql: cannot connect (test)")]

    def flaky() -> CollectorDb:
        if fails:
            raise fails.pop()
        return real()

    c._open_db = flaky  # type: ignore[method-assign]
    drop_connection(pg, c)
    stop = Stop(stop_after=6)
    c._round([inbound(1)], stop)
    assert acked == [[1]] and stored(pg) == 1
    lines = [r.getMessage() for r in caplog.records]
    assert "collector: reconnecting to the database failed: postgresql: cannot connect (test)" in lines
    assert len(stop.waits) == 2  # the failed reconnection, then the one that worked


def test_without_the_password_the_server_refuses_the_collector(pg: Postgres) -> None:
    with pytest.raises(DbError) as err:
        Collector(CollectorConfig(db=pg.url), None, None)
    assert "password" in str(err.value).lower()
