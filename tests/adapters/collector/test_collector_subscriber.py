"""The collector's Subscriber in process against a real mosquitto: what exactly-once into the
database rests on. A message is PUBACKed only by ``ack`` (after the commit), so one not acked comes
back after a reconnect; the session outlives a stop (messages published meanwhile wait for it),
unless the collector leaves; an ack for a message of an earlier connection is not sent; the
broker's flow control holds back what was not acked; the credentials and TLS given are used."""

from __future__ import annotations

import logging
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Optional

import paho.mqtt.client as mqtt
import pytest
from support import wait_until
from support.mqtt import Broker, TlsFiles, require_mosquitto

from edge_agent.adapters.collector.subscriber import Inbound, Subscriber
from edge_agent.adapters.mqtt.connect import tls_context
from edge_agent.core.config.schema import MqttConfig

TOPIC = "edge/cam-1/detections"


def make(
    port: int,
    *,
    client_id: str = "col-1",
    keepalive: int = 30,
    expiry: int = 300,
    receive_maximum: int = 100,
    leave: bool = False,
    username: Optional[str] = None,
    password: Optional[str] = None,
    tls: Optional[ssl.SSLContext] = None,
    filters: tuple[str, ...] = ("edge/+/detections",),
) -> Subscriber:
    return Subscriber(
        "127.0.0.1",
        port,
        client_id,
        filters,
        session_expiry_s=expiry,
        receive_maximum=receive_maximum,
        keepalive_s=keepalive,
        username=username,
        password=password,
        tls=tls,
        leave=leave,
    )


class Pub:
    """A plain QoS 1 publisher (its own client id, MQTT 5), waiting for each PUBACK."""

    def __init__(self, port: int, tls: Optional[ssl.SSLContext] = None) -> None:
        self.c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="pub", protocol=mqtt.MQTTv5)
        if tls is not None:
            self.c.tls_set_context(tls)
        self.c.connect("127.0.0.1", port)
        self.c.loop_start()

    def send(self, *bodies: str, qos: int = 1, topic: str = TOPIC) -> None:
        for b in bodies:
            self.c.publish(topic, b.encode(), qos=qos).wait_for_publish(15)

    def close(self) -> None:
        self.c.disconnect()
        self.c.loop_stop()


@pytest.fixture
def pub(broker: Broker) -> Iterator[Pub]:
    p = Pub(broker.port)
    try:
        yield p
    finally:
        p.close()


def subscribed(sub: Subscriber, caplog: pytest.LogCaptureFixture, n: int = 1) -> None:
    """Started and the SUBACK (the n-th of this test) in: from now on a publish reaches it."""
    sub.start()
    wait_until(
        lambda: sum(r.getMessage().startswith("collector: subscribed to ") for r in caplog.records) >= n,
        15,
        "the SUBACK",
    )


def take(sub: Subscriber, n: int) -> list[Inbound]:
    got: list[Inbound] = []
    wait_until(lambda: got.extend(_drain(sub)) or len(got) >= n, 15, lambda: f"{n} messages, got {got}")
    return got


def _drain(sub: Subscriber) -> list[Inbound]:
    out = []
    while not sub.inbox.empty():
        out.append(sub.inbox.get_nowait())
    return out


@pytest.fixture(autouse=True)
def _log(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="edge_agent")


def test_a_message_not_acked_comes_back_after_a_reconnect_and_an_acked_one_does_not(
    broker: Broker, pub: Pub, caplog: pytest.LogCaptureFixture
) -> None:
    sub = make(broker.port)
    subscribed(sub, caplog)
    pub.send("a", "b", "c")
    first = take(sub, 3)
    assert [m.payload for m in first] == [b"a", b"b", b"c"]
    assert all(m.qos == 1 and m.conn == 1 and m.topic == TOPIC for m in first)
    assert sub.ack(first[:1]) == 1  # "a" stored; "b", "c" not (the collector died before the commit)
    wait_until(lambda: sub.ack([]) == 0, 1)  # (the PUBACK goes out on paho's thread)
    sub.stop()
    again = make(broker.port)
    again.start()
    try:
        back = take(again, 2)
        assert [m.payload for m in back] == [b"b", b"c"]
        assert again.ack(back) == 2
        pub.send("d")  # after the redelivered ones: nothing else is on its way
        assert [m.payload for m in take(again, 1)] == [b"d"]
    finally:
        again.stop()


