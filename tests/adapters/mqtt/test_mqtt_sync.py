"""MqttSync against a real mosquitto on 127.0.0.1: backlog, restarts, caps, TLS, credentials."""

from __future__ import annotations

import json
import time
from collections import defaultdict
from pathlib import Path

import pytest
from support.mqtt import Broker, Collector, TlsFiles, require_mosquitto
from support.outbox import big_limits

from edge_agent.adapters.mqtt.sync import MqttSync
from edge_agent.adapters.outbox.outbox import Outbox
from edge_agent.core.config.schema import MqttConfig
from edge_agent.core.messages.builders import result_message
from edge_agent.errors import SyncError

DEVICE = "dev-1"
DET_TOPIC = f"edge/{DEVICE}/detections"


def fast_cfg(port: int, **kw: object) -> MqttConfig:
    return MqttConfig(port=port, reconnect_min_s=0.2, reconnect_max_s=1.0, **kw)  # type: ignore[arg-type]


def fill(ob: Outbox, n: int, start: int = 0) -> list[str]:
    ids = []
    for i in range(start, start + n):
        infer = {
            "image": f"/cam/{i:06d}.jpg",
            "width": 640,
            "height": 480,
            "timings_ms": {"inference": 9.5},
            "detections": [{"label": "person", "class_id": 0, "confidence": 0.9, "box": [1, 2, 30, 40]}],
        }
        ids.append(ob.put(DET_TOPIC, result_message(infer, device_id=DEVICE, ts=time.time())))
    ob.flush()
    return ids


def assert_same_copies(collector: Collector) -> dict[str, list[dict[str, object]]]:
    """Duplicates are allowed only as identical copies of one message id."""
    by_id: dict[str, list[dict[str, object]]] = defaultdict(list)
    for msg in collector.on_topic("/detections"):
        by_id[str(msg["id"])].append(msg)
    for copies in by_id.values():
        assert all(c == copies[0] for c in copies)
    return by_id


def prepare_persistent_collector(broker: Broker) -> None:
    """Register a persistent subscription, so messages published while it reconnects are kept."""
    Collector(broker.port).close()


def test_backlog_of_10000_while_broker_down_then_up(tmp_path: Path) -> None:
    require_mosquitto()
    broker = Broker(tmp_path / "broker")
    broker.start()
    prepare_persistent_collector(broker)
    broker.stop()
    with Outbox(tmp_path / "q.db", big_limits(), flush_interval_s=0.05, flush_batch=1000) as ob:
        ids = fill(ob, 10_000)
        sync = MqttSync(
            fast_cfg(broker.port), DEVICE, ob, status_fn=lambda: {"state": "running", "models": ["yolov8n"]}
        )
        sync.start()
        try:
            # a condition, not a sleep: two refused connects seen (the backoff is on fast_cfg's scale)
            deadline = time.monotonic() + 30
            while sync.connect_attempts < 2 and time.monotonic() < deadline:
                time.sleep(0.02)
            assert sync.state in ("connecting", "disconnected")
            assert sync.connect_attempts >= 2 and "cannot connect to 127.0.0.1" in str(sync.last_error)
            assert ob.stats()["pending"] == 10_000 and sync.last_sync is None
            broker.start()
            collector = Collector(broker.port)
            assert sync.drain(60), sync.last_error
            assert sync.state == "connected" and sync.last_sync is not None
            collector.wait_until(lambda c: len(c.ids()) >= 10_000, 30, "len(c.ids()) >= 10_000")
            time.sleep(0.2)  # not a synchronisation: a window in which a duplicate would still arrive
            got = collector.ids()
            assert len(got) == 10_000 and set(got) == set(ids)
            assert got == ids  # oldest first
            assert ob.stats()["pending"] == 0 and sync.acked == 10_000
            status = collector.on_topic("/status")
            assert status[0]["state"] == "running" and status[0]["models"] == ["yolov8n"]
            assert len(status) >= 1  # the snapshot status_fn gives, as it is
        finally:
            sync.stop()
        collector.wait_until(
            lambda c: c.on_topic("/status")[-1]["state"] == "offline",
            5,
            'c.on_topic("/status")[-1]["state"] == "offline"',
        )
        collector.close()
        broker.stop()


