"""The collector's loop: take what the subscriber received, store it in one transaction, commit,
and only then acknowledge it to the broker.

One thread: while PostgreSQL inserts round n's rows, the store lets it take and parse round n+1
(app.collector.overlap), then acks round n; rounds are stored and acked in order. A round takes
up to ``batch_max`` messages (whatever arrived; it never waits for a batch to fill), parses,
normalises and admits each inside one guard (anything a message makes it raise turns it into a
rejection), stores records, statuses, events and rejections in one transaction and acks them all.
A transient database error (locked, connection gone) leaves the round un-acked and retries it
with backoff (reconnecting to PostgreSQL). Any other error of a round (a bug, data a driver
refuses) rolls it back and stores its messages one by one; one that fails ``deliveries_max`` times
is dead-lettered (kept in ``dead_letters``, acked). Measured before:
one 90-byte message with a lone surrogate raised in the driver, outside the per-message guard,
and crash-looped the collector at every restart (the broker redelivered it each time).
"""

from __future__ import annotations

import gc
import logging
import queue
import ssl
import threading
import time
from typing import List, NamedTuple, Optional, Tuple

from edge_agent.adapters.collector import confirmed
from edge_agent.adapters.collector.db import CollectorDb, DbError, Rejected
from edge_agent.adapters.collector.ingest import Idle
from edge_agent.adapters.collector.subscriber import Inbound, Subscriber
from edge_agent.adapters.collector.trust import Limits
from edge_agent.app.collector.admission import Admission, Deliveries
from edge_agent.app.collector.maintenance import Maintenance
from edge_agent.app.collector.overlap import Ahead
from edge_agent.app.collector.round_stats import RATE_WINDOW_S as RATE_WINDOW_S
from edge_agent.app.collector.round_stats import Metrics as Metrics
from edge_agent.app.collector.round_stats import Outcome
from edge_agent.core.config.collector import CollectorConfig, broker_address
from edge_agent.core.config.schema import MqttConfig
from edge_agent.core.messages.confirm import is_confirm_topic
from edge_agent.core.messages.fleet import (
    DeviceStatus,
    Event,
    IngestError,
    Record,
    parse,
    safe_text,
    split_topic,
    subscriptions,
)
from edge_agent.core.messages.log_throttle import LogThrottle

log = logging.getLogger("edge_agent.collector")
ONLINE_EVERY_S = 5.0


class Item(NamedTuple):
    """One message of a round, after the guard: what it holds, or why it is rejected."""

    m: Inbound
    records: list[Record]
    status: Optional[DeviceStatus]
    event: Optional[Event]
    rejected: Optional[Rejected]


Job = Tuple[List[Inbound], List[Item], float]  # a round taken and parsed: its messages, items, time