def test_the_connect_is_persistent_with_the_keepalive_given_and_says_so(
    broker: Broker, pub: Pub, caplog: pytest.LogCaptureFixture
) -> None:
    sub = make(broker.port, keepalive=17, filters=("edge/+/detections", "edge/+/status"))
    subscribed(sub, caplog)
    try:
        assert (sub.conn, sub.connects) == (1, 1)
        # mosquitto's notice: protocol 5, clean start 0, keepalive 17
        line = wait_until(
            lambda: [ln for ln in broker.log_text().splitlines() if " as col-1 (" in ln],
            15,
            "the connect line",
        )[-1]
        assert "(p5, c0, k17)" in line
        assert "collector: subscribed to edge/+/detections, edge/+/status" in [
            r.getMessage() for r in caplog.records
        ]
        infos = [r.getMessage() for r in caplog.records if r.getMessage().startswith("collector: connected")]
        assert infos == [
            f"collector: connected to 127.0.0.1:{broker.port} (session present: False), "
            "subscribing to edge/+/detections, edge/+/status"
        ]
        pub.send("q2", qos=2)  # a QoS 2 publish comes down at the subscription's QoS 1
        (m,) = take(sub, 1)
        assert (m.payload, m.qos) == (b"q2", 1) and sub.ack([m]) == 1
    finally:
        sub.stop(end_session=True)


def test_the_session_outlives_a_stop_and_keeps_what_was_published_meanwhile(
    broker: Broker, pub: Pub, caplog: pytest.LogCaptureFixture
) -> None:
    sub = make(broker.port)
    subscribed(sub, caplog)
    sub.stop()
    pub.send("while-down-1", "while-down-2")
    again = make(broker.port)
    again.start()
    try:
        got = take(again, 2)
        assert [m.payload for m in got] == [b"while-down-1", b"while-down-2"]
        assert any("(session present: True)" in r.getMessage() for r in caplog.records)
    finally:
        again.stop()


def test_a_session_without_expiry_is_gone_with_the_connection(
    broker: Broker, pub: Pub, caplog: pytest.LogCaptureFixture
) -> None:
    sub = make(broker.port, expiry=0)
    subscribed(sub, caplog)
    sub.stop()
    pub.send("lost")
    again = make(broker.port, expiry=0)
    subscribed(again, caplog, 2)
    try:
        pub.send("new")
        assert [m.payload for m in take(again, 1)] == [b"new"]
    finally:
        again.stop()


def test_stop_with_end_session_drops_the_session_on_the_broker(
    broker: Broker, pub: Pub, caplog: pytest.LogCaptureFixture
) -> None:
    sub = make(broker.port)
    subscribed(sub, caplog)
    sub.stop(end_session=True)
    pub.send("after-leaving")
    again = make(broker.port)
    subscribed(again, caplog, 2)
    try:
        pub.send("new")
        assert [m.payload for m in take(again, 1)] == [b"new"]
        assert any("(session present: False)" in r.getMessage() for r in caplog.records[-5:])
    finally:
        again.stop()


def test_an_ack_for_a_message_of_an_earlier_connection_is_not_sent(
    broker: Broker, pub: Pub, caplog: pytest.LogCaptureFixture
) -> None:
    sub = make(broker.port)
    subscribed(sub, caplog)
    try:
        pub.send("x")
        (old,) = take(sub, 1)
        broker.stop()  # the connection drops between receive and commit
        wait_until(lambda: not sub.connected.is_set(), 15, "the drop seen")
        assert sub.last_error is not None and sub.last_error.startswith("connection lost: ")
        assert sub.ack([old]) == 0  # not connected
        broker.start()
        wait_until(lambda: sub.connects == 2, 30, "the reconnect")
        (back,) = take(sub, 1)  # the broker sends it again on the new connection
        assert (back.payload, back.conn) == (b"x", 2) and sub.last_error is None
        assert sub.ack([old]) == 0  # its packet id belongs to the old connection
        assert sub.ack([back]) == 1
    finally:
        sub.stop()


