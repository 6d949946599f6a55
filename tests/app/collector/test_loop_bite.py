"""The collector's loop (app/collector/loop.py), what the mutation run of issue 36 found unpinned:
the subscriber built from the config, ``run``'s start and stop (schema error, known devices, the
session ended only when leaving, the stop line), and a round's figures for /metrics (ingest delay,
inbox bytes, the rate, confirmations, one conflict line per device). In process, on SQLite; the
subscriber is built, never connected."""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Optional

import pytest

from edge_agent.adapters.collector.db import DbError
from edge_agent.adapters.collector.subscriber import Inbound
from edge_agent.app.collector.loop import RATE_WINDOW_S, Collector
from edge_agent.core.config.collector import CollectorConfig
from edge_agent.core.messages.fleet import subscriptions

NOW = 1796000000.0


def make(tmp_path: Path, leave_quiet_s: Optional[float] = None, **cfg: Any) -> Collector:
    c = CollectorConfig(db=f"sqlite:///{tmp_path / 'fleet.db'}", **cfg)
    return Collector(c, None, None, leave_quiet_s)


def inbound(seq: int, device: str = "cam-1", at: float = 0.0, prefix: str = "edge") -> Inbound:
    body = {"id": f"{device}-{seq}", "seq": seq, "boot": 1, "device_id": device, "ts": NOW + seq}
    return Inbound(f"{prefix}/{device}/detections", json.dumps(body).encode(), seq, 1, 1, at=at)


class Published:
    """paho's publish recorded; each one handed over (rc 0)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, bytes, int, bool]] = []

    def __call__(self, topic: str, payload: bytes, qos: int = 0, retain: bool = False) -> Any:
        self.calls.append((topic, payload, qos, retain))
        info = type("Info", (), {})()
        info.rc = 0
        return info


def test_the_subscriber_is_built_from_the_collectors_config(tmp_path: Path) -> None:
    col = make(
        tmp_path,
        leave_quiet_s=5.0,
        broker="mqtt://127.0.0.1:1884",
        client_id="col-a",
        prefix="fleet",
        group="g1",
        session_expiry_s=1234,
        receive_maximum=77,
        keepalive_s=17,
        username="collector",
        message_max_kib=64,
        inbox_max_mib=2,
    )
    s = col.sub
    assert (s.host, s.port, s.keepalive_s) == ("127.0.0.1", 1884, 17)
    assert s.filters == subscriptions("fleet", "g1") and s.filters[0] == "$share/g1/fleet/+/+"
    assert (s.props.SessionExpiryInterval, s.props.ReceiveMaximum) == (1234, 77)
    assert s.leave is True and col.left is False
    assert s.message_max == 64 * 1024 and s.inbox.max_bytes == 2 * 1024 * 1024
    # the collector's own confirmations come back through <prefix>/+/+: dropped, never stored
    assert s.ignore is not None
    assert s.ignore("fleet/cam-1/confirm") and not s.ignore("fleet/cam-1/detections")
    assert not s.ignore("edge/cam-1/confirm")  # another prefix: not the collector's
    col.db.close()
    stay = make(tmp_path / "b")
    assert stay.sub.leave is False and stay.sub.filters == subscriptions("edge", None)
    stay.db.close()


def test_the_broker_gets_the_collectors_client_id_and_credentials(tmp_path: Path) -> None:
    col = Collector(
        CollectorConfig(db=f"sqlite:///{tmp_path / 'f.db'}", client_id="col-b", username="u1"),
        "secret",
        None,
    )
    c = col.sub.client
    # paho's CONNECT fields (no public getter): what the broker authenticates
    assert (c._client_id, c._username, c._password) == (b"col-b", b"u1", b"secret")
    col.db.close()


def prepared(col: Collector) -> tuple[list[bool], list[str]]:
    """``run`` with the subscriber's start/stop recorded (end_session) and its acks recorded."""
    ends: list[bool] = []
    acked: list[str] = []
    col.sub.start = lambda: None  # type: ignore[method-assign]
    col.sub.stop = lambda end_session=False: ends.append(end_session)  # type: ignore[method-assign]
    col.sub.ack = lambda msgs: acked.extend(m.topic for m in msgs) or len(msgs)  # type: ignore[method-assign,func-returns-value]
    return ends, acked


