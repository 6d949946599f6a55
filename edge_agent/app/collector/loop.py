"""The collector's loop: take what the subscriber received, store it in one transaction, commit,
and only then acknowledge it to the broker.

One writer thread. A round takes up to ``batch_max`` messages (whatever arrived; it never waits
for a batch to fill), parses them (core.fleet), stores records, statuses, events and rejections
in one transaction and acks them all. A database error leaves the round un-acked and retries it
with backoff (reconnecting to PostgreSQL); if the process dies instead, the broker sends the same
messages again and the idempotent insert counts them as duplicates.
"""

from __future__ import annotations

import logging
import queue
import ssl
import threading
import time
from collections import deque
from typing import Optional

from edge_agent.adapters.collector import confirmed
from edge_agent.adapters.collector.db import CollectorDb, DbError, Rejected
from edge_agent.adapters.collector.subscriber import Inbound, Subscriber
from edge_agent.core.config.collector import CollectorConfig, broker_address
from edge_agent.core.config.schema import MqttConfig
from edge_agent.core.messages.confirm import is_confirm_topic
from edge_agent.core.messages.fleet import DeviceStatus, Event, IngestError, Record, parse, subscriptions

log = logging.getLogger("edge_agent.collector")
RATE_WINDOW_S = 10.0
ONLINE_EVERY_S = 5.0


class Metrics:
    """Counters for Prometheus; written by the writer thread, read by the HTTP thread."""

    def __init__(self) -> None:
        self.taken = 0  # MQTT messages taken from the inbox (committed or not)
        self.messages = 0  # MQTT messages committed and acknowledged
        self.records = 0  # results/readings stored
        self.duplicates = 0
        self.rejected = 0
        self.db_errors = 0
        self.lag_s = 0.0  # receive time - device time of the newest record stored
        self.devices_online = 0
        self.rounds = 0
        self.confirms = 0  # commit watermarks published (one per device per round)
        self._window: deque[tuple[float, int]] = deque()

    def stored(self, now: float, n: int) -> None:
        self._window.append((now, n))
        while self._window and self._window[0][0] < now - RATE_WINDOW_S:
            self._window.popleft()

    def rate(self, now: float) -> float:
        recent = [n for t, n in list(self._window) if t >= now - RATE_WINDOW_S]
        return sum(recent) / RATE_WINDOW_S

    def values(self, inbox: int, connected: bool) -> dict[str, float]:
        now = time.monotonic()
        return {
            "collector_taken_total": self.taken,
            "collector_messages_total": self.messages,
            "collector_records_total": self.records,
            "collector_duplicates_dropped_total": self.duplicates,
            "collector_rejected_total": self.rejected,
            "collector_db_errors_total": self.db_errors,
            "collector_ingest_rate_per_s": round(self.rate(now), 1),
            "collector_lag_s": round(self.lag_s, 3),
            "collector_devices_online": self.devices_online,
            "collector_confirms_total": self.confirms,
            "collector_inbox": inbox,
            "collector_broker_connected": 1.0 if connected else 0.0,
        }