class Collector:
    def __init__(
        self,
        cfg: CollectorConfig,
        password: Optional[str],
        tls: Optional[ssl.SSLContext],
        leave_quiet_s: Optional[float] = None,
        db_password: Optional[str] = None,
    ) -> None:
        """``leave_quiet_s``: leave the group (``collect --leave``): store what the broker queued
        for this client id, and once nothing has come for that long, end the session."""
        self.cfg = cfg
        self.leave_quiet_s = leave_quiet_s
        self.left = False
        host, port, _ = broker_address(cfg.broker)
        self.db_password = db_password
        self.db = self._open_db()
        self.metrics = Metrics()
        self.throttle = LogThrottle(cfg.log_every)
        self.conflict_log = LogThrottle(cfg.log_every)
        self.deliveries = Deliveries()
        self.admission = Admission(cfg.enrolled_file, cfg.new_devices_max, cfg.new_devices_interval_s)
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
            inbox_bytes=cfg.inbox_max_mib * 1024 * 1024,
            message_max=cfg.message_max_kib * 1024,
        )
        self._online_at = 0.0
        self._stored_at = 0.0  # monotonic time of the last committed round (leaving waits for quiet)
        self.maintenance = Maintenance(cfg)
        self.metrics.purged = self.maintenance.purged  # one dict: /metrics reads the retention's counts
        prefix = cfg.prefix
        self.sub.ignore = lambda topic: is_confirm_topic(prefix, topic)  # ours, back through <prefix>/+/+

    def run(self, stop: threading.Event) -> None:
        try:
            version = self.db.migrate()
        except self.db.errors() as exc:  # one line; the URL (it may hold a password) is not shown
            raise DbError(f"{self.db.dialect}: cannot apply the collector schema: {exc}") from None
        log.info("collector: database %s at schema version %d", self.db.dialect, version)
        self.admission.known.update(self.db.device_ids())
        # everything made so far (modules, drivers) lives as long as the process: out of the
        # collector's reach, a full collection no longer walks it (4x less GC time in a round of
        # 500 results: 0.1 of 1.7 s of a 10,000-result store; tests/bench/bench_ingest.py)
        gc.freeze()
        self.sub.start()
        # the next round is taken and parsed while the database inserts this one (app.collector.overlap)
        ahead: Ahead[Job] = Ahead(self._take_now)
        self._stored_at = time.monotonic()
        try:
            while not stop.is_set():
                job = ahead.next()
                if job is None:
                    batch = self._take(0.2)
                    job = self._prepare(batch) if batch else None
                if job is not None:
                    self._commit(*job, stop, ahead.idle)  # stopped first: not acked, sent again
                elif self._done_leaving(self._stored_at):
                    self.left = True
                    break
                self._periodic()
        finally:
            try:
                self.sub.stop(end_session=self.left)
            finally:
                self.db.close()
            m = self.metrics
            log.info(
                "collector: stopped: %d messages, %d records stored, duplicates dropped %d, rejected %d",
                m.messages,
                m.records,
                m.duplicates,
                m.rejected,
            )

    def _periodic(self) -> None:
        """Work between rounds, paced by each part: the online count, per-device metrics, history."""
        self._refresh_online()
        self.maintenance.device_metrics(self.db, self.metrics)
        self.maintenance.history(self.db, time.time())

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
            first = self.sub.inbox.get(timeout=wait_s) if wait_s > 0 else self.sub.inbox.get_nowait()
        except queue.Empty:
            return []
        batch = [first]
        while len(batch) < self.cfg.batch_max:
            try:
                batch.append(self.sub.inbox.get_nowait())
            except queue.Empty:
                break
        return batch

    def _take_now(self) -> Optional[Job]:
        """The next round, prepared, if anything arrived (never waits: the store is waiting)."""
        batch = self._take(0.0)
        return self._prepare(batch) if batch else None

    def _guarded(self, m: Inbound, received: float) -> Item:
        """Parse, normalise and admit one message; anything it raises makes it a rejection (acked).
        Were it to raise out of the round, the collector would exit without an ack, and the broker
        would hand the same message to the restarted one (or the group's next member) for ever."""
        try:
            if m.size >= 0:
                raise IngestError(
                    f"{m.topic[:200]}: {m.size} bytes, at most {self.sub.message_max} taken (message_max_kib)"
                )
            parsed = parse(self.cfg.prefix, m.topic, m.payload, received)
            device = split_topic(self.cfg.prefix, m.topic)[0]
            why = self.admission.refuse(device)
            if why is not None:
                raise IngestError(f"{m.topic[:200]}: {why}")
            return Item(m, parsed.records, parsed.status, parsed.event, None)
        except Exception as exc:  # noqa: BLE001 -- IngestError, or a parser bug: see above
            why = str(exc) if isinstance(exc, IngestError) else f"unexpected {type(exc).__name__}: {exc}"
            why = safe_text(why)
            key = (
                "new device ids"
                if "enrolled" in why
                else safe_text(m.topic.split("/")[1] if m.topic.count("/") >= 1 else m.topic, 80)
            )
            line = self.throttle.line(key, f"collector: rejected: {why}")
            if line is not None:
                log.warning("%s", line)
            return Item(m, [], None, None, Rejected(safe_text(m.topic), why, received))

    def _round(self, batch: list[Inbound], stop: threading.Event) -> None:
        """One round: parse, then store and ack (none prepared ahead)."""
        self._commit(*self._prepare(batch), stop)

    def _prepare(self, batch: list[Inbound]) -> Job:
        received = time.time()
        self.metrics.taken += len(batch)
        return batch, [self._guarded(m, received) for m in batch], received

    def _commit(
        self,
        batch: list[Inbound],
        items: list[Item],
        received: float,
        stop: threading.Event,
        idle: Idle = None,
    ) -> None:
        done = self._store(items, received, stop, idle)
        if done is None:
            return  # stopping: not acknowledged, the broker sends them again
        self.sub.ack(batch)  # only now: the rows are committed (or dead-lettered)
        # the commit watermarks of what is stored now: one message per device of the round
        self.metrics.confirms += confirmed.publish(self.sub.client, self.cfg.prefix, done.confirms)
        now = time.monotonic()
        met = self.metrics
        taken = [m.at for m in batch if m.at > 0]
        if taken:
            met.ingest_delay_s = max(0.0, now - min(taken))
        met.messages += len(batch)
        met.records += done.inserted
        met.duplicates += done.duplicates
        met.rejected += done.rejected
        met.conflicts += sum(done.conflicts.values())
        met.rounds += 1
        met.new_devices_refused = self.admission.refused
        met.inbox_bytes = self.sub.inbox.bytes
        met.stored(now, done.inserted)
        for dev, n in sorted(done.conflicts.items()):
            line = self.conflict_log.line(
                dev,
                f"collector: {dev}: {n} message(s) with a seq already taken by another id or body, or implausibly far ahead: kept in conflicts (fleet gaps {dev})",
            )
            if line is not None:
                log.warning("%s", line)
        if done.newest is not None:
            met.lag_s = max(0.0, received - done.newest)
        self._stored_at = now

    def _store(
        self, items: list[Item], received: float, stop: threading.Event, idle: Idle = None
    ) -> Optional[Outcome]:
        """The round in one transaction; the driver's transient errors (database locked or gone)
        retry it with backoff, anything else (a bug, data a driver refuses) rolls it back and
        stores its messages one by one. None: stopped before it was stored."""
        failures = 0
        while True:
            try:
                return self._store_items(items, received, idle)
            except self.db.transient() as exc:
                failures += 1
                if not self._backoff(failures, len(items), exc, stop):
                    return None
            except Exception as exc:  # noqa: BLE001 -- about the data: never a crash loop
                self.metrics.round_failures += 1
                log.error(
                    "collector: a round of %d messages failed (%s: %s): storing them one by one",
                    len(items),
                    type(exc).__name__,
                    safe_text(str(exc), 300),
                )
                return self._one_by_one(items, received, stop)

    def _one_by_one(self, items: list[Item], received: float, stop: threading.Event) -> Optional[Outcome]:
        total = Outcome(0, 0, 0, {}, None, {})
        failures = 0
        for it in items:
            key = Deliveries.key(it.m.topic, it.m.payload)
            while True:
                try:
                    total = total.plus(self._store_items([it], received))
                    self.deliveries.forget(key)
                    break
                except self.db.transient() as exc:
                    failures += 1
                    if not self._backoff(failures, 1, exc, stop):
                        return None
                except Exception as exc:  # noqa: BLE001 -- about this message
                    why = safe_text(f"{type(exc).__name__}: {exc}", 300)
                    if self.deliveries.failed(key) < self.cfg.deliveries_max:
                        continue
                    if self._dead_letter(it, why, received, stop):
                        break
                    return None
        return total

    def _dead_letter(self, it: Item, why: str, received: float, stop: threading.Event) -> bool:
        """Keep the message in dead_letters and let it be acked; False: stopped first."""
        failures = 0
        while True:
            try:
                self.db.dead_letter(safe_text(it.m.topic), why, it.m.payload, received)
                break
            except self.db.transient() as exc:
                failures += 1
                if not self._backoff(failures, 1, exc, stop):
                    return False
            except Exception as exc:  # noqa: BLE001 -- even that failed: log it, ack it, go on
                log.error("collector: could not dead-letter %s: %s", safe_text(it.m.topic, 200), exc)
                break
        self.metrics.dead_letters += 1
        log.error(
            "collector: dead letter after %d failed stores: %s (%s)",
            self.cfg.deliveries_max,
            safe_text(it.m.topic, 200),
            why,
        )
        return True

    def _backoff(self, failures: int, n: int, exc: BaseException, stop: threading.Event) -> bool:
        self.metrics.db_errors += 1
        log.error("collector: database error (round of %d messages not acknowledged): %s", n, exc)
        if stop.wait(min(30.0, 0.5 * 2 ** min(failures, 6))):
            return False  # not acknowledged: the broker sends them again to the next collector
        self._reopen()
        return True

    def _store_items(self, items: list[Item], received: float, idle: Idle = None) -> Outcome:
        records = [r for it in items for r in it.records]
        statuses = [it.status for it in items if it.status is not None]
        events = [it.event for it in items if it.event is not None]
        rejected = [it.rejected for it in items if it.rejected is not None]
        inserted = self.db.store(records, received, statuses, events, rejected, idle)
        newest = max((r.time for r in records), default=None)
        return Outcome(
            inserted,
            self.db.last_duplicates,
            len(rejected),
            dict(self.db.last_conflicts),
            newest,
            dict(self.db.confirms),
        )

    def _reopen(self) -> None:
        if self.db.dialect != "postgresql":
            return
        try:
            self.db.close()
        finally:
            try:
                self.db = self._open_db()
            except (DbError, *self.db.errors()) as exc:  # type: ignore[misc]  # the next round retries
                log.error("collector: reconnecting to the database failed: %s", exc)

    def _open_db(self) -> CollectorDb:
        c = self.cfg
        limits = Limits(c.seq_jump_max, c.conflicts_max_per_device, c.rejected_max)
        return CollectorDb(c.db, self.db_password, limits)

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