def test_broker_restarted_during_drain_loses_nothing(tmp_path: Path) -> None:
    require_mosquitto()
    broker = Broker(tmp_path / "broker")
    broker.start()
    collector = Collector(broker.port)
    with Outbox(tmp_path / "q.db", big_limits(), flush_interval_s=0.05, flush_batch=1000) as ob:
        ids = fill(ob, 10_000)
        sync = MqttSync(fast_cfg(broker.port, rate_limit_per_s=4000.0), DEVICE, ob)
        sync.start()
        restarts_at = []
        try:
            for threshold in (8000, 5000, 2000):
                deadline = time.monotonic() + 30
                while ob.stats()["pending"] > threshold and time.monotonic() < deadline:
                    time.sleep(0.01)
                restarts_at.append(ob.stats()["pending"])
                broker.restart()
            assert sync.drain(60), sync.last_error
            collector.wait_until(lambda c: set(c.ids()) >= set(ids), 30, "set(c.ids()) >= set(ids)")
        finally:
            sync.stop()
            collector.close()
            broker.stop()
        assert all(p > 0 for p in restarts_at), restarts_at  # every restart hit a drain in progress
        by_id = assert_same_copies(collector)
        assert set(by_id) == set(ids)  # zero lost, nothing foreign
        assert sync.connects >= 4
        assert ob.stats()["pending"] == 0


def test_cap_reached_while_offline_sends_only_the_newest(tmp_path: Path, broker: Broker) -> None:
    collector = Collector(broker.port)
    limits = big_limits(max_messages=1000)
    with Outbox(tmp_path / "q.db", limits, flush_interval_s=0.05, flush_batch=100) as ob:
        ids = fill(ob, 1500)
        assert ob.stats()["dropped"] == 500
        sync = MqttSync(fast_cfg(broker.port), DEVICE, ob)
        sync.start()
        try:
            assert sync.drain(30)
        finally:
            sync.stop()
    collector.wait_until(lambda c: len(c.ids()) >= 1000, 10, "len(c.ids()) >= 1000")
    assert collector.ids() == ids[500:]
    collector.close()


def test_tls_with_client_certificate(tmp_path: Path, tls_broker: Broker, tls_files: TlsFiles) -> None:
    collector = Collector(tls_broker.port)
    cfg = fast_cfg(
        tls_broker.tls_port or 0,
        tls_ca=str(tls_files.ca),
        tls_cert=str(tls_files.client_cert),
        tls_key=str(tls_files.client_key),
    )
    with Outbox(tmp_path / "q.db", big_limits()) as ob:
        ids = fill(ob, 200)
        sync = MqttSync(cfg, DEVICE, ob)
        sync.start()
        try:
            assert sync.drain(20), sync.last_error
        finally:
            sync.stop()
    collector.wait_until(lambda c: len(c.ids()) >= 200, 10, "len(c.ids()) >= 200")
    assert collector.ids() == ids
    collector.close()


def test_tls_wrong_ca_is_a_clear_error_and_keeps_retrying(
    tmp_path: Path, tls_broker: Broker, tls_files: TlsFiles
) -> None:
    cfg = fast_cfg(
        tls_broker.tls_port or 0,
        tls_ca=str(tls_files.wrong_ca),
        tls_cert=str(tls_files.client_cert),
        tls_key=str(tls_files.client_key),
    )
    with Outbox(tmp_path / "q.db", big_limits()) as ob:
        fill(ob, 10)
        sync = MqttSync(cfg, DEVICE, ob)
        sync.start()
        try:
            deadline = time.monotonic() + 10
            while sync.connect_attempts < 3 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert sync.connect_attempts >= 3
            assert sync.state != "connected"
            err = str(sync.last_error)
            assert "certificate verify failed" in err and str(tls_files.wrong_ca) in err
            assert not sync.drain(0.3)
            assert ob.stats()["pending"] == 10
        finally:
            sync.stop()
        assert sync.state == "disconnected"
    with pytest.raises(SyncError, match=r"mqtt\.tls_ca"):
        MqttSync(fast_cfg(1, tls_ca=str(tmp_path / "absent.crt")), DEVICE, ob).start()


