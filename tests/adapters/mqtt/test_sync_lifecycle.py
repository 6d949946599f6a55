"""The sync's life as the broker, the fleet and an operator see it (issue 19: survivors of
`python .ci/mutation.py mqtt-sync`): the connect the broker logs, the retained will of a device
that vanishes, the backoff after that drop, a second ``start()``, a restart after ``stop()``, an
outbox error, a sync thread that keeps failing. Real mosquitto per test."""

from __future__ import annotations

import json
import logging
import signal
import socket
import threading
import time
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
import pytest
from support import poll, wait_until
from support.mqtt import Broker, Collector, wait_connected
from support.outbox import big_limits

from edge_agent.adapters.mqtt.session import SyncSession
from edge_agent.adapters.mqtt.sync import MqttSync
from edge_agent.adapters.outbox.outbox import Outbox
from edge_agent.core.config.schema import MqttConfig
from edge_agent.errors import QueueError

DEVICE = "dev-1"
DET = f"edge/{DEVICE}/detections"


def cfg(port: int, **kw: object) -> MqttConfig:
    kw.setdefault("reconnect_min_s", 0.2)
    kw.setdefault("reconnect_max_s", 1.0)
    return MqttConfig(port=port, **kw)  # type: ignore[arg-type]


def fill(ob: Outbox, n: int) -> list[str]:
    ids = [ob.put(DET, {"n": i}) for i in range(n)]
    ob.flush()
    return ids


def retained(port: int, topic: str) -> tuple[dict[str, Any], int, bool]:
    """The retained message on ``topic`` as a new subscriber gets it: (body, qos, retain flag)."""
    got: list[Any] = []
    done = threading.Event()
    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="retained-reader")

    def on_message(client: Any, userdata: Any, msg: Any) -> None:
        got.append((json.loads(msg.payload), msg.qos, bool(msg.retain)))
        done.set()

    c.on_message = on_message
    c.connect("127.0.0.1", port)
    c.subscribe(topic, qos=2)
    c.loop_start()
    try:
        assert done.wait(10), f"a retained message on {topic}"
    finally:
        c.disconnect()
        c.loop_stop()
    body, qos, retain = got[0]
    return body, qos, retain


def test_the_broker_sees_the_device_id_a_clean_session_the_keepalive_and_a_clean_disconnect(
    tmp_path: Path, broker: Broker, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "edge_agent.mqtt")
    with Outbox(tmp_path / "q.db", big_limits()) as ob:
        sync = MqttSync(cfg(broker.port, keepalive_s=17), DEVICE, ob, status_fn=lambda: {"state": "running"})
        sync.start()
        try:
            wait_connected(sync)
            line = wait_until(
                lambda: [ln for ln in broker.log_text().splitlines() if "New client connected" in ln],
                10,
                lambda: f"the broker's connect line\n{broker.log_text()}",
            )
        finally:
            sync.stop()
    # mosquitto: "... as dev-1 (p2, c1, k17)." = MQTT 3.1.1, clean session, keepalive 17 s
    assert len(line) == 1 and line[0].endswith(f" as {DEVICE} (p2, c1, k17)."), line
    said = [r.getMessage() for r in caplog.records if r.name == "edge_agent.mqtt"]
    assert said == [f"connected to mqtt 127.0.0.1:{broker.port} as {DEVICE}"]
    # a stop ends with a DISCONNECT (the broker drops the will), not a closed socket
    wait_until(lambda: f"Client {DEVICE} disconnected." in broker.log_text(), 10, broker.log_text)
    # and leaves "offline" retained, so a dashboard that looks later does not read "running"
    # stamped for the collector's ordering: link 1 (the first connection); status_seq 3 after the
    # will (1) and the status published at connect (2)
    assert retained(broker.port, f"edge/{DEVICE}/status") == (
        {"state": "offline", "link": 1, "status_seq": 3},
        1,
        True,
    )


