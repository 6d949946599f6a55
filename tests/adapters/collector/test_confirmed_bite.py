"""How the collector publishes each device's confirmation (issue 36, the collector-confirmed mutation
run), on a real mosquitto: retained at QoS 1 on ``<prefix>/<device>/confirm`` as encoded, so a
device that (re)connects later still gets its last one; the count is of what paho took (the
collector's ``confirms`` metric), none when the client is not connected."""

from __future__ import annotations

import threading
from typing import Any

import paho.mqtt.client as mqtt
from support import wait_until
from support.mqtt import Broker

from edge_agent.adapters.collector import confirmed
from edge_agent.core.messages.confirm import encode

CONFIRMS = {"d1": encode({1: [(1, 3), (7, 7)]}), "d2": encode({4: [(1, 1)]})}


def connect(port: int, client_id: str) -> mqtt.Client:
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id)
    up = threading.Event()
    client.on_connect = lambda *a: up.set()
    client.connect("127.0.0.1", port, 30)
    client.loop_start()
    assert up.wait(10), f"no CONNACK from 127.0.0.1:{port}"
    return client


def test_each_confirmation_is_published_retained_at_qos_1_and_counted(broker: Broker) -> None:
    pub = connect(broker.port, "collector")
    acked: list[int] = []
    pub.on_publish = lambda client, userdata, mid, *rest: acked.append(mid)
    try:
        assert confirmed.publish(pub, "edge/", CONFIRMS) == 2
        wait_until(lambda: len(acked) == 2, 10, "the broker's PUBACKs of both confirmations")
    finally:
        pub.disconnect()
        pub.loop_stop()
    # a device subscribing after the collector left: the retained message, at the QoS it was sent
    got: list[tuple[str, bytes, int, bool]] = []
    device = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="device")

    def on_message(client: Any, userdata: Any, msg: Any) -> None:
        got.append((msg.topic, bytes(msg.payload), msg.qos, bool(msg.retain)))

    device.on_message = on_message
    device.on_connect = lambda client, *a: client.subscribe("edge/+/confirm", qos=2)
    device.connect("127.0.0.1", broker.port, 30)
    device.loop_start()
    try:
        wait_until(lambda: len(got) >= 2, 10, lambda: f"both retained confirmations, got {got}")
    finally:
        device.disconnect()
        device.loop_stop()
    assert sorted(got) == [
        ("edge/d1/confirm", CONFIRMS["d1"], 1, True),
        ("edge/d2/confirm", CONFIRMS["d2"], 1, True),
    ]


def test_a_client_that_is_not_connected_hands_over_nothing() -> None:
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="collector")
    assert confirmed.publish(client, "edge", CONFIRMS) == 0
    assert confirmed.publish(client, "edge", {}) == 0