def test_the_broker_holds_back_what_exceeds_the_receive_maximum_until_acked(
    broker: Broker, pub: Pub, caplog: pytest.LogCaptureFixture
) -> None:
    sub = make(broker.port, receive_maximum=2)
    subscribed(sub, caplog)
    try:
        pub.send("1", "2", "3", "4", "5")
        pub.send("marker", qos=0)  # QoS 0 is outside the window: it comes at once, after 1 and 2
        got: list[Inbound] = []
        wait_until(lambda: got.extend(_drain(sub)) or b"marker" in [m.payload for m in got], 15, "the marker")
        first = [m for m in got if m.qos == 1]
        assert sub.ack([m for m in got if m.qos == 0]) == 0  # QoS 0 has no PUBACK
        assert [m.payload for m in first] == [b"1", b"2"], "not what receive_maximum lets through"
        rest: list[Inbound] = []
        pending = first
        while len(first) + len(rest) < 5:  # each ack opens the window again
            sub.ack(pending)  # once each: the broker reuses a packet id once it is acked
            pending = take(sub, 1)
            rest += pending
        assert [m.payload for m in first + rest] == [b"1", b"2", b"3", b"4", b"5"]
    finally:
        sub.stop()


def test_leaving_unsubscribes_but_still_gets_what_the_session_queued(
    broker: Broker, pub: Pub, caplog: pytest.LogCaptureFixture
) -> None:
    sub = make(broker.port)
    subscribed(sub, caplog)
    sub.stop()
    pub.send("queued")
    leaving = make(broker.port, leave=True)
    leaving.start()
    try:
        (queued,) = take(leaving, 1)
        assert queued.payload == b"queued" and leaving.ack([queued]) == 1
        wait_until(leaving.unsubscribed.is_set, 15, "the UNSUBACK")
        assert leaving.unsubscribed_at > 0
        assert (
            f"collector: connected to 127.0.0.1:{broker.port} (session present: True), "
            "leaving the group: unsubscribing from edge/+/detections"
        ) in [r.getMessage() for r in caplog.records]
    finally:
        leaving.stop()
    pub.send("after")  # the session has no subscription left: nothing is queued for it
    back = make(broker.port)
    subscribed(back, caplog, 2)
    try:
        pub.send("new")
        assert [m.payload for m in take(back, 1)] == [b"new"]
    finally:
        back.stop(end_session=True)


def test_the_username_and_password_given_are_sent(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    require_mosquitto()
    b = Broker(tmp_path / "auth", users={"collector": "pw"})
    b.start()
    try:
        bad = make(b.port, username="collector", password="nope")
        bad.start()
        wait_until(lambda: bad.last_error is not None, 15, "the refusal")
        bad.stop()
        assert bad.last_error == "broker refused the connection: Not authorized"
        assert [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR] == [
            "collector: broker refused the connection: Not authorized"
        ]
        good = make(b.port, username="collector", password="pw")
        subscribed(good, caplog)
        assert good.last_error is None and good.connected.is_set()
        good.stop(end_session=True)
    finally:
        b.stop()


def test_the_tls_context_given_is_used(
    tls_broker: Broker, tls_files: TlsFiles, caplog: pytest.LogCaptureFixture
) -> None:
    assert tls_broker.tls_port is not None
    ctx = tls_context(
        MqttConfig(
            tls_ca=str(tls_files.ca), tls_cert=str(tls_files.client_cert), tls_key=str(tls_files.client_key)
        )
    )
    sub = make(tls_broker.tls_port, tls=ctx)
    subscribed(sub, caplog)
    p = Pub(tls_broker.port)  # the plain listener
    try:
        p.send("over-tls")
        (m,) = take(sub, 1)
        assert m.payload == b"over-tls" and sub.ack([m]) == 1
    finally:
        p.close()
        sub.stop(end_session=True)


def test_a_topic_that_is_not_utf8_is_kept_under_a_readable_name() -> None:
    sub = make(1)
    msg = mqtt.MQTTMessage(mid=7, topic=b"edge/\xff\xfe/detections")
    msg.payload, msg.qos = b"{}", 1
    sub._on_message(None, None, msg)
    got = sub.inbox.get_nowait()
    assert got._replace(at=0.0) == Inbound("edge/\ufffd\ufffd/detections", b"{}", 7, 1, 0)
    assert got.at > 0  # the receipt time, for the ingest delay metric
