"""A round whose transaction fails is never acknowledged (SQLite and a real PostgreSQL).

The collector's writer (``Collector._round``) is driven directly with received messages; its
subscriber's ``ack`` is replaced by a recorder (the only thing replaced: the database is real).
A trigger makes the ``devices`` upsert fail AFTER the round's ``messages`` insert ran in the same
transaction, so a rollback that did not happen, or an ack sent on the error path, both show. The
failure is one the driver calls operational (the database, not the data: SQLite's
OperationalError, PostgreSQL's class 57 "cannot connect now"): those are retried without end. A
failure about the data is retried message by message and dead-lettered: acknowledged, kept in
``dead_letters``, counted; never a crash loop (the last test here).
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
from edge_agent.core.messages.fleet import Record

pytestmark = pytest.mark.slow
TRIGGER = {
    "sqlite": [
        # a trigger calling a function that does not exist: OperationalError at every insert
        "CREATE TRIGGER boom BEFORE INSERT ON devices BEGIN SELECT edge_test_no_such_function(); END"
    ],
    "postgresql": [
        "CREATE FUNCTION boom() RETURNS trigger LANGUAGE plpgsql AS "
        "$$ BEGIN RAISE EXCEPTION 'boom (test trigger)' USING ERRCODE = '57P03'; END $$",
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

    def __init__(
        self,
        url: str,
        batch: list[Inbound],
        trigger: Optional[dict[str, list[str]]] = None,
        **settings: object,
    ) -> None:
        super().__init__()
        self.url, self.batch = url, batch
        self.trigger = trigger or TRIGGER
        self.settings = settings
        self.stop = threading.Event()
        self.ready = threading.Event()
        self.acked: list[Inbound] = []
        self.col: Optional[Collector] = None

    def record(self, msgs: list[Inbound]) -> int:
        self.acked.extend(msgs)
        return len(msgs)

    def run(self) -> None:
        cfg = parse_collector_config(
            "", "flags", {"db": self.url, "broker": "mqtt://127.0.0.1:1", "client_id": "t", **self.settings}
        )
        col = Collector(cfg, None, None)  # the subscriber is built, never connected
        col.db.migrate()
        col.sub.ack = self.record  # type: ignore[method-assign]
        self.col = col
        sql(self.url, self.trigger[col.db.dialect])
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


# fails only for the device "poison": its rows are refused, the others' are stored
DATA_TRIGGER = {
    "sqlite": [
        "CREATE TRIGGER boom BEFORE INSERT ON devices WHEN NEW.device = 'poison' "
        "BEGIN SELECT RAISE(ABORT, 'boom (test trigger)'); END"
    ],
    "postgresql": [
        "CREATE FUNCTION boom() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        "IF NEW.device = 'poison' THEN RAISE EXCEPTION 'boom (test trigger)'; END IF; RETURN NEW; END $$",
        "CREATE TRIGGER boom BEFORE INSERT OR UPDATE ON devices FOR EACH ROW EXECUTE FUNCTION boom()",
    ],
}


def poison(seq: int) -> Inbound:
    body = {"id": f"p{seq}", "seq": seq, "boot": 1, "device_id": "poison", "ts": 1796000000.0}
    return Inbound("edge/poison/detections", json.dumps(body).encode(), 100 + seq, 1, 1)


@pytest.mark.parametrize("deliveries", [1, 3])
def test_a_message_the_database_refuses_is_dead_lettered_after_n_tries_and_the_rest_stored(
    url: str, deliveries: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    batch = [inbound(1), poison(1), inbound(2)]
    w = Writer(url, batch, DATA_TRIGGER, deliveries_max=deliveries)
    tries: list[int] = []
    real = CollectorDb.store

    def counting(self: CollectorDb, records: list[Record], *a: object, **k: object) -> int:
        if any(r.device == "poison" for r in records):
            tries.append(1)
        return real(self, records, *a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(CollectorDb, "store", counting)
    w.start()
    w.join(60)
    assert not w.is_alive() and w.col is not None
    col = w.col
    assert w.acked == batch  # all acked: two stored, one dead-lettered
    assert rows(url) == 2
    # the whole round once, then the poison alone `deliveries` times
    assert len(tries) == 1 + deliveries
    assert (col.metrics.dead_letters, col.metrics.round_failures, col.metrics.records) == (1, 1, 2)
    db = CollectorDb(url)
    try:
        (topic, reason, payload, count), *more = db._x(
            "SELECT topic, reason, payload, count FROM dead_letters"
        ).fetchall()
    finally:
        db.close()
    assert more == [] and topic == "edge/poison/detections" and count == 1
    assert "boom (test trigger)" in reason and payload == poison(1).payload.decode()
