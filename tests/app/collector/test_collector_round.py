"""The collector's loop in process, without a broker (its Subscriber is made but never started):
what one round takes, when leaving is done, the figures Prometheus gets, and the one row order
that keeps two PostgreSQL writers from deadlocking."""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
from pathlib import Path
from typing import Callable, Optional

import pytest
from support.collector import Stop

from edge_agent.adapters.collector.subscriber import Inbound
from edge_agent.app.collector import loop as collector_mod
from edge_agent.app.collector.loop import RATE_WINDOW_S, Collector, Metrics
from edge_agent.core.config.collector import CollectorConfig
from edge_agent.core.messages.fleet import Record

NOW = 1796000000.0


def make(tmp_path: Path, leave_quiet_s: float | None = None, **cfg: object) -> Collector:
    c = CollectorConfig(db=f"sqlite:///{tmp_path / 'fleet.db'}", **cfg)  # type: ignore[arg-type]
    col = Collector(c, None, None, leave_quiet_s)
    col.db.migrate()
    return col


def inbound(seq: int, device: str = "cam-1", ts: float = NOW) -> Inbound:
    body = {"id": f"r{seq}", "seq": seq, "boot": 1, "device_id": device, "ts": ts}
    return Inbound(f"edge/{device}/detections", json.dumps(body).encode(), seq, 1, 1)


def test_a_round_takes_at_most_batch_max_and_leaves_the_rest_waiting(tmp_path: Path) -> None:
    col = make(tmp_path, batch_max=5)
    for seq in range(1, 13):
        col.sub.inbox.put(inbound(seq))
    assert [m.mid for m in col._take(0.1)] == [1, 2, 3, 4, 5]
    assert [m.mid for m in col._take(0.1)] == [6, 7, 8, 9, 10]
    assert [m.mid for m in col._take(0.1)] == [11, 12]  # never waits for a batch to fill
    assert col._take(0.05) == []
    col.db.close()


def test_leaving_is_not_done_while_a_message_waits_in_the_inbox(tmp_path: Path) -> None:
    col = make(tmp_path, leave_quiet_s=0.0)
    col.sub.unsubscribed.set()
    col.sub.unsubscribed_at = 0.0
    col.sub.inbox.put(inbound(1))
    assert not col._done_leaving(0.0)  # ending the session now would lose that message
    col.sub.inbox.get_nowait()
    assert col._done_leaving(0.0)
    col.sub.unsubscribed.clear()
    assert not col._done_leaving(0.0)  # the broker has not confirmed the UNSUBSCRIBE yet
    col.db.close()


def test_leaving_waits_for_its_quiet_time_after_the_last_round(tmp_path: Path) -> None:
    col = make(tmp_path, leave_quiet_s=60.0)
    col.sub.unsubscribed.set()
    col.sub.unsubscribed_at = 0.0
    assert not col._done_leaving(collector_mod.time.monotonic())
    assert col._done_leaving(collector_mod.time.monotonic() - 61)
    assert not make(tmp_path / "b")._done_leaving(0.0)  # not leaving at all: never done
    col.db.close()


def test_lag_is_measured_to_the_newest_record_of_the_round(tmp_path: Path) -> None:
    col = make(tmp_path)
    received = collector_mod.time.time()
    batch = [inbound(1, ts=received - 100), inbound(2, ts=received - 3), inbound(3, ts=received - 50)]
    col._round(batch, threading.Event())
    assert col.metrics.records == 3 and col.metrics.messages == 3
    assert 3.0 <= col.metrics.lag_s < 4.0
    col.db.close()


def test_the_ingest_rate_counts_only_the_last_window() -> None:
    m = Metrics()
    m.stored(100.0, 50)
    m.stored(100.0 + RATE_WINDOW_S - 1, 30)
    assert m.rate(100.0 + RATE_WINDOW_S - 1) == pytest.approx(80 / RATE_WINDOW_S)
    m.stored(100.0 + RATE_WINDOW_S + 5, 20)  # the first entry is now out of the window
    assert m.rate(100.0 + RATE_WINDOW_S + 5) == pytest.approx(50 / RATE_WINDOW_S)
    assert len(m._window) == 2  # and forgotten: the window does not grow without bound
    assert m.rate(100.0 + 10 * RATE_WINDOW_S) == 0.0


def test_online_devices_are_counted_at_most_every_few_seconds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    col = make(tmp_path)
    calls: list[int] = []
    real = col.db.online
    monkeypatch.setattr(col.db, "online", lambda: calls.append(1) or real())
    clock = [1000.0]
    monkeypatch.setattr(collector_mod.time, "monotonic", lambda: clock[0])
    col._refresh_online()
    col._refresh_online()  # the loop calls this every 0.2 s: one query per ONLINE_EVERY_S
    assert len(calls) == 1
    clock[0] += collector_mod.ONLINE_EVERY_S
    col._refresh_online()
    assert len(calls) == 2
    col.db.close()


