"""The waits between connections as a broker and a fleet see them (issue 19: survivors of
`python .ci/mutation.py mqtt-sync` in ``_run``, ``_session`` and ``_supervise``): the first connect
waits nothing, connections that end at once are followed by growing waits, and the jitter takes at
most half of a wait off. The jitter draw is pinned (``random.random() = 0.9``: 45 % off) so the
lower bounds hold exactly; they are lower bounds only, so a loaded machine cannot fail them."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable

import pytest
from support import wait_until
from support.mqtt import Broker, wait_connected
from support.outbox import big_limits

from edge_agent.adapters import mqtt_sync
from edge_agent.adapters.mqtt_session import SyncSession
from edge_agent.adapters.mqtt_sync import MqttSync
from edge_agent.adapters.outbox import Outbox
from edge_agent.core.config import MqttConfig

DEVICE = "dev-1"
OFF = 0.45  # what the pinned draw takes off each wait: jitter 0.5 x 0.9


@pytest.fixture
def pinned_jitter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mqtt_sync, "random", SimpleNamespace(random=lambda: 0.9))


def timed_sessions(sync: MqttSync, pump: Callable[[], None]) -> tuple[list[float], list[float]]:
    """Each session runs ``pump`` instead of sending; returns when each session started pumping
    and when its end was done: the time between an end and the next start is the backoff (plus a
    connect), without the up to 1 s paho's network thread takes to stop at a session's end."""
    starts: list[float] = []
    ends: list[float] = []
    real_end = sync._end_session

    def timed_pump(client: Any, session: SyncSession) -> None:
        starts.append(time.monotonic())
        pump()

    def timed_end(client: Any, session: SyncSession) -> None:
        try:
            real_end(client, session)
        finally:
            ends.append(time.monotonic())

    sync._pump = timed_pump  # type: ignore[method-assign]
    sync._end_session = timed_end  # type: ignore[method-assign]
    return starts, ends


def test_the_first_connect_waits_no_backoff(tmp_path: Path, broker: Broker) -> None:
    """A device that starts connects at once, however long its reconnect waits are configured."""
    with Outbox(tmp_path / "q.db", big_limits()) as ob:
        sync = MqttSync(MqttConfig(port=broker.port, reconnect_min_s=60.0, reconnect_max_s=60.0), DEVICE, ob)
        sync.start()
        try:
            wait_connected(sync)
            assert sync.connect_attempts == 1
        finally:
            sync.stop()


@pytest.mark.usefixtures("pinned_jitter")
def test_connections_that_end_at_once_are_followed_by_growing_waits(tmp_path: Path, broker: Broker) -> None:
    """Each session ends as soon as it is connected (a broker that kicks the device, two devices
    with one id): the waits before the next connects are 0.2, 0.4, 0.8 s less the jitter, never a
    reconnect every 0.2 s; none of it is a sync failure."""
    with Outbox(tmp_path / "q.db", big_limits()) as ob:
        sync = MqttSync(MqttConfig(port=broker.port, reconnect_min_s=0.2, reconnect_max_s=5.0), DEVICE, ob)
        starts, ends = timed_sessions(sync, lambda: None)
        sync.start()
        try:
            wait_until(lambda: len(starts) >= 4, 20, "four connections")
        finally:
            sync.stop()
    gaps = [b - a for a, b in zip(ends, starts[1:4])]
    assert [g >= base * (1 - OFF) for g, base in zip(gaps, (0.2, 0.4, 0.8))] == [True] * 3, gaps
    assert sync.thread_restarts == 0 and sync.connects >= 4 and sync.last_error is None


@pytest.mark.usefixtures("pinned_jitter")
def test_refused_connects_wait_at_least_half_of_each_backoff(tmp_path: Path) -> None:
    """Nothing listens: each failed connect is followed by a wait of 0.3, 0.6, 1.2 s less at most
    half (here 45 %) -- a fleet spreads its retries over each interval, never retries at once."""
    from support import free_port

    port = free_port()
    with Outbox(tmp_path / "q.db", big_limits()) as ob:
        sync = MqttSync(MqttConfig(port=port, reconnect_min_s=0.3, reconnect_max_s=5.0), DEVICE, ob)
        attempts: list[float] = []
        real = sync._session

        def timed_session() -> Any:
            attempts.append(time.monotonic())
            return real()

        sync._session = timed_session  # type: ignore[method-assign]
        sync.start()
        try:
            wait_until(lambda: len(attempts) >= 4, 20, "four connect attempts")
        finally:
            sync.stop()
    gaps = [b - a for a, b in zip(attempts, attempts[1:4])]
    assert [g >= base * (1 - OFF) for g, base in zip(gaps, (0.3, 0.6, 1.2))] == [True] * 3, gaps
    assert sync.connects == 0 and sync.state == "disconnected"


@pytest.mark.usefixtures("pinned_jitter")
def test_a_failing_sync_thread_waits_at_least_half_of_each_backoff_and_logs_its_traceback(
    tmp_path: Path, broker: Broker, caplog: pytest.LogCaptureFixture
) -> None:
    """The supervisor's waits after a failure (0.4, 0.8 s less at most half), the failure's
    traceback in the debug log (the error line alone does not say where), and a stop during
    such a wait leaves the sync "disconnected", not "restarting"."""
    caplog.set_level(logging.DEBUG, "edge_agent.mqtt")
    with Outbox(tmp_path / "q.db", big_limits()) as ob:
        sync = MqttSync(MqttConfig(port=broker.port, reconnect_min_s=0.4, reconnect_max_s=5.0), DEVICE, ob)

        def fail() -> None:
            raise RuntimeError(f"bug {len(fails)}")

        fails, ends = timed_sessions(sync, fail)
        sync.start()
        try:
            wait_until(lambda: len(fails) >= 3, 20, "three failures")
            wait_until(lambda: sync.state == "restarting", 10, "the third restart's wait")
        finally:
            sync.stop()
    gaps = [b - a for a, b in zip(ends, fails[1:3])]
    assert [g >= base * (1 - OFF) for g, base in zip(gaps, (0.4, 0.8))] == [True] * 2, gaps
    assert sync.state == "disconnected" and sync._thread is None
    debug = [r for r in caplog.records if r.levelname == "DEBUG" and r.getMessage() == "mqtt sync failure"]
    assert len(debug) >= 3 and all(r.exc_info and r.exc_info[0] is RuntimeError for r in debug)
