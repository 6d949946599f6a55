"""The collector's MQTT side: an MQTT 5 subscriber with a persistent session that acknowledges a
message only when told to (paho 2.x ``manual_ack``), i.e. after the database commit.

- fixed client id, ``clean_start=False`` and a Session Expiry Interval: while the collector is down
  (a crash, a deploy) the broker keeps its subscription and queues QoS 1 messages for it;
- ``manual_ack=True``: paho sends no PUBACK by itself; un-acked messages are sent again by the
  broker after a reconnect (MQTT 5 section 4.4), so a crash between receive and commit loses nothing;
- Receive Maximum: how many un-acked messages the broker may push before waiting for our acks
  (flow control). Not trusted to bound memory: mosquitto 2.0.11 did not enforce it (78,108
  un-acked messages in the inbox; 30 messages of 10 MB took the collector from 89 to 1,062 MB
  RSS), so the inbox is bounded in bytes (:class:`Inbox`): when full, paho's thread waits in
  ``on_message``, stops reading the socket, and TCP holds the broker. That cannot hold up the acks:
  the writer takes a round out of the inbox before it commits and acks, and ``client.ack`` only
  queues the PUBACK (no lock paho's thread holds in a callback). A payload over ``message_max``
  is not kept at all: it becomes a small rejection at once;
- every connection has a number: an ack for a message received on an earlier connection is not
  sent (packet ids restart; the broker sends that message again and the insert is idempotent);
- ``leave=True`` (``collect --leave``): the same session, but UNSUBSCRIBE instead of SUBSCRIBE, so
  the group stops dealing this member a share while what is queued for it still arrives; then
  ``stop(end_session=True)`` ends the session (DISCONNECT with Session Expiry Interval 0).
"""

from __future__ import annotations

import logging
import queue
import ssl
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, NamedTuple, Optional

import paho.mqtt.client as mqtt
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from edge_agent.adapters.mqtt.connect import suback_problems

if TYPE_CHECKING:
    from paho.mqtt.client import Client, ConnectFlags, DisconnectFlags, MQTTMessage
    from paho.mqtt.reasoncodes import ReasonCode

log = logging.getLogger("edge_agent.collector")


class Inbound(NamedTuple):
    topic: str
    payload: bytes
    mid: int
    qos: int
    conn: int  # the connection it arrived on
    size: int = -1  # >= 0: the payload had this many bytes, over message_max, and was dropped
    at: float = 0.0  # time.monotonic() when it was received (0: unknown): the ingest delay metric


OVERHEAD = 256  # bytes counted per message besides its payload (the tuple, the topic, paho's object)


