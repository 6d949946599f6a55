"""MQTT sync: publishes outbox rows with QoS 1 and deletes a row only after the broker's PUBACK.

paho-mqtt keeps its own queue in RAM, so it is never trusted with durability: each connection gets
a fresh ``paho.mqtt.client.Client`` (``reconnect_on_failure=False``, ``loop_start()`` network
thread) and a fresh mid -> row map. Message ids (mids) restart per connection and are never a
durable key; when the connection drops, un-acked rows go back to pending and the next connection
sends them again (same message id in the payload, so consumers de-duplicate). Reconnects use a
capped exponential backoff. The agent loop only ever calls ``Outbox.put()``, never this module.
"""

from __future__ import annotations

import itertools
import logging
import random
import ssl
import threading
import time
from collections.abc import Callable
from typing import Any, Optional

import paho.mqtt.client as mqtt

from edge_agent.adapters.mqtt.confirms import Confirmations
from edge_agent.adapters.mqtt.connect import describe_connect_error, login, read_password, tls_context
from edge_agent.adapters.mqtt.session import SyncSession
from edge_agent.adapters.outbox.outbox import Outbox
from edge_agent.core.config.schema import MqttConfig
from edge_agent.core.messages.batch import batch_topic, kind_of, pack
from edge_agent.core.messages.builders import encode, offline_status, topics
from edge_agent.core.queue.backoff import backoff_delay
from edge_agent.core.queue.policy import TokenBucket
from edge_agent.errors import QueueError, SyncError

log = logging.getLogger("edge_agent.mqtt")
IDLE_POLL_S = 0.25
STOP_GRACE_S = 2.0
BATCHES_IN_FLIGHT = 2  # batches awaiting their PUBACK: more only made each claim skip more rows
# confirm = "collector": each PUBACK costs an UPDATE (the row becomes SENT) and each confirmation a
# DELETE, and the confirmations arrive on the same connection: with 2 batches in flight the
# pipeline stalled (a 50,000-row drain to an instant confirmer: 24-28k results/s vs 52-72k with
# PUBACK deletes; with 8 in flight 48-58k). The claim skips rows in flight with NOT BETWEEN, so
# more in flight costs the claim nothing; 8 x batch_max_kib stay in paho's memory at most.
CONFIRM_BATCHES_IN_FLIGHT = 8


