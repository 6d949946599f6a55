"""The waits between connections as a broker and a fleet see them (issue 19: survivors of
`python .ci/mutation.py mqtt-sync` in ``_run``, ``_session`` and ``_supervise``): the first connect
waits nothing, connections that end at once, refused connects and sync-thread failures are each
followed by a growing wait, and the jitter takes at most half of a wait off. The jitter draw is
pinned (``random.random() = 0.9``: 45 % off) and the waits are read from the stop event they are
asked of, so the delays are checked exactly with no clock involved."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Optional

import pytest
from support import free_port, wait_until
from support.mqtt import Broker, wait_connected
from support.outbox import big_limits

from edge_agent.adapters.mqtt import sync as mqtt_sync
from edge_agent.adapters.mqtt.session import SyncSession
from edge_agent.adapters.mqtt.sync import MqttSync
from edge_agent.adapters.outbox.outbox import Outbox
from edge_agent.core.config.schema import MqttConfig

DEVICE = "dev-1"
OFF = 0.45  # what the pinned draw takes off each wait: jitter 0.5 x 0.9


@pytest.fixture
def pinned_jitter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mqtt_sync, "random", SimpleNamespace(random=lambda: 0.9))


class RecordedWaits(threading.Event):
    """The sync's stop event, recording how long each backoff was asked to wait (the only waits
    the sync does on it): the delays themselves, exactly, with no clock involved."""

    def __init__(self) -> None:
        super().__init__()
        self.waits: list[Optional[float]] = []

    def wait(self, timeout: Optional[float] = None) -> bool:
        self.waits.append(timeout)
        return super().wait(timeout)


def pumping(sync: MqttSync, pump: Callable[[], object]) -> list[float]:
    """Each session runs ``pump`` instead of sending; returns when each one started pumping."""
    starts: list[float] = []

    def recorded(client: Any, session: SyncSession) -> None:
        starts.append(time.monotonic())
        pump()

    sync._pump = recorded  # type: ignore[method-assign]
    return starts


def waits(base: float, n: int) -> list[Any]:
    """The first ``n`` backoffs from ``base`` doubling, less the pinned jitter."""
    return [pytest.approx(base * 2**k * (1 - OFF), abs=1e-9) for k in range(n)]


def test_the_first_connect_waits_no_backoff(tmp_path: Path, broker: Broker) -> None:
    """A device that starts connects at once, however long its reconnect waits are configured."""
    with Outbox(tmp_path / "q.db", big_limits()) as ob:
        sync = MqttSync(MqttConfig(port=broker.port, reconnect_min_s=60.0, reconnect_max_s=60.0), DEVICE, ob)
        sync._stop = stop = RecordedWaits()
        sync.start()
        try:
            wait_until(lambda: sync.connect_attempts or stop.waits, 10, "a connect or a backoff")
            assert stop.waits == []
            wait_connected(sync)
            assert sync.connect_attempts == 1 and stop.waits == []
        finally:
            sync.stop()


@pytest.mark.usefixtures("pinned_jitter")
def test_connections_that_end_at_once_are_followed_by_growing_waits(tmp_path: Path, broker: Broker) -> None:
    """Each session ends as soon as it is connected (a broker that kicks the device, two devices
    with one id): the waits before the next connects are 0.1, 0.2 s less the jitter, not the first
    step again and again; none of it is a sync failure."""
    with Outbox(tmp_path / "q.db", big_limits()) as ob:
        sync = MqttSync(MqttConfig(port=broker.port, reconnect_min_s=0.1, reconnect_max_s=5.0), DEVICE, ob)
        sync._stop = stop = RecordedWaits()
        starts = pumping(sync, lambda: None)
        sync.start()
        try:
            wait_until(lambda: len(starts) >= 3, 20, "three connections")
        finally:
            sync.stop()
    assert stop.waits[:2] == waits(0.1, 2)
    assert sync.thread_restarts == 0 and sync.connects >= 3 and sync.last_error is None


@pytest.mark.usefixtures("pinned_jitter")
def test_a_connection_that_lasted_starts_the_waits_again_from_the_first_step(
    tmp_path: Path, broker: Broker
) -> None:
    """Sessions that each last ``reconnect_max_s`` (0.3 s) were stable: after each drop the wait is
    the first step again (0.1 s less the jitter), not a wait grown by every earlier drop."""
    with Outbox(tmp_path / "q.db", big_limits()) as ob:
        sync = MqttSync(MqttConfig(port=broker.port, reconnect_min_s=0.1, reconnect_max_s=0.3), DEVICE, ob)
        sync._stop = stop = RecordedWaits()
        lasting = threading.Event()  # never set: each session lasts its whole scenario window
        starts = pumping(sync, lambda: lasting.wait(0.35))
        sync.start()
        try:
            wait_until(lambda: len(starts) >= 3, 20, "three connections")
        finally:
            sync.stop()
    assert stop.waits[:2] == waits(0.1, 1) * 2


@pytest.mark.usefixtures("pinned_jitter")
def test_refused_connects_are_followed_by_growing_waits(tmp_path: Path) -> None:
    """Nothing listens: each failed connect is followed by a wait of 0.1, 0.2, 0.4, 0.8 s less at
    most half (here 45 %) -- a fleet spreads its retries over each interval."""
    with Outbox(tmp_path / "q.db", big_limits()) as ob:
        sync = MqttSync(MqttConfig(port=free_port(), reconnect_min_s=0.1, reconnect_max_s=5.0), DEVICE, ob)
        sync._stop = stop = RecordedWaits()
        sync.start()
        try:
            wait_until(lambda: sync.connect_attempts >= 5, 20, "five connect attempts")
        finally:
            sync.stop()
    assert stop.waits[:4] == waits(0.1, 4)
    assert sync.connects == 0 and sync.state == "disconnected"


@pytest.mark.usefixtures("pinned_jitter")
def test_a_failing_sync_thread_waits_a_growing_backoff_and_logs_its_traceback(
    tmp_path: Path, broker: Broker, caplog: pytest.LogCaptureFixture
) -> None:
    """The supervisor's waits after each failure (0.1, 0.2, 0.4 s less at most half), the
    failure's traceback in the debug log (the error line alone does not say where), and a stop
    during such a wait leaves the sync "disconnected", not "restarting"."""
    caplog.set_level(logging.DEBUG, "edge_agent.mqtt")
    with Outbox(tmp_path / "q.db", big_limits()) as ob:
        sync = MqttSync(MqttConfig(port=broker.port, reconnect_min_s=0.1, reconnect_max_s=5.0), DEVICE, ob)
        sync._stop = stop = RecordedWaits()

        def fail() -> None:
            raise RuntimeError(f"bug {len(fails)}")

        fails = pumping(sync, fail)
        sync.start()
        try:
            wait_until(lambda: len(stop.waits) >= 3, 20, "three failures' waits")
        finally:
            sync.stop()
    assert stop.waits[:3] == waits(0.1, 3)
    assert sync.state == "disconnected" and sync._thread is None
    debug = [r for r in caplog.records if r.levelname == "DEBUG" and r.getMessage() == "mqtt sync failure"]
    assert len(debug) >= 3 and all(r.exc_info and r.exc_info[0] is RuntimeError for r in debug)