def test_a_device_that_vanishes_is_marked_offline_by_its_retained_will_and_backs_off(
    tmp_path: Path, broker: Broker, caplog: pytest.LogCaptureFixture
) -> None:
    """The connection dies without a DISCONNECT (power cut, cable) while 3 results wait for their
    PUBACK: they go back to pending (and the log says so); the broker publishes the will, retained,
    so a dashboard subscribing later still reads "offline"; the sync waits its backoff (here >= 5
    s, half of reconnect_min_s at most taken off) instead of reconnecting at once, and a stop() in
    that wait returns at once."""
    caplog.set_level(logging.INFO, "edge_agent.mqtt")
    watch = Collector(broker.port, f"edge/{DEVICE}/status", client_id="status-watch")
    with Outbox(tmp_path / "q.db", big_limits(), flush_interval_s=3600) as ob:
        sync = MqttSync(
            cfg(broker.port, reconnect_min_s=10.0, reconnect_max_s=20.0),
            DEVICE,
            ob,
            status_fn=lambda: {"state": "running", "n": 7},
        )
        sync.start()
        try:
            wait_connected(sync)
            watch.wait_until(lambda c: len(c.messages) >= 1, 10, "the status on connect")
            client = sync._client
            assert client is not None and broker.proc is not None
            broker.proc.send_signal(signal.SIGSTOP)  # no PUBACK for what follows
            try:
                fill(ob, 3)
                wait_until(lambda: sync.published == 3, 10, "3 published")
                client.socket().shutdown(socket.SHUT_RDWR)  # gone, no DISCONNECT sent
                wait_until(lambda: sync.state == "disconnected", 10, "the drop noticed")
            finally:
                broker.proc.send_signal(signal.SIGCONT)
            assert (ob.stats()["pending"], ob.stats()["inflight"]) == (3, 0)
            # the will: stamped at the CONNECT of link 1, before the connect status (status_seq 2)
            will = {"state": "offline", "n": 7, "link": 1, "status_seq": 1}
            assert retained(broker.port, f"edge/{DEVICE}/status") == (will, 1, True)
            assert not poll(lambda: sync.connect_attempts > 1, 1.0), "reconnected without a backoff"
            assert sync.stats()["connects"] == 1 and sync.thread_restarts == 0
        finally:
            t0 = time.monotonic()
            sync.stop()
            took = time.monotonic() - t0
        assert sync._thread is None and took < 4.0, took  # not the rest of a >= 5 s backoff
    watch.close()
    said = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "edge_agent.mqtt"][1:]
    assert said == [
        ("WARNING", f"mqtt: connection to 127.0.0.1:{broker.port} lost"),
        ("INFO", "mqtt: 3 un-acked messages back to pending"),
    ]


def test_a_second_start_is_ignored_and_a_stopped_sync_starts_again(tmp_path: Path, broker: Broker) -> None:
    collector = Collector(broker.port)
    with Outbox(tmp_path / "q.db", big_limits()) as ob:
        sync = MqttSync(cfg(broker.port), DEVICE, ob)
        sync.start()
        first = sync._thread
        sync.start()  # e.g. a second caller: still one connection, one thread
        try:
            assert sync._thread is first and first is not None and first.daemon  # never holds the process
            ids = fill(ob, 5)
            assert sync.drain(10)
            assert sync.connect_attempts == 1 and sync.connects == 1
        finally:
            sync.stop()
        assert sync.state == "disconnected" and not first.is_alive()
        ids += fill(ob, 5)  # results made while stopped
        sync.start()
        try:
            assert sync.drain(10), sync.stats()
        finally:
            sync.stop()
        assert sync.connects == 2 and sync.acked == 10  # after the stop: drain() may return first
    collector.wait_until(lambda c: sorted(c.ids()) == sorted(ids), 10, "all ten results, once each")
    collector.close()


def test_an_outbox_error_is_shown_backed_off_and_the_sync_goes_on(
    tmp_path: Path, broker: Broker, caplog: pytest.LogCaptureFixture
) -> None:
    """A failing queue (a read error) is not a bug of the sync thread: shown as ``last_error``,
    logged once as an error, the connection ends (its rows back to pending) and after a backoff
    the queue drains; the thread is not counted as restarted."""
    collector = Collector(broker.port)
    with Outbox(tmp_path / "q.db", big_limits()) as ob:
        ids = fill(ob, 10)
        real_claim = ob.claim
        calls = {"n": 0}

        def claim_failing_once(n: int, newest_first: bool = False) -> list[Any]:
            calls["n"] += 1
            if calls["n"] == 1:
                raise QueueError("q.db: cannot read the queue: disk I/O error")
            return real_claim(n, newest_first)

        ob.claim = claim_failing_once  # type: ignore[method-assign]
        sync = MqttSync(cfg(broker.port, reconnect_min_s=1.0, reconnect_max_s=2.0), DEVICE, ob)
        sync.start()
        try:
            # the backoff (0.5-1 s) is the window in which the error shows; a connect clears it
            error = wait_until(lambda: sync.last_error, 10, "the outbox error shown")
            state = sync.state
            assert sync.drain(20)
        finally:
            sync.stop()
        assert ob.stats()["inflight"] == 0
    collector.wait_until(lambda c: sorted(c.ids()) == sorted(ids), 10, "every result")
    collector.close()
    assert error == "outbox error: q.db: cannot read the queue: disk I/O error"
    assert state == "disconnected"
    assert (sync.thread_restarts, sync.connect_attempts, sync.connects) == (0, 2, 2)
    assert sync.last_error is None  # the next connect clears it
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert errors == ["mqtt sync: outbox error: q.db: cannot read the queue: disk I/O error"]
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert errors == ["mqtt sync: outbox error: q.db: cannot read the queue: disk I/O error"]