class Inbox:
    """A FIFO bounded in bytes: ``put`` waits while it is full (at least one message always fits,
    so no message is too big to pass); ``get``/``get_nowait`` raise queue.Empty like queue.Queue."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self.peak = 0
        self.waits = 0  # how often the reader had to wait (back-pressure applied)
        self._items: deque[tuple[Inbound, int]] = deque()
        self._cond = threading.Condition()
        self._closed = False

    def put(self, item: Inbound) -> bool:
        """False if the inbox was closed while waiting (the message is not kept: never acked)."""
        n = len(item.payload) + len(item.topic) + OVERHEAD
        with self._cond:
            if self._items and self.bytes + n > self.max_bytes and not self._closed:
                self.waits += 1
                while self._items and self.bytes + n > self.max_bytes and not self._closed:
                    self._cond.wait(1.0)
            if self._closed:
                return False
            self._items.append((item, n))
            self.bytes += n
            self.peak = max(self.peak, self.bytes)
            self._cond.notify_all()
            return True

    def get(self, timeout: float) -> Inbound:
        with self._cond:
            if not self._items:
                self._cond.wait(timeout)
            return self._pop()

    def get_nowait(self) -> Inbound:
        with self._cond:
            return self._pop()

    def _pop(self) -> Inbound:
        if not self._items:
            raise queue.Empty
        item, n = self._items.popleft()
        self.bytes -= n
        self._cond.notify_all()
        return item

    def qsize(self) -> int:
        return len(self._items)

    def empty(self) -> bool:
        return not self._items

    def close(self) -> None:
        """Wake a waiting ``put`` for good (stop: paho's thread must be joinable)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()


class Subscriber:
    """Puts every message into :attr:`inbox`; :meth:`ack` sends the PUBACKs after a commit."""

    def __init__(
        self,
        host: str,
        port: int,
        client_id: str,
        filters: Sequence[str],
        *,
        session_expiry_s: int,
        receive_maximum: int,
        keepalive_s: int = 30,
        username: Optional[str] = None,
        password: Optional[str] = None,
        tls: Optional[ssl.SSLContext] = None,
        leave: bool = False,
        inbox_bytes: int = 64 * 1024 * 1024,
        message_max: int = 16 * 1024 * 1024,
    ) -> None:
        self.host, self.port, self.filters = host, port, list(filters)
        self.message_max = message_max
        self.leave = leave
        self.unsubscribed = threading.Event()  # leave: the broker confirmed the UNSUBSCRIBE
        self.unsubscribed_at = 0.0
        self.keepalive_s = keepalive_s
        self.inbox = Inbox(inbox_bytes)
        # topics acknowledged and dropped on arrival (the collector's own confirmations, which its
        # <prefix>/+/+ subscription brings back); set by the owner
        self.ignore: Optional[Callable[[str], bool]] = None
        self.connected = threading.Event()
        self.conn = 0
        self.connects = 0
        self.last_error: Optional[str] = None
        self._lock = threading.Lock()
        c = mqtt.Client(
            mqtt.CallbackAPIVersion.VERSION2, client_id=client_id, protocol=mqtt.MQTTv5, manual_ack=True
        )
        c.reconnect_delay_set(1, 30)
        if username is not None:
            c.username_pw_set(username, password)
        if tls is not None:
            c.tls_set_context(tls)
        c.on_connect = self._on_connect
        c.on_disconnect = self._on_disconnect
        c.on_message = self._on_message
        c.on_unsubscribe = self._on_unsubscribe
        c.on_subscribe = self._on_subscribe
        self.props = Properties(PacketTypes.CONNECT)
        self.props.SessionExpiryInterval = session_expiry_s
        self.props.ReceiveMaximum = receive_maximum
        self.client = c

    def start(self) -> None:
        """Connect in the background; paho reconnects by itself, with the same session."""
        self.client.connect_async(
            self.host, self.port, self.keepalive_s, clean_start=False, properties=self.props
        )
        self.client.loop_start()

    def stop(self, end_session: bool = False) -> None:
        """Disconnect; ``end_session``: the broker drops the session (and this member of its group)."""
        props = None
        if end_session:
            props = Properties(PacketTypes.DISCONNECT)
            props.SessionExpiryInterval = 0
        self.inbox.close()  # paho's thread may wait in on_message for room
        self.client.disconnect(properties=props)
        self.client.loop_stop()

    def ack(self, msgs: Sequence[Inbound]) -> int:
        """PUBACK every message received on the current connection; returns how many."""
        sent = 0
        with self._lock:
            for m in msgs:
                if m.qos > 0 and m.conn == self.conn and self.connected.is_set():
                    self.client.ack(m.mid, m.qos)
                    sent += 1
        return sent

    # ---- paho's thread --------------------------------------------------------------------
    def _on_connect(
        self,
        client: Client,
        userdata: object,
        flags: ConnectFlags,
        reason: ReasonCode,
        props: Optional[Properties],
    ) -> None:
        if reason.is_failure:
            self.last_error = f"broker refused the connection: {reason}"
            log.error("collector: %s", self.last_error)
            return
        with self._lock:
            self.conn += 1
            self.connects += 1
        self.last_error = None
        log.info(
            "collector: connected to %s:%d (session present: %s), %s %s",
            self.host,
            self.port,
            bool(flags.session_present),
            "leaving the group: unsubscribing from" if self.leave else "subscribing to",
            ", ".join(self.filters),
        )
        if self.leave:  # what the session queued still comes; nothing new is dealt to us
            client.unsubscribe(self.filters)
        else:
            client.subscribe([(f, 1) for f in self.filters])
        self.connected.set()

    def _on_subscribe(
        self,
        client: Client,
        userdata: object,
        mid: int,
        reasons: list[ReasonCode],
        props: Optional[Properties],
    ) -> None:
        # Only the SUBACK tells a refused filter (a broker ACL) or a QoS cut to 0 (`max_qos 0`): the
        # first leaves the collector waiting for messages that never come, the second loses the
        # message in flight when it dies (QoS 0 is never redelivered). Both must be seen.
        refused, qos0 = suback_problems(self.filters, reasons)
        if refused:
            self.last_error = "broker refused the subscription to " + ", ".join(refused)
            log.error("collector: %s", self.last_error)
        if qos0:
            self.last_error = (
                f"broker granted only QoS 0 for {', '.join(qos0)}: a message in flight when the "
                "collector stops is lost (raise the broker's max_qos to 1)"
            )
            log.error("collector: %s", self.last_error)
        if not refused and not qos0:
            log.info("collector: subscribed to %s", ", ".join(self.filters))

    def _on_unsubscribe(
        self,
        client: Client,
        userdata: object,
        mid: int,
        reasons: list[ReasonCode],
        props: Optional[Properties],
    ) -> None:
        self.unsubscribed_at = time.monotonic()
        self.unsubscribed.set()

    def _on_disconnect(
        self,
        client: Client,
        userdata: object,
        flags: DisconnectFlags,
        reason: ReasonCode,
        props: Optional[Properties],
    ) -> None:
        was_up = self.connected.is_set()
        self.connected.clear()
        # after a refused CONNACK paho reports "Protocol error" here: the refusal is the cause
        if reason.is_failure and (was_up or self.last_error is None):
            self.last_error = f"connection lost: {reason}"
            log.warning("collector: %s; reconnecting", self.last_error)

    def _on_message(self, client: Client, userdata: object, msg: MQTTMessage) -> None:
        try:
            topic = msg.topic
        except UnicodeDecodeError:  # not UTF-8: stored as rejected under a readable name
            topic = bytes(msg._topic).decode("utf-8", "replace")
        if self.ignore is not None and self.ignore(topic):  # e.g. our own confirmations
            if msg.qos > 0:
                client.ack(msg.mid, msg.qos)
            return
        if len(msg.payload) > self.message_max:  # not kept: a small rejection record instead
            self.inbox.put(
                Inbound(
                    topic[:1024],
                    b"",
                    int(msg.mid),
                    int(msg.qos),
                    self.conn,
                    len(msg.payload),
                    time.monotonic(),
                )
            )
            return
        self.inbox.put(
            Inbound(topic, bytes(msg.payload), int(msg.mid), int(msg.qos), self.conn, at=time.monotonic())
        )
