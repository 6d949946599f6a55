"""SyncSession's callbacks and bookkeeping without a broker (in process, so mutation testing reaches
them): paho's reason codes as paho builds them, the events the sync thread waits on, and which
rows each PUBACK gives back."""

from __future__ import annotations

import threading

import paho.mqtt.client as mqtt
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.reasoncodes import ReasonCode

from edge_agent.adapters.mqtt.session import SyncSession
from edge_agent.core.messages.confirm import MAX_PAYLOAD


def fresh() -> tuple[SyncSession, threading.Event]:
    wake = threading.Event()
    return SyncSession(wake), wake


def test_a_new_session_has_nothing_in_flight_and_no_event_set() -> None:
    s, wake = fresh()
    assert s.wake is wake and s.take_acks() == [] and s.unacked() == [] and s.in_flight() == (0, 0)
    assert not (s.answered.is_set() or s.lost.is_set() or s.subscribed.is_set() or wake.is_set())
    assert (s.refused, s.sub_refused) == (None, None)
    assert not (s.acks or s.mids or s.batch_mids or s.status_mids or s.early or s.confirms)
    assert s.confirms.maxlen == 1024


def test_an_accepted_connect_answers_and_wakes_without_a_refusal() -> None:
    s, wake = fresh()
    s.on_connect(None, None, None, ReasonCode(PacketTypes.CONNACK, identifier=0), None)  # type: ignore[arg-type]
    assert s.answered.is_set() and wake.is_set() and s.refused is None and not s.lost.is_set()


def test_a_refused_connect_says_why() -> None:
    s, wake = fresh()
    s.on_connect(None, None, None, ReasonCode(PacketTypes.CONNACK, identifier=0x87), None)  # type: ignore[arg-type]
    assert s.refused == "broker refused the connection: Not authorized"
    assert s.answered.is_set() and wake.is_set()


def test_a_disconnect_is_lost_answered_and_wakes() -> None:
    s, wake = fresh()
    s.on_disconnect(None, None, None, ReasonCode(PacketTypes.DISCONNECT, identifier=0), None)  # type: ignore[arg-type]
    assert s.lost.is_set() and s.answered.is_set() and wake.is_set() and s.refused is None


def test_a_puback_wakes_the_sync_thread_and_gives_its_rows_once() -> None:
    s, wake = fresh()
    assert s.register(5, [1, 2]) is False and s.register(6, [3]) is False
    s.on_publish(None, None, 6, None, None)  # type: ignore[arg-type]
    assert wake.is_set()
    assert s.take_acks() == [3] and s.take_acks() == []  # taken: not given twice
    assert s.unacked() == [1, 2] and s.in_flight() == (1, 0)


def test_the_acks_of_several_pubacks_come_in_order_and_a_batch_leaves_the_batch_count() -> None:
    s, _ = fresh()
    s.register(1, [10, 11], batch=True)
    s.register(2, [12], batch=False)
    s.register(3, [13, 14], batch=True)
    assert s.in_flight() == (3, 2)
    for mid in (3, 1):
        s.on_publish(None, None, mid, None, None)  # type: ignore[arg-type]
    assert s.take_acks() == [13, 14, 10, 11]
    assert s.in_flight() == (1, 0) and s.batch_mids == set() and s.mids == {2: [12]}


def test_an_early_ack_of_a_data_mid_is_matched_once_and_forgotten() -> None:
    s, _ = fresh()
    s.on_publish(None, None, 8, None, None)  # type: ignore[arg-type]
    assert s.take_acks() == [] and s.early == {8}
    assert s.register(8, [80], batch=True) is True
    assert s.early == set() and s.status_mids == set()
    assert s.take_acks() == [80] and s.in_flight() == (0, 0)
    # the mid is reused by a later publish: not acked until its own PUBACK
    assert s.register(8, [81]) is False and s.take_acks() == [] and s.unacked() == [81]


def test_a_status_mid_is_registered_so_its_ack_is_dropped_not_kept() -> None:
    s, _ = fresh()
    assert s.register(4, None) is False and s.status_mids == {4} and s.mids == {}
    s.on_publish(None, None, 4, None, None)  # type: ignore[arg-type]
    assert s.take_acks() == [] and s.status_mids == set() and s.early == set()


def test_a_confirmation_is_queued_as_bytes_and_wakes() -> None:
    s, wake = fresh()
    msg = mqtt.MQTTMessage(topic=b"edge/dev-1/confirm")
    msg.payload = b'{"v": 1}'
    s.on_message(None, None, msg)  # type: ignore[arg-type]
    assert list(s.confirms) == [b'{"v": 1}'] and wake.is_set()
    big = mqtt.MQTTMessage(topic=b"edge/dev-1/confirm")
    big.payload = b"y" * (MAX_PAYLOAD + 5)
    s.on_message(None, None, big)  # type: ignore[arg-type]
    assert s.confirms[-1] == b"y" * (MAX_PAYLOAD + 1)  # cut one past the limit: still refused


def test_a_granted_subscription_is_not_a_refusal() -> None:
    s, wake = fresh()
    s.on_subscribe(None, None, 1, [ReasonCode(PacketTypes.SUBACK, identifier=1)], None)  # type: ignore[arg-type]
    assert s.subscribed.is_set() and wake.is_set() and s.sub_refused is None


def test_a_refused_subscription_names_the_first_refusal() -> None:
    s, wake = fresh()
    reasons = [
        ReasonCode(PacketTypes.SUBACK, identifier=1),
        ReasonCode(PacketTypes.SUBACK, identifier=0x87),
        ReasonCode(PacketTypes.SUBACK, identifier=0x80),
    ]
    s.on_subscribe(None, None, 1, reasons, None)  # type: ignore[arg-type]
    assert s.sub_refused == "the broker refused the subscription to the confirm topic: Not authorized"
    assert s.subscribed.is_set() and wake.is_set()