def test_a_sync_thread_that_keeps_failing_counts_each_restart_and_backs_off(
    tmp_path: Path, broker: Broker, caplog: pytest.LogCaptureFixture
) -> None:
    """Three failures in a row: three restarts counted, the state and last_error say so during
    the backoff, the delays grow (0.5, 1, 2 s, at most half taken off), and the rows each failure
    had claimed are released and sent afterwards."""
    collector = Collector(broker.port)
    with Outbox(tmp_path / "q.db", big_limits()) as ob:
        ids = fill(ob, 10)
        real_claim = ob.claim
        calls: list[float] = []

        def claim_failing_thrice(n: int, newest_first: bool = False) -> list[Any]:
            msgs = real_claim(n, newest_first)
            calls.append(time.monotonic())
            if len(calls) <= 3:
                raise RuntimeError(f"bug {len(calls)}")
            return msgs

        ob.claim = claim_failing_thrice  # type: ignore[method-assign]
        sync = MqttSync(cfg(broker.port, reconnect_min_s=0.5, reconnect_max_s=5.0), DEVICE, ob)
        sync.start()
        try:
            # the backoff after the first failure (0.25-0.5 s) is the window the state shows it
            wait_until(lambda: sync.state == "restarting", 10, "the first restart shown")
            first = (sync.thread_restarts, sync.last_error)
            assert sync.drain(20)
        finally:
            sync.stop()
        assert ob.stats()["inflight"] == 0
    collector.wait_until(lambda c: sorted(c.ids()) == sorted(ids), 10, "every result, once")
    collector.close()
    assert first == (1, "sync thread failed: RuntimeError: bug 1")
    assert sync.thread_restarts == 3
    gaps = [b - a for a, b in zip(calls, calls[1:4])]
    assert gaps[0] >= 0.24 and gaps[1] >= 0.49 and gaps[2] >= 0.99, gaps
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert errors == [
        f"mqtt sync: sync thread failed: RuntimeError: bug {k} (restart {k})" for k in (1, 2, 3)
    ]