def test_one_round_stores_rows_in_key_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two PostgreSQL writers locking rows in different orders deadlocked in the 200-device run:
    every round writes its records sorted by (device, boot, seq)."""
    col = make(tmp_path)
    seen: list[list[tuple[str, int, int]]] = []
    real = col.db._insert_records

    def spy(records: list[Record], received: float, staged: bool, idle: Optional[Callable[[], None]]) -> int:
        seen.append([(r.device, r.boot, r.seq) for r in records])
        return real(records, received, staged, idle)

    monkeypatch.setattr(col.db, "_insert_records", spy)
    batch = [inbound(5, "cam-b"), inbound(2, "cam-a"), inbound(9, "cam-a"), inbound(1, "cam-b")]
    col._round(batch, threading.Event())
    assert seen == [[("cam-a", 1, 2), ("cam-a", 1, 9), ("cam-b", 1, 1), ("cam-b", 1, 5)]]
    col.db.close()


def raw(topic: str, body: object, mid: int) -> Inbound:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return Inbound(topic, data, mid, 1, 1)


def acks(col: Collector) -> list[list[int]]:
    got: list[list[int]] = []
    col.sub.ack = lambda msgs: got.append([m.mid for m in msgs]) or len(msgs)  # type: ignore[method-assign]
    return got


def test_a_round_stores_every_kind_and_the_figures_add_up_over_rounds(tmp_path: Path) -> None:
    col = make(tmp_path)
    acked = acks(col)
    long_topic = "edge/" + "x" * 2000 + "/detections"
    first = [
        inbound(1),
        inbound(2),
        raw(
            "edge/cam-1/status",
            {"device_id": "cam-1", "state": "running", "ts": NOW, "queue": {"pending": 4}},
            3,
        ),
        raw("edge/cam-1/model_progress", {"step": "verify"}, 4),
        raw("edge/cam-1/detections", b"{not json", 5),
        raw(long_topic, {"seq": 1}, 6),
    ]
    col._round(first, threading.Event())
    assert acked == [[1, 2, 3, 4, 5, 6]]  # the rejected too: they would come back for ever
    m = col.metrics
    assert (m.taken, m.messages, m.records, m.duplicates, m.rejected, m.rounds) == (6, 6, 2, 0, 2, 1)
    col._round([inbound(2), inbound(1), inbound(3)], threading.Event())  # two redelivered, one new
    assert (m.taken, m.messages, m.records, m.duplicates, m.rejected, m.rounds) == (9, 9, 3, 2, 2, 2)
    (dev,) = col.db.devices()
    assert (dev["device"], dev["state"], dev["backlog"], dev["messages"]) == ("cam-1", "running", 4, 3)
    events = col.db._x("SELECT device, kind, body FROM events").fetchall()
    assert [(d, k, json.loads(b)) for d, k, b in events] == [("cam-1", "model_progress", {"step": "verify"})]
    rows = col.db._x("SELECT topic, reason, received FROM rejected ORDER BY id").fetchall()
    assert [r[0] for r in rows] == ["edge/cam-1/detections", long_topic[:1024]]
    assert rows[0][1].startswith("edge/cam-1/detections: not JSON")
    assert len(rows[1][1]) <= 1024 and abs(rows[0][2] - collector_mod.time.time()) < 60
    col.db.close()


def test_a_parser_bug_is_a_rejection_that_names_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    col = make(tmp_path)
    acked = acks(col)

    def broken(*a: object) -> None:
        raise KeyError("boom")

    monkeypatch.setattr(collector_mod, "parse", broken)
    col._round([inbound(1)], threading.Event())
    assert acked == [[1]] and col.metrics.rejected == 1
    ((reason,),) = col.db._x("SELECT reason FROM rejected").fetchall()
    assert reason == "unexpected KeyError: 'boom'"
    col.db.close()


class FlakyStore:
    """db.store failing ``n`` times with a real sqlite3 error, then the real one."""

    def __init__(self, col: Collector, n: int) -> None:
        self.real, self.left, self.calls = col.db.store, n, 0

    def __call__(self, *a: object, **kw: object) -> int:
        self.calls += 1
        if self.left > 0:
            self.left -= 1
            raise sqlite3.OperationalError("database is locked")
        return self.real(*a, **kw)  # type: ignore[arg-type]


def test_a_database_error_retries_with_backoff_and_acks_only_after_the_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    col = make(tmp_path)
    acked = acks(col)
    flaky = FlakyStore(col, 8)
    monkeypatch.setattr(col.db, "store", flaky)
    stop = Stop()
    col._round([inbound(1), inbound(2)], stop)
    assert stop.waits == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]  # doubling, capped at 30 s
    assert flaky.calls == 9 and col.metrics.db_errors == 8
    assert acked == [[1, 2]] and col.metrics.messages == 2 and col.metrics.records == 2


def test_a_stop_while_the_database_fails_leaves_the_round_unacknowledged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    col = make(tmp_path)
    acked = acks(col)
    monkeypatch.setattr(col.db, "store", FlakyStore(col, 100))
    col._round([inbound(1)], Stop(stop_after=2))
    assert acked == [] and col.metrics.messages == 0 and col.metrics.db_errors == 2
    assert col.metrics.taken == 1  # taken, not committed: the broker sends it again
    col.db.close()


def test_the_prometheus_figures_name_every_counter() -> None:
    m = Metrics()
    m.taken, m.messages, m.records, m.duplicates, m.rejected, m.db_errors = 7, 6, 5, 4, 3, 2
    m.lag_s, m.devices_online, m.ingest_delay_s, m.devices_known = 1.23456, 9, 0.5, 12
    now = collector_mod.time.monotonic()
    m.stored(now, 20)
    assert m.values(inbox=11, connected=True) == {
        "collector_taken_total": 7,
        "collector_messages_total": 6,
        "collector_records_total": 5,
        "collector_duplicates_dropped_total": 4,
        "collector_rejected_total": 3,
        "collector_db_errors_total": 2,
        "collector_conflicts_total": 0,
        "collector_dead_letters_total": 0,
        "collector_round_failures_total": 0,
        "collector_new_devices_refused_total": 0,
        "collector_ingest_rate_per_second": round(20 / RATE_WINDOW_S, 1),
        "collector_lag_seconds": 1.235,
        "collector_ingest_delay_seconds": 0.5,
        "collector_devices_known": 12,
        "collector_devices_exported": 0,
        "collector_devices_online": 9,
        "collector_confirms_total": 0,
        "collector_inbox": 11,
        "collector_inbox_bytes": 0,
        "collector_broker_connected": 1.0,
    }
    assert m.values(inbox=0, connected=False)["collector_broker_connected"] == 0.0


def test_mqtt_settings_carry_the_collectors_credentials_and_tls(tmp_path: Path) -> None:
    cfg = CollectorConfig(
        broker="mqtts://broker.example:9883",
        username="collector",
        password_file="pw",
        password_env="MY_PW",
        tls_ca="/etc/ca.pem",
        tls_cert="/etc/c.pem",
        tls_key="/etc/c.key",
    )
    m = collector_mod.mqtt_settings(cfg)
    assert (m.host, m.port, m.username, m.password_file, m.password_env) == (
        "broker.example",
        9883,
        "collector",
        "pw",
        "MY_PW",
    )
    assert (m.tls_ca, m.tls_cert, m.tls_key) == ("/etc/ca.pem", "/etc/c.pem", "/etc/c.key")


def test_the_collector_runs_against_a_real_broker_and_stops_cleanly(tmp_path: Path, broker: object) -> None:
    """``run`` in the calling thread (SQLite connections stay in their thread, as in ``collect``);
    a publisher thread sends six results and stops it once all six are stored."""
    import paho.mqtt.client as mqtt
    from support import poll

    port = broker.port  # type: ignore[attr-defined]
    col = Collector(
        CollectorConfig(
            db=f"sqlite:///{tmp_path / 'fleet.db'}",
            broker=f"mqtt://127.0.0.1:{port}",
            client_id="collector-inproc",
        ),
        None,
        None,
    )
    stop = threading.Event()
    outcome: list[str] = []

    def publisher() -> None:
        try:
            if not poll(lambda: "collector: subscribed" in caplog_text(), 15, 0.05):
                outcome.append("no SUBACK")
                return
            pub = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="pub-inproc")
            pub.connect("127.0.0.1", port)
            pub.loop_start()
            for seq in range(1, 7):
                pub.publish("edge/cam-1/detections", inbound(seq).payload, qos=1).wait_for_publish(5)
            pub.loop_stop()
            pub.disconnect()
            outcome.append("stored" if poll(lambda: col.metrics.records == 6, 15, 0.05) else "not stored")
        finally:
            stop.set()

    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logging.getLogger("edge_agent.collector").addHandler(handler)
    logging.getLogger("edge_agent.collector").setLevel(logging.INFO)

    def caplog_text() -> str:
        return "\n".join(r.getMessage() for r in list(records))

    t = threading.Thread(target=publisher, daemon=True)
    t.start()
    try:
        col.run(stop)
    finally:
        logging.getLogger("edge_agent.collector").removeHandler(handler)
        t.join(30)
    assert outcome == ["stored"], caplog_text()
    assert col.metrics.messages == 6 and not col.sub.connected.is_set()
    assert "collector: stopped: 6 messages, 6 records stored" in caplog_text()
