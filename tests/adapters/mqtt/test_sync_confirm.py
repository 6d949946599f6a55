"""The sync with ``[mqtt] confirm = "collector"`` against a real mosquitto: the rows of a PUBACKed
batch become SENT, a confirmation on <prefix>/<device>/confirm (retained) deletes them, a bad one is
refused and counted, a refused SUBSCRIBE is shown in the status, and a device that never gets a
confirmation says so once, with why."""

from __future__ import annotations

import logging
from pathlib import Path

import paho.mqtt.client as mqtt
import pytest
from support import wait_until
from support.mqtt import Broker, dynsec_conf, require_mosquitto, wait_connected
from support.outbox import TOPIC, big_limits

from edge_agent.adapters.mqtt import confirms as confirms_mod
from edge_agent.adapters.mqtt.sync import MqttSync
from edge_agent.adapters.outbox.outbox import Outbox
from edge_agent.core.config.schema import MqttConfig
from edge_agent.core.messages.confirm import encode

DEVICE = "dev-1"


def cfg(port: int, **kw: object) -> MqttConfig:
    base: dict[str, object] = {
        "port": port,
        "reconnect_min_s": 0.2,
        "reconnect_max_s": 1.0,
        "confirm": "collector",
    }
    return MqttConfig(**{**base, **kw})  # type: ignore[arg-type]


def filled(path: Path, n: int) -> Outbox:
    ob = Outbox(path, big_limits(), flush_interval_s=0.05)
    for i in range(n):
        ob.put(TOPIC, {"n": i})
    ob.flush()
    return ob


def publish(port: int, payload: bytes) -> None:
    """What the collector does after a commit: retained, QoS 1, on the device's confirm topic."""
    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="fake-collector")
    c.connect("127.0.0.1", port)
    c.loop_start()
    c.publish(f"edge/{DEVICE}/confirm", payload, qos=1, retain=True).wait_for_publish(5)
    c.disconnect()
    c.loop_stop()


def test_batched_rows_become_sent_and_a_confirmation_deletes_them(tmp_path: Path, broker: Broker) -> None:
    with filled(tmp_path / "q.db", 1200) as ob:
        sync = MqttSync(cfg(broker.port, batch_threshold=1, batch_max_messages=500), DEVICE, ob)
        sync.start()
        try:
            wait_connected(sync)
            # the rows are marked SENT (outbox.ack) just before the sync thread counts them: wait for both
            wait_until(
                lambda: ob.stats()["sent"] == 1200 and sync.acked == 1200,
                20,
                lambda: f"all SENT: {ob.stats()}, acked {sync.acked}",
            )
            assert ob.stats()["pending"] == 1200  # acked by the broker, kept
            publish(broker.port, encode({ob.boot: [(1, 700)]}))
            wait_until(lambda: ob.stats()["sent"] == 500, 10, lambda: f"700 confirmed: {ob.stats()}")
            publish(broker.port, b"not json")  # refused, counted; the sync goes on
            publish(broker.port, encode({ob.boot: [(1, 1200)]}))
            wait_until(lambda: ob.stats()["pending"] == 0, 10, lambda: f"all confirmed: {ob.stats()}")
            st = sync.stats()["confirm"]
            assert st["mode"] == "collector" and st["received"] == 2 and st["rejected"] == 1
            assert st["rows"] == 1200 and st["error"] is None and sync.last_error is None
        finally:
            sync.stop()


def test_the_retained_confirmation_is_applied_at_the_next_connect(tmp_path: Path, broker: Broker) -> None:
    path = tmp_path / "q.db"
    with filled(path, 50) as ob:
        boot = ob.boot
        sync = MqttSync(cfg(broker.port), DEVICE, ob)
        sync.start()
        try:
            wait_until(lambda: ob.stats()["sent"] == 50, 20, lambda: f"SENT: {ob.stats()}")
        finally:
            sync.stop()
    publish(broker.port, encode({boot: [(1, 50)]}))  # while the device was away
    with Outbox(path, big_limits()) as ob:
        sync = MqttSync(cfg(broker.port), DEVICE, ob)
        sync.start()
        try:
            wait_until(lambda: ob.stats()["pending"] == 0, 10, lambda: f"confirmed at connect: {ob.stats()}")
        finally:
            sync.stop()