def test_a_refused_login_is_shown_word_for_word_and_retried_after_a_growing_wait(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """No password for a user that needs one: the broker's CONNACK refuses. The operator reads why in ``last_error``
    and the log; the state is "disconnected" during the wait; the waits grow (0.4, 0.8, 1.6 s, at
    most half taken off), so at most 4 attempts fit in 2 s; nothing counts as connected."""
    with (
        Broker(tmp_path / "auth-broker", users={"dev": "right"}) as broker,
        Outbox(tmp_path / "q.db", big_limits()) as ob,
    ):
        no_pw = cfg(
            broker.port,
            username="dev",
            password_env="EDGE_NO_SUCH_PW",
            reconnect_min_s=0.4,
            reconnect_max_s=10.0,
        )
        sync = MqttSync(no_pw, DEVICE, ob)
        t0 = time.monotonic()
        sync.start()
        try:
            wait_until(lambda: sync.connect_attempts >= 2, 10, "a second attempt")
            wait_until(lambda: sync.state == "disconnected", 10, "the state during the wait")
            while time.monotonic() < t0 + 2.0:
                time.sleep(0.05)  # the scenario: a window to count attempts in
            attempts = sync.connect_attempts
        finally:
            sync.stop()
    reason = "broker refused the connection: Not authorized"
    assert sync.last_error == reason and sync.connects == 0
    assert 2 <= attempts <= 4, attempts
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warned[:2] == [f"mqtt: {reason}; retrying"] * 2


def test_a_refused_connack_is_a_failed_connect_before_the_drop_is_seen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The refusing CONNACK alone decides: paho may report the broker's close after the sync
    thread looked (here: never), and the connection must not count as made meanwhile."""
    monkeypatch.setattr(SyncSession, "on_disconnect", lambda self, *a: None)
    with (
        Broker(tmp_path / "auth-broker", users={"dev": "right"}) as broker,
        Outbox(tmp_path / "q.db", big_limits()) as ob,
    ):
        no_pw = cfg(broker.port, username="dev", password_env="EDGE_NO_SUCH_PW", reconnect_min_s=5.0)
        sync = MqttSync(no_pw, DEVICE, ob)
        sync.start()
        try:
            wait_until(lambda: sync.last_error or sync.connects, 10, "the CONNACK's answer")
        finally:
            sync.stop()
    assert (sync.connects, sync.last_error) == (0, "broker refused the connection: Not authorized")


def test_a_broker_that_never_answers_connect_is_waited_for_then_named(tmp_path: Path) -> None:
    """A port that accepts TCP but never sends a CONNACK (a hung broker, a wrong service): the sync
    waits max(10 s, keepalive) for it (paho gives up after about the keepalive) -- not within 1.5 s --
    and a stop() in that wait returns at once, naming what was missing."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # the kernel completes the handshake; nobody ever reads or answers
    port = silent.getsockname()[1]
    try:
        with Outbox(tmp_path / "q.db", big_limits()) as ob:
            # a keepalive longer than the stop's join: paho gives up a CONNECT after about the
            # keepalive, which would end a wait that ignores the stop
            sync = MqttSync(cfg(port, keepalive_s=30), DEVICE, ob)
            sync.start()
            try:
                wait_until(lambda: sync.connect_attempts == 1, 10, "the TCP connect")
                assert not poll(lambda: sync.connect_attempts > 1 or sync.state != "connecting", 1.5)
            finally:
                t0 = time.monotonic()
                sync.stop()
                took = time.monotonic() - t0
    finally:
        silent.close()
    assert took < 5.0, took  # not the rest of a 10 s wait (paho's thread takes up to 1 s to stop)
    assert sync.last_error == f"no CONNACK from 127.0.0.1:{port}"
    assert (sync.connects, sync.state) == (0, "disconnected")


def test_a_stop_returns_after_its_timeout_when_the_sync_thread_hangs(tmp_path: Path, broker: Broker) -> None:
    """The agent's shutdown must not hang on its sync thread: here the status for the "offline"
    message never comes back while the thread stops; stop(0.5) returns anyway (the thread is a
    daemon and goes on alone), and the thread ends once the status comes."""
    release = threading.Event()
    with Outbox(tmp_path / "q.db", big_limits()) as ob:

        def status() -> dict[str, Any]:
            if sync._stop.is_set():
                release.wait(30)  # hangs at the stop
            return {"state": "running"}

        sync = MqttSync(cfg(broker.port), DEVICE, ob, status_fn=status)
        sync.start()
        thread = sync._thread
        assert thread is not None
        try:
            wait_connected(sync)
            stopper = threading.Thread(target=sync.stop, args=(0.5,), daemon=True)
            stopper.start()
            stopper.join(10)
            assert not stopper.is_alive(), "stop(0.5) waited for a hung sync thread"
            assert thread.is_alive() and sync._thread is None
        finally:
            release.set()
        thread.join(10)
        assert not thread.is_alive()


def test_a_drop_at_the_moment_of_stop_is_no_sync_failure(
    tmp_path: Path, broker: Broker, caplog: pytest.LogCaptureFixture
) -> None:
    """The connection dies just as stop() sends the "offline" status (paho then refuses it): the
    stop still ends the session as usual -- no "sync thread failed", no restart counted, paho's
    network thread stopped -- instead of leaving through the supervisor's error path."""
    with Outbox(tmp_path / "q.db", big_limits()) as ob:
        calls = {"n": 0}

        def status() -> dict[str, Any]:
            calls["n"] += 1
            session, client = sync._session_state, sync._client
            if sync._stop.is_set() and session is not None and client is not None:
                client.socket().shutdown(socket.SHUT_RDWR)
                wait_until(session.lost.is_set, 10, "paho saw the drop")
            return {"state": "running"}

        sync = MqttSync(cfg(broker.port), DEVICE, ob, status_fn=status)
        sync.start()
        wait_connected(sync)
        before = {t.ident for t in threading.enumerate()}
        sync.stop()
        leftover = [t.name for t in threading.enumerate() if t.ident not in before and t.is_alive()]
        paho = [t.name for t in threading.enumerate() if t.name == f"paho-mqtt-client-{DEVICE}"]
    assert calls["n"] >= 3  # will, status on connect, the offline status at stop
    assert (sync.thread_restarts, sync.state, leftover, paho) == (0, "disconnected", [], [])
    assert not [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