class Collector:
    def __init__(
        self,
        cfg: CollectorConfig,
        password: Optional[str],
        tls: Optional[ssl.SSLContext],
        leave_quiet_s: Optional[float] = None,
    ) -> None:
        """``leave_quiet_s``: leave the group (``collect --leave``): store what the broker queued
        for this client id, and once nothing has come for that long, end the session."""
        self.cfg = cfg
        self.leave_quiet_s = leave_quiet_s
        self.left = False
        host, port, _ = broker_address(cfg.broker)
        self.db = CollectorDb(cfg.db)
        self.metrics = Metrics()
        self.sub = Subscriber(
            host,
            port,
            cfg.client_id,
            subscriptions(cfg.prefix, cfg.group or None),
            session_expiry_s=cfg.session_expiry_s,
            receive_maximum=cfg.receive_maximum,
            keepalive_s=cfg.keepalive_s,
            username=cfg.username,
            password=password,
            tls=tls,
            leave=leave_quiet_s is not None,
        )
        self._online_at = 0.0
        prefix = cfg.prefix
        self.sub.ignore = lambda topic: is_confirm_topic(prefix, topic)  # ours, back through <prefix>/+/+

    def run(self, stop: threading.Event) -> None:
        try:
            version = self.db.migrate()
        except self.db.errors() as exc:  # one line; the URL (it may hold a password) is not shown
            raise DbError(f"{self.db.dialect}: cannot apply the collector schema: {exc}") from None
        log.info("collector: database %s at schema version %d", self.db.dialect, version)
        self.sub.start()
        last = time.monotonic()
        try:
            while not stop.is_set():
                batch = self._take(0.2)
                if batch:
                    self._round(batch, stop)
                    last = time.monotonic()
                elif self._done_leaving(last):
                    self.left = True
                    break
                self._refresh_online()
        finally:
            self.sub.stop(end_session=self.left)
            self.db.close()
            m = self.metrics
            log.info(
                "collector: stopped: %d messages, %d records stored, duplicates dropped %d, rejected %d",
                m.messages,
                m.records,
                m.duplicates,
                m.rejected,
            )

    def _done_leaving(self, last: float) -> bool:
        """Leaving: the UNSUBSCRIBE is confirmed and nothing came for ``leave_quiet_s`` (every
        round before was committed and acked): what the session held is stored."""
        quiet = self.leave_quiet_s
        return (
            quiet is not None
            and self.sub.unsubscribed.is_set()
            and self.sub.inbox.empty()
            and time.monotonic() - max(last, self.sub.unsubscribed_at) >= quiet
        )

    def _take(self, wait_s: float) -> list[Inbound]:
        try:
            first = self.sub.inbox.get(timeout=wait_s)
        except queue.Empty:
            return []
        batch = [first]
        while len(batch) < self.cfg.batch_max:
            try:
                batch.append(self.sub.inbox.get_nowait())
            except queue.Empty:
                break
        return batch

    def _round(self, batch: list[Inbound], stop: threading.Event) -> None:
        received = time.time()
        self.metrics.taken += len(batch)
        records: list[Record] = []
        statuses: list[DeviceStatus] = []
        events: list[Event] = []
        rejected: list[Rejected] = []
        for m in batch:
            try:
                parsed = parse(self.cfg.prefix, m.topic, m.payload, received)
            except Exception as exc:  # noqa: BLE001 -- IngestError, or a parser bug: a message that raised
                # anything else would end the collector, and the broker would hand the same message to
                # the restarted one (or the next member of the group) for ever: a poison message
                why = str(exc) if isinstance(exc, IngestError) else f"unexpected {type(exc).__name__}: {exc}"
                log.warning("collector: rejected: %s", why)
                rejected.append(Rejected(m.topic[:1024], why[:1024], received))
                continue
            records.extend(parsed.records)
            if parsed.status is not None:
                statuses.append(parsed.status)
            if parsed.event is not None:
                events.append(parsed.event)
        failures = 0
        while True:
            try:
                inserted = self.db.store(records, received, statuses, events, rejected)
                break
            except self.db.errors() as exc:
                failures += 1
                self.metrics.db_errors += 1
                log.error(
                    "collector: database error (round of %d messages not acknowledged): %s", len(batch), exc
                )
                if stop.wait(min(30.0, 0.5 * 2 ** min(failures, 6))):
                    return  # not acknowledged: the broker sends them again to the next collector
                self._reopen()
        self.sub.ack(batch)  # only now: the rows are committed
        self.metrics.confirms += confirmed.publish(self.sub.client, self.cfg.prefix, self.db.confirms)
        now = time.monotonic()
        met = self.metrics
        met.messages += len(batch)
        met.records += inserted
        met.duplicates += len(records) - inserted
        met.rejected += len(rejected)
        met.rounds += 1
        met.stored(now, inserted)
        if records:
            met.lag_s = max(0.0, received - max(r.time for r in records))

    def _reopen(self) -> None:
        if self.db.dialect != "postgresql":
            return
        try:
            self.db.close()
        finally:
            try:
                self.db = CollectorDb(self.cfg.db)
            except (DbError, *self.db.errors()) as exc:  # type: ignore[misc]  # the next round retries
                log.error("collector: reconnecting to the database failed: %s", exc)

    def _refresh_online(self) -> None:
        now = time.monotonic()
        if now - self._online_at < ONLINE_EVERY_S:
            return
        self._online_at = now
        try:
            self.metrics.devices_online = self.db.online()
        except self.db.errors() as exc:
            log.warning("collector: counting online devices failed: %s", exc)


def mqtt_settings(cfg: CollectorConfig) -> MqttConfig:
    """The device-side MqttConfig with the collector's credentials/TLS, to reuse its readers."""
    host, port, _ = broker_address(cfg.broker)
    return MqttConfig(
        host=host,
        port=port,
        username=cfg.username,
        password_file=cfg.password_file,
        password_env=cfg.password_env,
        tls_ca=cfg.tls_ca,
        tls_cert=cfg.tls_cert,
        tls_key=cfg.tls_key,
    )
