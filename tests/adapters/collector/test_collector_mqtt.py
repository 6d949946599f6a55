"""The collector's MQTT subscriber against a real mosquitto: what only the SUBACK says (a filter the
broker refuses, a QoS cut to 0) is an error naming the filter, not a collector silently waiting
for messages that never come or acking what it cannot get again."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from support import wait_until
from support.mqtt import Broker, dynsec_conf, require_mosquitto

from edge_agent.adapters.collector.subscriber import Subscriber


def subscriber(port: int, filters: list[str]) -> Subscriber:
    return Subscriber(
        "127.0.0.1",
        port,
        "collector-test",
        filters,
        session_expiry_s=0,
        receive_maximum=10,
        username="collector",
        password="pw",
    )


def started(tmp_path: Path, conf: Sequence[str]) -> Iterator[Broker]:
    b = Broker(tmp_path / "broker", extra_conf=conf)
    b.start()
    try:
        yield b
    finally:
        b.stop()


@pytest.fixture
def dynsec_broker(tmp_path: Path) -> Iterator[Broker]:
    require_mosquitto()
    yield from started(tmp_path, dynsec_conf(tmp_path / "broker", "collector", "pw", ["allowed/#"]))


@pytest.fixture
def qos0_broker(tmp_path: Path) -> Iterator[Broker]:
    require_mosquitto()
    yield from started(tmp_path, ["max_qos 0"])


def errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]


def test_a_filter_the_broker_refuses_is_an_error_naming_it(
    dynsec_broker: Broker, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="edge_agent")
    sub = subscriber(dynsec_broker.port, ["allowed/#", "edge/+/detections"])
    sub.start()
    try:
        wait_until(lambda: sub.last_error is not None, 15, "a refused SUBACK")
        assert sub.last_error == "broker refused the subscription to edge/+/detections (Not authorized)"
        assert errors(caplog) == [f"collector: {sub.last_error}"]
    finally:
        sub.stop(end_session=True)


def test_a_granted_subscription_is_logged_and_leaves_no_error(
    dynsec_broker: Broker, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="edge_agent")
    sub = subscriber(dynsec_broker.port, ["allowed/#"])
    sub.start()
    try:
        wait_until(
            lambda: any(r.getMessage() == "collector: subscribed to allowed/#" for r in caplog.records),
            15,
            "the granted SUBACK logged",
        )
        assert sub.last_error is None and errors(caplog) == []
    finally:
        sub.stop(end_session=True)


def test_a_subscription_cut_to_qos_0_is_an_error(
    qos0_broker: Broker, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="edge_agent")
    sub = subscriber(qos0_broker.port, ["edge/+/detections"])
    sub.start()
    try:
        wait_until(lambda: sub.last_error is not None, 15, "the QoS 0 SUBACK")
        assert sub.last_error is not None
        assert sub.last_error.startswith("broker granted only QoS 0 for edge/+/detections: ")
        assert "max_qos" in sub.last_error and len(errors(caplog)) == 1
    finally:
        sub.stop(end_session=True)


def test_every_refused_filter_is_named_and_nothing_claims_a_subscription(
    dynsec_broker: Broker, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="edge_agent")
    sub = subscriber(dynsec_broker.port, ["edge/+/detections", "edge/+/status"])
    sub.start()
    try:
        wait_until(lambda: sub.last_error is not None, 15, "a refused SUBACK")
        assert sub.last_error == (
            "broker refused the subscription to edge/+/detections (Not authorized), edge/+/status (Not authorized)"
        )
        assert errors(caplog) == [f"collector: {sub.last_error}"]
        assert not [r for r in caplog.records if r.getMessage().startswith("collector: subscribed to")]
    finally:
        sub.stop(end_session=True)


def test_every_filter_cut_to_qos_0_is_named_with_the_fix(
    qos0_broker: Broker, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="edge_agent")
    sub = subscriber(qos0_broker.port, ["edge/+/detections", "edge/+/status"])
    sub.start()
    try:
        wait_until(lambda: sub.last_error is not None, 15, "the QoS 0 SUBACK")
        assert sub.last_error == (
            "broker granted only QoS 0 for edge/+/detections, edge/+/status: a message in flight when the "
            "collector stops is lost (raise the broker's max_qos to 1)"
        )
        assert errors(caplog) == [f"collector: {sub.last_error}"]
        assert not [r for r in caplog.records if r.getMessage().startswith("collector: subscribed to")]
    finally:
        sub.stop(end_session=True)


def test_a_drop_after_a_refused_filter_is_reported_as_the_drop(
    dynsec_broker: Broker, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="edge_agent")
    sub = subscriber(dynsec_broker.port, ["edge/+/detections"])
    sub.start()
    try:
        wait_until(lambda: sub.last_error is not None, 15, "a refused SUBACK")
        dynsec_broker.stop()  # now the connection itself goes: that is the news
        wait_until(lambda: (sub.last_error or "").startswith("connection lost: "), 15, "the drop")
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert warnings == [f"collector: {sub.last_error}; reconnecting"]
    finally:
        sub.stop(end_session=True)