def test_a_schema_that_cannot_be_applied_is_one_line_naming_the_dialect(tmp_path: Path) -> None:
    col = make(tmp_path)
    prepared(col)

    def broken() -> int:
        raise sqlite3.OperationalError("disk I/O error")

    col.db.migrate = broken  # type: ignore[method-assign]
    with pytest.raises(DbError) as err:
        col.run(threading.Event())
    assert str(err.value) == "sqlite: cannot apply the collector schema: disk I/O error"
    col.db.close()


def test_devices_stored_before_a_restart_are_known_and_not_counted_as_new(tmp_path: Path) -> None:
    first = make(tmp_path)
    first.db.migrate()
    first.sub.ack = lambda msgs: len(msgs)  # type: ignore[method-assign]
    first._round([inbound(1, "old-cam")], threading.Event())
    first.db.close()
    # restarted with room for one new device id: the known one must not take that room
    col = make(tmp_path, new_devices_max=1, leave_quiet_s=0.0)
    ends, _ = prepared(col)
    col.sub.unsubscribed.set()
    for m in (inbound(2, "old-cam"), inbound(1, "new-cam")):
        col.sub.inbox.put(m)
    col.run(threading.Event())
    assert col.left and ends == [True]  # leaving: the session ends once what it held is stored
    assert col.metrics.records == 2 and col.metrics.rejected == 0
    assert col.metrics.new_devices_refused == 0


