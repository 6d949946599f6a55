"""What the model receiver makes of the broker's SUBACK, against a real mosquitto: a filter the
broker refuses (an ACL) and a grant cut to QoS 0 (`max_qos 0`) are both in `last_error`, so the
status shows why no update arrives or why one sent while the device was away never completes."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from support import wait_until
from support.mqtt import Broker, dynsec_conf, require_mosquitto
from support.updates import write_config

from edge_agent.adapters.updates.receiver import ModelReceiver
from edge_agent.app.cli.configfile import load_config


def receiver(tmp_path: Path, port: int, **mqtt: object) -> ModelReceiver:
    cfg = load_config(write_config(tmp_path, port=port))
    cfg.mqtt = cfg.mqtt.model_copy(update=mqtt)
    root = Path(cfg.device.state_dir)
    return ModelReceiver(cfg, root / "transfers", root / "inbox", lambda info: None)


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_a_grant_cut_to_qos_0_is_shown_and_the_receiver_still_listens(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    require_mosquitto()
    caplog.set_level(logging.INFO, logger="edge_agent.model_mqtt")
    with Broker(tmp_path / "broker", extra_conf=["max_qos 0"]) as broker:
        rec = receiver(tmp_path, broker.port)
        rec.start()
        try:
            wait_until(rec.subscribed.is_set, timeout=15, what="the QoS 0 SUBACK")
            assert rec.last_error == (
                "broker granted only QoS 0 for edge/cam-1/model/#: chunks sent while the device is "
                "offline are not kept for it (raise the broker's max_qos to 1)"
            )
            assert rec.snapshot()["last_error"] == rec.last_error
            assert warnings(caplog) == [f"model receiver: {rec.last_error}"]
        finally:
            rec.stop()


def test_a_full_grant_leaves_no_error(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    require_mosquitto()
    caplog.set_level(logging.INFO, logger="edge_agent.model_mqtt")
    with Broker(tmp_path / "broker") as broker:
        rec = receiver(tmp_path, broker.port)
        rec.start()
        try:
            wait_until(rec.subscribed.is_set, timeout=15, what="the SUBACK")
            assert rec.last_error is None and warnings(caplog) == []
        finally:
            rec.stop()


def test_a_filter_the_broker_refuses_names_it_and_is_not_subscribed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_mosquitto()
    monkeypatch.setenv("EDGE_TEST_PW", "pw")
    caplog.set_level(logging.INFO, logger="edge_agent.model_mqtt")
    conf = dynsec_conf(tmp_path / "broker", "dev", "pw", ["elsewhere/#"])
    with Broker(tmp_path / "broker", extra_conf=conf) as broker:
        rec = receiver(tmp_path, broker.port, username="dev", password_env="EDGE_TEST_PW")
        rec.start()
        try:
            wait_until(lambda: rec.last_error is not None, timeout=15, what="the refused SUBACK")
            # MQTT 3.1.1's SUBACK has one failure code (0x80), which paho spells this way
            assert (
                rec.last_error == "broker refused the subscription to edge/cam-1/model/# (Unspecified error)"
            )
            assert not rec.subscribed.is_set()
            assert warnings(caplog) == [f"model receiver: {rec.last_error}"]
        finally:
            rec.stop()