def test_puback_mode_does_not_subscribe_and_deletes_on_the_puback(tmp_path: Path, broker: Broker) -> None:
    with filled(tmp_path / "q.db", 20) as ob:
        sync = MqttSync(cfg(broker.port, confirm="puback"), DEVICE, ob)
        sync.start()
        try:
            assert sync.drain(10)
            assert ob.stats()["sent"] == 0 and "confirm" not in sync.stats()
        finally:
            sync.stop()


def test_a_refused_subscription_is_an_error_in_the_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    require_mosquitto()
    monkeypatch.setenv("EDGE_TEST_PW", "pw")
    conf = dynsec_conf(tmp_path / "broker", "dev", "pw", ["elsewhere/#"])
    with Broker(tmp_path / "broker", extra_conf=conf) as broker, filled(tmp_path / "q.db", 5) as ob:
        sync = MqttSync(cfg(broker.port, username="dev", password_env="EDGE_TEST_PW"), DEVICE, ob)
        sync.start()
        try:
            wait_until(lambda: sync.last_error is not None, 15, "the refused SUBACK in the status")
            assert (
                sync.last_error is not None
                and "refused the subscription to the confirm topic" in sync.last_error
            )
            assert sync.stats()["confirm"]["error"] == sync.last_error
            assert any("results stay SENT" in r.getMessage() for r in caplog.records)
        finally:
            sync.stop()


def test_no_confirmation_ever_warns_once_and_says_why(
    tmp_path: Path, broker: Broker, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(confirms_mod, "SILENCE_MIN_S", 0.5)
    monkeypatch.setattr(confirms_mod, "CHECK_EVERY_S", 0.1)
    caplog.set_level(logging.WARNING, logger="edge_agent.mqtt")
    with filled(tmp_path / "q.db", 5) as ob:
        sync = MqttSync(cfg(broker.port, confirm_timeout_s=1000), DEVICE, ob)
        sync.start()
        try:
            wait_until(lambda: sync.stats()["confirm"]["warning"] is not None, 15, "the warning")
            warning = sync.stats()["confirm"]["warning"]
            assert "5 results" in warning and "none ever received" in warning
            assert f"edge/{DEVICE}/confirm" in warning and "prefix 'edge'" in warning
            wait_until(lambda: ob.stats()["oldest_unconfirmed_s"] >= 1.0, 10, "a while later")
            lines = [r for r in caplog.records if "no confirmation from the" in r.getMessage()]
            assert len(lines) == 1  # once, not on every check
        finally:
            sync.stop()


def test_the_settings_reach_the_outbox(tmp_path: Path) -> None:
    with Outbox(tmp_path / "q.db", big_limits()) as ob:
        MqttSync(cfg(1883, confirm_timeout_s=7.5), DEVICE, ob)
        assert ob.claims.confirm_timeout == 7.5
    with Outbox(tmp_path / "p.db", big_limits()) as ob:
        MqttSync(cfg(1883, confirm="puback", confirm_timeout_s=7.5), DEVICE, ob)
        assert ob.claims.confirm_timeout is None


def test_an_oversized_confirmation_is_cut_before_it_is_queued_and_still_refused() -> None:
    """Outside input: a forger's 10 MB on the confirm topic must not be held whole (1024 queued)."""
    import threading

    import paho.mqtt.client as mqtt_client

    from edge_agent.adapters.mqtt.session import SyncSession
    from edge_agent.core.messages.confirm import MAX_PAYLOAD, ConfirmError, decode

    session = SyncSession(threading.Event())
    msg = mqtt_client.MQTTMessage(topic=b"edge/cam/confirm")
    msg.payload = b"x" * (10 << 20)
    session.on_message(None, None, msg)  # type: ignore[arg-type]
    (queued,) = session.confirms
    assert len(queued) == MAX_PAYLOAD + 1
    with pytest.raises(ConfirmError, match="bytes, at most"):
        decode(queued)
