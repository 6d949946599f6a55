"""One MQTT sync connection's bookkeeping: which outbox rows each paho mid carries (one result or a
batch's rows), PUBACKs that arrive before ``publish()`` returned, and the connection's events. The
callbacks run on paho's thread and only append and signal; the sync thread takes the acks."""

from __future__ import annotations

import threading
from collections import deque
from typing import TYPE_CHECKING, Optional

from edge_agent.core.messages.confirm import MAX_PAYLOAD

if TYPE_CHECKING:
    from paho.mqtt.client import Client, ConnectFlags, DisconnectFlags, MQTTMessage
    from paho.mqtt.properties import Properties
    from paho.mqtt.reasoncodes import ReasonCode


class SyncSession:
    """State of one connection; the callbacks run on paho's thread and only append and signal.

    A PUBACK can be handled on paho's thread before ``publish()`` has even returned the mid to us
    (loopback, a busy GIL): such an ack is kept in ``early`` until its mid is registered, instead
    of being taken for a status publish and dropped (the row was then resent on the next
    connection). Status mids are registered too, so an ack never stays unmatched to meet a later
    data publish that reuses its mid.
    """

    def __init__(self, wake: threading.Event) -> None:
        self.wake = wake
        self.acks: deque[int] = deque()
        # paho mid -> the outbox row ids it carries (one, or a batch's: core.batch); valid for this
        # connection only
        self.mids: dict[int, list[int]] = {}
        self.batch_mids: set[int] = set()  # which of ``mids`` are batches
        self.status_mids: set[int] = set()
        self.early: set[int] = set()  # acked mids not registered yet
        self.lock = threading.Lock()  # mids/status_mids/early; never held while calling paho
        self.answered = threading.Event()
        self.refused: Optional[str] = None
        self.lost = threading.Event()
        # [mqtt] confirm = "collector": the confirmation messages received (decoded by the sync
        # thread, bounded: paho hands us at most what the broker sends on one retained topic)
        self.confirms: deque[bytes] = deque(maxlen=1024)
        self.subscribed = threading.Event()  # its SUBACK came (granted or refused)
        self.sub_refused: Optional[str] = None

    def register(self, mid: int, rowids: Optional[list[int]], batch: bool = False) -> bool:
        """Remember what ``mid`` carries (``rowids`` None: a status); True if it was acked already."""
        with self.lock:
            early = mid in self.early
            self.early.discard(mid)
            if rowids is not None:
                self.mids[mid] = rowids
                if batch:
                    self.batch_mids.add(mid)
                if early:  # matched by the next take_acks
                    self.acks.append(mid)
            elif not early:
                self.status_mids.add(mid)
            return early

    def take_acks(self) -> list[int]:
        """Row ids of the PUBACKs received so far (status acks and early ones set aside)."""
        rowids: list[int] = []
        with self.lock:
            while self.acks:
                mid = self.acks.popleft()
                carried = self.mids.pop(mid, None)
                if carried is not None:
                    rowids.extend(carried)
                    self.batch_mids.discard(mid)
                elif mid in self.status_mids:
                    self.status_mids.discard(mid)
                else:
                    self.early.add(mid)
        return rowids

    def unacked(self) -> list[int]:
        with self.lock:
            return [r for rows in self.mids.values() for r in rows]

    def in_flight(self) -> tuple[int, int]:
        """(publishes awaiting their PUBACK, how many of them are batches)."""
        with self.lock:
            return len(self.mids), len(self.batch_mids)

    def on_connect(
        self,
        client: Client,
        userdata: object,
        flags: ConnectFlags,
        reason: ReasonCode,
        props: Optional[Properties],
    ) -> None:
        if reason.is_failure:
            self.refused = f"broker refused the connection: {reason}"
        self.answered.set()
        self.wake.set()

    def on_disconnect(
        self,
        client: Client,
        userdata: object,
        flags: DisconnectFlags,
        reason: ReasonCode,
        props: Optional[Properties],
    ) -> None:
        self.lost.set()
        self.answered.set()
        self.wake.set()

    def on_publish(
        self, client: Client, userdata: object, mid: int, reason: ReasonCode, props: Optional[Properties]
    ) -> None:
        self.acks.append(mid)
        self.wake.set()

    def on_message(self, client: Client, userdata: object, msg: MQTTMessage) -> None:
        # cut past the size decode() takes: it is still refused and counted, but 1024 queued
        # confirmations of a forger's 10 MB each never hold 10 GB
        self.confirms.append(bytes(msg.payload[: MAX_PAYLOAD + 1]))
        self.wake.set()

    def on_subscribe(
        self,
        client: Client,
        userdata: object,
        mid: int,
        reasons: list[ReasonCode],
        props: Optional[Properties],
    ) -> None:
        """The SUBACK of the confirm topic (the sync's one SUBSCRIBE: matched without its mid, which
        may come back before ``subscribe()`` returned it): a refusal (an ACL, 0x80) is kept."""
        bad = [r for r in reasons if r.is_failure]
        if bad:
            self.sub_refused = f"the broker refused the subscription to the confirm topic: {bad[0]}"
        self.subscribed.set()
        self.wake.set()