def test_a_stop_keeps_the_session_and_logs_what_was_done(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    col = make(tmp_path)
    ends, acked = prepared(col)
    caplog.set_level(logging.INFO, "edge_agent.collector")
    for m in (inbound(1), inbound(2), inbound(1), Inbound("edge/cam-1/detections", b"{no", 9, 1, 1)):
        col.sub.inbox.put(m)
    stop = threading.Event()
    t = threading.Thread(target=col.run, args=(stop,))
    t.start()
    end = time.monotonic() + 30
    while col.metrics.messages < 4 and time.monotonic() < end:
        time.sleep(0.02)
    stop.set()
    t.join(30)
    assert not t.is_alive() and len(acked) == 4
    assert ends == [False] and not col.left  # not leaving: the broker keeps the session for the next start
    lines = [r.getMessage() for r in caplog.records]
    assert any(x.startswith("collector: database sqlite at schema version ") for x in lines), lines
    assert lines[-1] == "collector: stopped: 4 messages, 2 records stored, duplicates dropped 1, rejected 1"
    with pytest.raises(sqlite3.ProgrammingError):  # the database was closed at the stop
        col.db._x("SELECT 1")


def test_a_rounds_figures_for_metrics(tmp_path: Path) -> None:
    col = make(tmp_path)
    col.db.migrate()
    col.sub.ack = lambda msgs: len(msgs)  # type: ignore[method-assign]
    pub = Published()
    col.sub.client.publish = pub
    waiting = inbound(9, "cam-3")
    col.sub.inbox.put(waiting)  # taken by the next round: still in the inbox at this commit
    mono = time.monotonic()
    batch = [inbound(1, "cam-1", at=mono - 40.0), inbound(1, "cam-2", at=mono - 5.0), inbound(2, "cam-1")]
    col._round(batch, threading.Event())
    m = col.metrics
    # from the oldest receipt of the round (at 0: unknown, not counted) to its commit
    assert 40.0 <= m.ingest_delay_s < 100.0
    assert m.inbox_bytes == col.sub.inbox.bytes and m.inbox_bytes > 0
    assert m.rate(time.monotonic()) == pytest.approx(3 / RATE_WINDOW_S)
    # one commit watermark per device of the round, retained, QoS 1, counted
    assert sorted((t, q, r) for t, _, q, r in pub.calls) == [
        ("edge/cam-1/confirm", 1, True),
        ("edge/cam-2/confirm", 1, True),
    ]
    assert m.confirms == 2
    delay = m.ingest_delay_s
    col._round([inbound(3, "cam-1")], threading.Event())
    assert m.confirms == 3 and m.rate(time.monotonic()) == pytest.approx(4 / RATE_WINDOW_S)
    assert m.ingest_delay_s == delay  # a round without receipt times keeps the last figure
    lag = m.lag_s
    col._round([Inbound("edge/cam-1/detections", b"{no", 50, 1, 1)], threading.Event())
    assert m.lag_s == lag  # a round that stored no record leaves the lag as it was
    col.db.close()


def test_conflicts_are_one_line_per_device(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    col = make(tmp_path)
    col.db.migrate()
    col.sub.ack = lambda msgs: len(msgs)  # type: ignore[method-assign]
    caplog.set_level(logging.WARNING, "edge_agent.collector")
    col._round([inbound(s, d) for d in ("cam-b", "cam-a") for s in (1, 2)], threading.Event())
    forged = []
    for d in ("cam-b", "cam-a"):
        for s in (1, 2):
            body = {"id": f"forged-{d}-{s}", "seq": s, "boot": 1, "device_id": d, "ts": 1.0}
            forged.append(Inbound(f"edge/{d}/detections", json.dumps(body).encode(), 100 + s, 1, 1))
    col._round(forged, threading.Event())
    lines = [r.getMessage() for r in caplog.records if "conflicts" in r.getMessage()]
    assert lines == [
        f"collector: {d}: 2 message(s) with a seq already taken by another id or body, or implausibly "
        f"far ahead: kept in conflicts (fleet gaps {d})"
        for d in ("cam-a", "cam-b")
    ]
    assert col.metrics.conflicts == 4
    col.db.close()


def test_the_periodic_work_counts_online_devices_and_exports_device_rows(tmp_path: Path) -> None:
    col = make(tmp_path, metrics_port=9100)
    col.db.migrate()
    col.sub.ack = lambda msgs: len(msgs)  # type: ignore[method-assign]
    status = {"device_id": "cam-1", "state": "running", "ts": time.time(), "queue": {"pending": 1}}
    col._round([Inbound("edge/cam-1/status", json.dumps(status).encode(), 1, 1, 1)], threading.Event())
    col._periodic()
    assert col.metrics.devices_online == 1
    assert col.metrics.devices_known == 1 and len(col.metrics.device_rows) == 1
    col.db.close()


def test_a_failing_online_count_is_one_warning_and_the_loop_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    col = make(tmp_path)
    col.db.migrate()
    caplog.set_level(logging.WARNING, "edge_agent.collector")

    def broken() -> int:
        raise sqlite3.OperationalError("database is locked")

    col.db.online = broken  # type: ignore[method-assign]
    col._refresh_online()
    assert [r.getMessage() for r in caplog.records] == [
        "collector: counting online devices failed: database is locked"
    ]
    col.db.close()


def test_leaving_is_done_once_nothing_came_for_exactly_leave_quiet_s(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    col = make(tmp_path, leave_quiet_s=60.0)
    col.sub.unsubscribed.set()
    col.sub.unsubscribed_at = 10.0
    monkeypatch.setattr(time, "monotonic", lambda: 100.0)
    assert col._done_leaving(40.0)  # quiet since 40: 60 s
    assert not col._done_leaving(40.5)
    col.sub.unsubscribed_at = 45.0  # the UNSUBSCRIBE confirmed later: quiet counts from there
    assert not col._done_leaving(40.0)
    col.db.close()


def test_the_stores_limits_come_from_the_config(tmp_path: Path) -> None:
    col = make(tmp_path, seq_jump_max=2_000_000, conflicts_max_per_device=3, rejected_max=10)
    col.db.migrate()
    col.sub.ack = lambda msgs: len(msgs)  # type: ignore[method-assign]
    col._round([*(inbound(s) for s in range(1, 6)), inbound(1_500_005)], threading.Event())
    assert col.metrics.records == 6 and col.metrics.conflicts == 0  # 1.5 M ahead: within 2 M
    forged = []
    for s in range(1, 6):
        body = {"id": f"forged-{s}", "seq": s, "boot": 1, "device_id": "cam-1", "ts": 1.0}
        forged.append(Inbound("edge/cam-1/detections", json.dumps(body).encode(), 100 + s, 1, 1))
    col._round(forged, threading.Event())
    assert col.db._x("SELECT COUNT(*) FROM conflicts").fetchone()[0] == 3  # the device's first 3
    col._round([Inbound("edge/cam-1/detections", b"{no", i, 1, 1) for i in range(15)], threading.Event())
    assert col.db._x("SELECT COUNT(*) FROM rejected").fetchone()[0] == 10  # the newest 10
    col.db.close()