def test_username_and_password_from_credentials_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_mosquitto()
    creds = tmp_path / "creds"
    creds.mkdir()
    (creds / "mqtt-password").write_text("s3cret-pw\n")
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(creds))
    with (
        Broker(tmp_path / "auth-broker", users={"dev": "s3cret-pw"}) as broker,
        Outbox(tmp_path / "q.db", big_limits()) as ob,
    ):
        fill(ob, 20)
        bad = MqttSync(fast_cfg(broker.port, username="dev", password_env="EDGE_TEST_PW"), DEVICE, ob)
        monkeypatch.setenv("EDGE_TEST_PW", "wrong")
        bad.start()
        try:
            deadline = time.monotonic() + 10
            while bad.connect_attempts < 2 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert "refused" in str(bad.last_error) and bad.state != "connected"
        finally:
            bad.stop()
        good = MqttSync(fast_cfg(broker.port, username="dev", password_file="mqtt-password"), DEVICE, ob)
        good.start()
        try:
            assert good.drain(20), good.last_error
        finally:
            good.stop()
        assert "s3cret" not in broker.log_text()
    with pytest.raises(SyncError, match=r"mqtt\.password_file"):
        MqttSync(fast_cfg(1, username="u", password_file="nope"), DEVICE, ob).start()


def test_status_is_retained(tmp_path: Path, broker: Broker) -> None:
    with Outbox(tmp_path / "q.db", big_limits()) as ob:
        sync = MqttSync(
            fast_cfg(broker.port), DEVICE, ob, status_fn=lambda: {"state": "running", "models": ["a.onnx"]}
        )
        sync.start()
        try:
            deadline = time.monotonic() + 10
            while sync.state != "connected" and time.monotonic() < deadline:
                time.sleep(0.02)
            assert sync.publish_status({"state": "running", "fps": 12.5, "models": ["a.onnx"]})
            # a subscriber arriving after the publish gets it from the broker's retained store; one
            # that races the publish gets it live (retain flag off), so join again until retained
            body: dict[str, object] = {}
            deadline = time.monotonic() + 10
            n = 0
            while not body and time.monotonic() < deadline:
                n += 1
                late = Collector(broker.port, topic=f"edge/{DEVICE}/status", client_id=f"late-joiner-{n}")
                late.wait_for(lambda c: bool(c.messages), 2)
                retained = [json.loads(p) for _, p, r in late.messages if r]
                late.close()
                body = next((b for b in retained if b.get("fps") == 12.5), {})
            assert body["state"] == "running"
            assert body["fps"] == 12.5 and body["models"] == ["a.onnx"]
        finally:
            sync.stop()
    disabled = MqttSync(MqttConfig(enabled=False), DEVICE, ob)
    disabled.start()
    assert disabled.state == "disabled"


def test_put_never_waits_for_a_stalled_broker(tmp_path: Path, broker: Broker) -> None:
    """SIGSTOP the broker mid-session: the sync thread is stuck waiting for PUBACKs, put() is not."""
    import signal
    import threading

    from edge_agent.adapters.outbox.views import read_stats

    collector = Collector(broker.port)
    path = tmp_path / "q.db"
    with Outbox(path, big_limits(), flush_interval_s=0.05, flush_batch=200) as ob:
        sync = MqttSync(fast_cfg(broker.port), DEVICE, ob)
        sync.start()
        try:
            first = fill(ob, 500)
            assert sync.drain(20)
            assert broker.proc is not None
            broker.proc.send_signal(signal.SIGSTOP)
            try:
                later: list[str] = []
                producer = threading.Thread(target=lambda: later.extend(fill(ob, 3000)))
                producer.start()
                producer.join(30)
                assert not producer.is_alive() and len(later) == 3000
                assert read_stats(path)["pending"] == 3000  # on disk while the broker is frozen
                assert sync.acked == 500
                deadline = time.monotonic() + 5
                while ob.stats()["inflight"] < 100 and time.monotonic() < deadline:
                    time.sleep(0.02)
                time.sleep(0.3)
                assert ob.stats()["inflight"] == 100  # the window (mqtt.inflight) is full, never exceeded
            finally:
                broker.proc.send_signal(signal.SIGCONT)
            assert sync.drain(30)
        finally:
            sync.stop()
    collector.wait_until(lambda c: len(c.ids()) >= 3500, 20, "len(c.ids()) >= 3500")
    assert collector.ids() == first + later
    collector.close()


def test_newest_first_with_a_small_window(tmp_path: Path, broker: Broker) -> None:
    collector = Collector(broker.port)
    with Outbox(tmp_path / "q.db", big_limits()) as ob:
        ids = fill(ob, 60)
        sync = MqttSync(fast_cfg(broker.port, newest_first=True, inflight=7), DEVICE, ob)
        sync.start()
        try:
            assert sync.drain(20)
        finally:
            sync.stop()
    collector.wait_until(lambda c: len(c.ids()) >= 60, 10, "len(c.ids()) >= 60")
    assert collector.ids() == ids[::-1]
    collector.close()
