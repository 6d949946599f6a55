"""A round whose transaction fails is never acknowledged (SQLite and a real PostgreSQL).

The collector's writer (``Collector._round``) is driven directly with received messages; its
subscriber's ``ack`` is replaced by a recorder (the only thing replaced: the database is real).
A trigger makes the ``devices`` upsert fail AFTER the round's ``messages`` insert ran in the same
transaction, so a rollback that did not happen, or an ack sent on the error path, both show.
"""

from __future__ import annotations

import json
import threading
from typing import Optional

import pytest
from support import wait_until

from edge_agent.adapters.collector.db import CollectorDb
from edge_agent.adapters.collector.subscriber import Inbound
from edge_agent.app.collector.loop import Collector
from edge_agent.core.config.collector import parse_collector_config

pytestmark = pytest.mark.slow
TRIGGER = {
    "sqlite": [
        "CREATE TRIGGER boom BEFORE INSERT ON devices BEGIN SELECT RAISE(ABORT, 'boom (test trigger)'); END"
    ],
    "postgresql": [
        "CREATE FUNCTION boom() RETURNS trigger LANGUAGE plpgsql AS "
        "$$ BEGIN RAISE EXCEPTION 'boom (test trigger)'; END $$",
        "CREATE TRIGGER boom BEFORE INSERT OR UPDATE ON devices FOR EACH ROW EXECUTE FUNCTION boom()",
    ],
}


def inbound(seq: int) -> Inbound:
    body = {"id": f"r{seq}", "seq": seq, "boot": 1, "device_id": "cam-1", "ts": 1796000000.0 + seq}
    return Inbound("edge/cam-1/detections", json.dumps(body).encode(), seq, 1, 1)


def rows(url: str) -> int:
    db = CollectorDb(url)
    try:
        return int(db._x("SELECT COUNT(*) FROM messages").fetchone()[0])
    finally:
        db.close()


def sql(url: str, statements: list[str]) -> None:
    db = CollectorDb(url)
    try:
        for s in statements:
            db.conn.execute(s)
    finally:
        db.close()


class Writer(threading.Thread):
    """The collector built and driven on one thread (an SQLite connection stays on its thread)."""

    def __init__(self, url: str, batch: list[Inbound]) -> None:
        super().__init__()
        self.url, self.batch = url, batch
        self.stop = threading.Event()
        self.ready = threading.Event()
        self.acked: list[Inbound] = []
        self.col: Optional[Collector] = None

    def record(self, msgs: list[Inbound]) -> int:
        self.acked.extend(msgs)
        return len(msgs)

    def run(self) -> None:
        cfg = parse_collector_config(
            "", "flags", {"db": self.url, "broker": "mqtt://127.0.0.1:1", "client_id": "t"}
        )
        col = Collector(cfg, None, None)  # the subscriber is built, never connected
        col.db.migrate()
        col.sub.ack = self.record  # type: ignore[method-assign]
        self.col = col
        sql(self.url, TRIGGER[col.db.dialect])
        self.ready.set()
        try:
            col._round(self.batch, self.stop)
        finally:
            col.db.close()


def test_a_failed_transaction_is_not_acked_and_is_retried(url: str) -> None:
    batch = [inbound(s) for s in range(1, 6)]
    w = Writer(url, batch)
    w.start()
    try:
        assert w.ready.wait(30) and w.col is not None
        col = w.col
        wait_until(
            lambda: col.metrics.db_errors >= 2,
            30,
            lambda: "col.metrics.db_errors >= 2" + "; " + "the failing commit was not retried",
            every=0.2,
        )
        assert w.acked == [], "acknowledged after a failed transaction"
        assert rows(url) == 0, "the round's insert was not rolled back"
        sql(url, ["DROP TRIGGER boom" if col.db.dialect == "sqlite" else "DROP TRIGGER boom ON devices"])
        w.join(60)
        assert not w.is_alive()
        assert w.acked == batch and rows(url) == 5
        assert col.metrics.messages == 5 and col.metrics.records == 5
    finally:
        w.stop.set()
        w.join(60)


def test_a_stop_during_the_retry_leaves_the_round_unacked(url: str) -> None:
    w = Writer(url, [inbound(1), inbound(2)])
    w.start()
    try:
        assert w.ready.wait(30) and w.col is not None
        col = w.col
        wait_until(lambda: col.metrics.db_errors >= 1, 30, "col.metrics.db_errors >= 1", every=0.2)
        w.stop.set()
        w.join(30)
        assert not w.is_alive()
        assert w.acked == [] and rows(url) == 0 and col.metrics.messages == 0
    finally:
        w.stop.set()
        w.join(30)