class MqttSync:
    """Drains an :class:`Outbox` to the broker on a thread of its own; see module docstring."""

    def __init__(
        self,
        cfg: MqttConfig,
        device_id: str,
        outbox: Outbox,
        status_fn: Optional[Callable[[], dict[str, Any]]] = None,
    ) -> None:
        """``status_fn`` gives the agent's latest status snapshot (core.status): published retained
        on every connect and used, with ``state = "offline"``, as the last will. The periodic
        publish is the agent's one status timer calling :meth:`publish_status`."""
        self.cfg = cfg
        self.device_id = device_id
        self.outbox = outbox
        self.status_fn = status_fn
        self.status_topic = topics(cfg.topic_prefix, device_id).status  # results carry their own topic
        self.batch_topic = batch_topic(cfg.topic_prefix, device_id)
        self.confirm = Confirmations(cfg, device_id, outbox)
        self.state = "disabled" if not cfg.enabled else "disconnected"
        self.last_sync: Optional[float] = None
        self.last_error: Optional[str] = None
        self.connect_attempts = 0
        self._status_seq = itertools.count(1)  # next() is atomic in CPython: any thread may publish
        self.connects = 0
        self.published = 0
        self.acked = 0
        self.thread_restarts = 0
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._progress = threading.Condition()
        self._client: Optional[mqtt.Client] = None
        self._session_state: Optional[SyncSession] = None
        self._thread: Optional[threading.Thread] = None
        self._password: Optional[str] = None
        self._tls: Optional[ssl.SSLContext] = None

    def start(self) -> None:
        """Validate credentials/TLS files (SyncError if unusable) and start the sync thread."""
        if not self.cfg.enabled or self._thread is not None:
            return
        if self.cfg.role_usernames and self.cfg.username != self.device_id:
            # the broker's ACL grants <prefix>/<id>/... to the user named <id>: under another name
            # every publish is dropped by the broker after its PUBACK, and the device deletes it
            raise SyncError(
                f"mqtt.role_usernames = true needs mqtt.username = the device id {self.device_id!r}, "
                f"got {self.cfg.username!r} (`fleet enroll` names a device's broker users after its id)"
            )
        self._password = read_password(self.cfg)
        self._tls = tls_context(self.cfg)
        self._stop.clear()
        self._thread = threading.Thread(target=self._supervise, name="mqtt-sync", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Publish "offline", disconnect, and return un-acked rows to pending."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def drain(self, timeout_s: float) -> bool:
        """Block until every queued message is acknowledged (True) or ``timeout_s`` passes (False).

        False at once while no sync thread runs (never started, stopped, ended): nothing would
        acknowledge the rest, and waiting out ``timeout_s`` only delayed a shutdown for nothing."""
        deadline = time.monotonic() + timeout_s
        self.outbox.flush()
        with self._progress:
            while self.outbox.pending() > 0:
                left = deadline - time.monotonic()
                thread = self._thread
                if left <= 0 or thread is None or not thread.is_alive():
                    return False
                self._progress.wait(min(left, IDLE_POLL_S))
                self.outbox.flush()
        return True

    def stats(self) -> dict[str, Any]:
        """The broker part of the status snapshot."""
        out: dict[str, Any] = {
            "state": self.state,
            "last_sync": self.last_sync,
            "last_error": self.last_error,
            "connect_attempts": self.connect_attempts,
            "connects": self.connects,
            "published": self.published,
            "acked": self.acked,
            "thread_restarts": self.thread_restarts,
        }
        if self.confirm.enabled:  # confirm = "puback": the snapshot stays as it was
            out["confirm"] = self.confirm.stats()
        return out

    def _stamp(self, body: dict[str, Any]) -> dict[str, Any]:
        """The order of what this process publishes on the status topic, for the collector (which
        must not order statuses by the device's clock): ``link`` = the connection it goes out on
        (the last will is stamped for the connection it is set on), ``status_seq`` = +1 per status
        of this boot. The will of link k then beats the statuses sent on link k, and loses to k+1."""
        return {**body, "link": self.connect_attempts, "status_seq": next(self._status_seq)}

    def publish_status(self, snapshot: dict[str, Any]) -> bool:
        """Publish ``snapshot`` (a core.status body) retained on the status topic, if connected."""
        client, session = self._client, self._session_state
        if client is None or session is None or self.state != "connected":
            return False
        info = client.publish(self.status_topic, encode(self._stamp(snapshot)), qos=1, retain=True)
        if info.rc != mqtt.MQTT_ERR_SUCCESS:
            return False
        session.register(info.mid, None)
        return True

    # ---- sync thread -----------------------------------------------------------------------
    def _supervise(self) -> None:
        """Run the sync loop; any exception is logged, counted, shown in status, and the loop
        restarts with backoff -- the thread never dies silently (a 70 000-char topic once did)."""
        while not self._stop.is_set():
            try:
                self._run()
                return
            except Exception as exc:  # supervision: every failure is reported
                self.thread_restarts += 1
                self.last_error = f"sync thread failed: {type(exc).__name__}: {exc}"
                self.state = "restarting"
                log.error("mqtt sync: %s (restart %d)", self.last_error, self.thread_restarts)
                log.debug("mqtt sync failure", exc_info=True)
                self._client = self._session_state = None
                self.outbox.release()  # un-acked rows go back to pending
                delay = backoff_delay(
                    self.thread_restarts,
                    self.cfg.reconnect_min_s,
                    self.cfg.reconnect_max_s,
                    0.5,
                    random.random(),
                )
                if self._stop.wait(delay):
                    break
        self.state = "disconnected"

    def _run(self) -> None:
        failures = 0
        while not self._stop.is_set():
            if failures:
                # jittered: after an outage a fleet spreads its reconnects instead of one storm
                delay = backoff_delay(
                    failures, self.cfg.reconnect_min_s, self.cfg.reconnect_max_s, 0.5, random.random()
                )
                self.state = "disconnected"
                if self._stop.wait(delay):
                    break
            self.state = "connecting"
            try:
                lasted = self._session()
            except QueueError as exc:  # the outbox failed: back off, try again
                log.error("mqtt sync: outbox error: %s", exc)
                self.last_error = f"outbox error: {exc}"
                lasted = None
            failures = next_failures(failures, lasted, self.cfg.reconnect_max_s)
        self.state = "disconnected"

    def _new_client(self, session: SyncSession) -> mqtt.Client:
        client = mqtt.Client(
            mqtt.CallbackAPIVersion.VERSION2,
            client_id=self.device_id,
            clean_session=True,
            reconnect_on_failure=False,
        )
        client.max_inflight_messages_set(self.cfg.inflight)
        client.max_queued_messages_set(0)
        user = login(self.cfg, "sync")
        if user is not None:
            client.username_pw_set(user, self._password)
        if self._tls is not None:
            client.tls_set_context(self._tls)
        if self.status_fn is not None:
            will = self._stamp(offline_status(self.status_fn()))
            client.will_set(self.status_topic, encode(will), qos=1, retain=True)
        client.on_connect = session.on_connect
        client.on_disconnect = session.on_disconnect
        client.on_publish = session.on_publish
        client.on_message = session.on_message
        client.on_subscribe = session.on_subscribe
        return client

    def _session(self) -> Optional[float]:
        """One connection from CONNECT to loss or stop; how long it lasted, None if refused."""
        session = SyncSession(self._wake)
        self.connect_attempts += 1  # before the client: its last will is stamped with this link
        client = self._new_client(session)
        try:
            client.connect(self.cfg.host, self.cfg.port, self.cfg.keepalive_s)
        except OSError as exc:
            self._failed(describe_connect_error(self.cfg, exc))
            return None
        client.loop_start()
        deadline = time.monotonic() + max(10.0, float(self.cfg.keepalive_s))
        while not session.answered.wait(0.1):
            if self._stop.is_set() or time.monotonic() > deadline:
                break
        if session.refused or session.lost.is_set() or not session.answered.is_set():
            client.disconnect()
            client.loop_stop()
            self._failed(session.refused or f"no CONNACK from {self.cfg.host}:{self.cfg.port}")
            return None
        self.state = "connected"
        since = time.monotonic()
        self._client, self._session_state = client, session
        self.connects += 1
        self.last_error = None
        log.info("connected to mqtt %s:%d as %s", self.cfg.host, self.cfg.port, self.device_id)
        try:
            self.confirm.subscribe(client, session)
            if self.status_fn is not None:
                self.publish_status(self.status_fn())
            self._pump(client, session)
        finally:
            self._end_session(client, session)
        return time.monotonic() - since

    def _failed(self, reason: str) -> None:
        self.last_error = reason
        log.warning("mqtt: %s; retrying", reason)

    def _pump(self, client: mqtt.Client, session: SyncSession) -> None:
        bucket = TokenBucket(self.cfg.rate_limit_per_s, time.monotonic())
        grace: Optional[float] = None
        while True:
            self._wake.clear()
            confirmed = self.confirm.rows
            refused = self.confirm.apply(session)
            if refused:
                self.last_error = refused
            if self.confirm.rows != confirmed:  # rows deleted: a drain() waiting on them wakes now
                with self._progress:
                    self._progress.notify_all()
            acked = session.take_acks()
            lost, stopping = session.lost.is_set(), self._stop.is_set()  # read once: flags flip any time
            batching = not (lost or stopping) and self._batching()
            if not (batching and acked):
                self._ack_rows(acked)  # else deleted with the next claim (_send_batches)
                acked = []
            if lost:
                log.warning("mqtt: connection to %s:%d lost", self.cfg.host, self.cfg.port)
                return
            now = time.monotonic()
            if stopping:  # stop sending; give in-flight messages a moment for their PUBACK
                grace = grace if grace is not None else now + STOP_GRACE_S
                if not session.in_flight()[0] or now >= grace:
                    return
                self._wake.wait(0.05)
                continue
            publishes, batches = session.in_flight()
            if batching:
                most = CONFIRM_BATCHES_IN_FLIGHT if self.confirm.enabled else BATCHES_IN_FLIGHT
                room = min(most - batches, bucket.available(now))
                if room <= 0:
                    self._ack_rows(acked)
                sent = self._send_batches(client, session, room, acked) if room > 0 else 0
            else:
                room = min(self.cfg.inflight - publishes, bucket.available(now))
                sent = self._send(client, session, room) if room > 0 else 0
            bucket.take(sent)
            if sent and sent == room:
                continue  # a full batch went out: more may be waiting
            self._wake.wait(min(bucket.wait_s() or IDLE_POLL_S, IDLE_POLL_S))

    def _send(self, client: mqtt.Client, session: SyncSession, n: int) -> int:
        msgs = self.outbox.claim(n, self.cfg.newest_first)
        for i, msg in enumerate(msgs):
            info = client.publish(msg.topic, msg.payload, qos=1)
            if info.rc != mqtt.MQTT_ERR_SUCCESS:
                self.outbox.release([m.rowid for m in msgs[i:]])
                session.lost.set()
                return i
            if session.register(info.mid, [msg.rowid]):  # its PUBACK came before publish() returned
                self._wake.set()
        self.published += len(msgs)
        return len(msgs)

    def _batching(self) -> bool:
        """Batched sync (``batch_threshold``): 1 = always, N = while at least N messages wait."""
        t = self.cfg.batch_threshold
        return t > 0 and (t == 1 or self.outbox.pending() >= t)

    def _send_batches(self, client: mqtt.Client, session: SyncSession, n: int, acked: list[int]) -> int:
        """Up to ``n`` batches (core.batch); each one's rows are deleted only after its PUBACK.
        ``acked``: rows of PUBACKs just received, deleted in the same transaction as the first
        claim (Outbox.ack_and_claim: one commit instead of two)."""
        for k in range(n):
            if k == 0 and acked:
                msgs = self.outbox.ack_and_claim(acked, self.cfg.batch_max_messages, self.cfg.newest_first)[1]
                self._ack_rows(acked, deleted=True)
            else:
                msgs = self.outbox.claim(self.cfg.batch_max_messages, self.cfg.newest_first)
            if not msgs:
                return k
            packed = pack([(kind_of(m.topic), m.payload) for m in msgs], self.cfg.batch_max_kib * 1024)
            rowids = [m.rowid for m in msgs[: packed.rows]]
            if packed.rows < len(msgs):
                self.outbox.release([m.rowid for m in msgs[packed.rows :]])
            info = client.publish(self.batch_topic, packed.payload, qos=1)
            if info.rc != mqtt.MQTT_ERR_SUCCESS:
                self.outbox.release(rowids)
                session.lost.set()
                return k
            if session.register(info.mid, rowids, batch=True):
                self._wake.set()
            self.published += len(rowids)
        return n

    def _apply_acks(self, session: SyncSession) -> None:
        self._ack_rows(session.take_acks())

    def _ack_rows(self, rowids: list[int], deleted: bool = False) -> None:
        """Delete acknowledged rows (unless ``deleted`` already) and count them."""
        if rowids:
            if not deleted:
                self.outbox.ack(rowids)
            self.acked += len(rowids)
            self.last_sync = time.time()
            with self._progress:
                self._progress.notify_all()

    def _end_session(self, client: mqtt.Client, session: SyncSession) -> None:
        if self._stop.is_set() and not session.lost.is_set():
            if self.status_fn is not None:
                self._apply_acks(session)  # first: the goodbye counts the queue as it is (issue 33)
                body = self._stamp(offline_status(self.status_fn()))
                info = client.publish(self.status_topic, encode(body), qos=1, retain=True)
                # rc is an error when the connection died since the check above: a drop at the
                # stop, not a sync failure (wait_for_publish would raise it as RuntimeError)
                if info.rc == mqtt.MQTT_ERR_SUCCESS:
                    info.wait_for_publish(1.0)
            client.disconnect()
        client.loop_stop()
        self._client = self._session_state = None
        self._apply_acks(session)  # PUBACKs that arrived before the socket closed still count
        unacked = session.unacked()
        if unacked:
            self.outbox.release(unacked)
            log.info("mqtt: %d un-acked messages back to pending", len(unacked))
        self.state = "disconnected"


def next_failures(failures: int, lasted: Optional[float], stable_s: float) -> int:
    """The backoff step after a session: a refused or failed connect adds one, and so does a drop
    soon after connecting (a broker that kicks us, two devices with one id): only a connection that
    lasted ``stable_s`` (the longest backoff) starts again from the first step. Every drop is
    followed by at least one backoff delay, never an immediate reconnect."""
    if lasted is not None and lasted >= stable_s:
        return 1
    return failures + 1
