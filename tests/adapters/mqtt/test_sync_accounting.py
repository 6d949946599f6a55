"""What a batched drain delivers and what the sync reports, against a real mosquitto (issue 19: the
survivors of `python .ci/mutation.py mqtt-sync`): each row once, newest first, batches within
their byte cap and window, QoS 1, and figures in ``stats()`` that match what happened."""

from __future__ import annotations

import signal
import threading
import time
import zlib
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
import pytest
from support import free_port, wait_until
from support.mqtt import Broker, wait_connected
from support.outbox import big_limits

from edge_agent.adapters.mqtt.sync import MqttSync
from edge_agent.adapters.outbox.outbox import Outbox
from edge_agent.core.config.schema import MqttConfig
from edge_agent.core.messages.batch import BATCH_KIND, unpack

DEVICE = "dev-1"
LINE = 205  # five lines are 1025 bytes: one more than a 1 KiB batch holds


class QosWatch:
    """A QoS 2 subscriber that records each message with the QoS it was delivered at."""

    def __init__(self, port: int) -> None:
        self.messages: list[tuple[str, bytes, int, bool]] = []
        self.lock = threading.Lock()
        subscribed = threading.Event()
        self.client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="qos-watch")
        self.client.on_message = self._on_message
        self.client.on_subscribe = lambda *a: subscribed.set()
        self.client.connect("127.0.0.1", port)
        self.client.subscribe("edge/#", qos=2)
        self.client.loop_start()
        assert subscribed.wait(10), "the watcher's subscription"

    def _on_message(self, client: Any, userdata: Any, msg: Any) -> None:
        with self.lock:
            self.messages.append((msg.topic, bytes(msg.payload), msg.qos, bool(msg.retain)))

    def batches(self) -> list[bytes]:
        with self.lock:
            return [p for t, p, _, _ in self.messages if t.endswith(BATCH_KIND)]

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


# what `edge-agent status` shows of the sync before its first connect
BEFORE_FIRST_CONNECT = {
    "state": "disconnected",
    "last_sync": None,
    "last_error": None,
    "connect_attempts": 0,
    "connects": 0,
    "published": 0,
    "acked": 0,
    "thread_restarts": 0,
}


def fill_lines(ob: Outbox, n: int, line: int = LINE) -> list[str]:
    """``n`` rows whose batch lines are exactly ``line`` bytes (a fresh outbox numbers them 1..n)."""
    ids = []
    for i in range(n):
        seq = i + 1
        pad = line - 87 - len(str(i)) - len(str(seq))
        ids.append(ob.put(f"edge/{DEVICE}/detections", {"n": i, "pad": "p" * pad}))
    ob.flush()
    return ids


def fast_cfg(port: int, **kw: object) -> MqttConfig:
    return MqttConfig(port=port, reconnect_min_s=0.2, reconnect_max_s=1.0, **kw)  # type: ignore[arg-type]


def test_a_batched_drain_sends_each_row_once_newest_first_within_the_byte_cap(
    tmp_path: Path, broker: Broker
) -> None:
    watch = QosWatch(broker.port)
    with Outbox(tmp_path / "q.db", big_limits()) as ob:
        ids = fill_lines(ob, 40)
        sync = MqttSync(
            fast_cfg(
                broker.port, batch_threshold=1, batch_max_messages=10, batch_max_kib=1, newest_first=True
            ),
            DEVICE,
            ob,
        )
        t0 = time.time()
        sync.start()
        try:
            assert sync.drain(20)
            state = sync.stats()["state"]
        finally:
            sync.stop()
        stats = sync.stats()  # after the stop: drain() may return before the last ack is counted
        assert ob.stats()["pending"] == 0
    wait_until(lambda: sum(len(unpack(b)) for b in watch.batches()) >= 40, 10, "40 rows in batches")
    watch.close()
    raws = [zlib.decompress(b) for b in watch.batches()]
    assert all(len(line) + 1 == LINE for raw in raws for line in raw.split(b"\n")[:-1])
    assert [len(raw) for raw in raws] == [4 * LINE] * 10  # 1 KiB holds four: ten batches of four
    sent = [body["id"] for b in watch.batches() for _, body in unpack(b)]
    assert sent == ids[::-1]  # each once, newest first across the batches
    assert all(qos == 1 for _, _, qos, _ in watch.messages)  # QoS 1, never 2
    assert not [t for t, _, _, _ in watch.messages if t.endswith("/detections")]
    assert stats["published"] == 40 and stats["acked"] == 40
    assert stats["thread_restarts"] == 0 and stats["last_error"] is None
    assert state == "connected" and stats["state"] == "disconnected"
    assert stats["connects"] == 1 and stats["connect_attempts"] == 1
    assert stats["last_sync"] is not None and t0 <= stats["last_sync"] <= time.time()


def test_a_batch_fills_its_kib_to_the_last_byte(tmp_path: Path, broker: Broker) -> None:
    """``batch_max_kib`` counts KiB: four 256-byte lines are exactly 1024 bytes and go in one
    batch (a cap of 1000 bytes would send three per batch, a third more messages); the fifth row
    each claim takes does not fit and goes back to pending for the next batch."""
    watch = QosWatch(broker.port)
    with Outbox(tmp_path / "q.db", big_limits()) as ob:
        fill_lines(ob, 8, line=256)
        sync = MqttSync(
            fast_cfg(broker.port, batch_threshold=1, batch_max_messages=5, batch_max_kib=1), DEVICE, ob
        )
        sync.start()
        try:
            assert sync.drain(20)
        finally:
            sync.stop()
    wait_until(lambda: sum(len(unpack(b)) for b in watch.batches()) >= 8, 10, "8 rows in batches")
    watch.close()
    assert [len(zlib.decompress(b)) for b in watch.batches()] == [1024, 1024]


def test_at_most_two_batches_wait_for_their_puback(tmp_path: Path, broker: Broker) -> None:
    """A broker that reads nothing (SIGSTOP): two batches go out, then the sync waits; more in
    flight would only be sent again after the drop."""
    watch = QosWatch(broker.port)
    # no background flush: the 100 rows must appear at once, or a claim takes a partial batch
    with Outbox(tmp_path / "q.db", big_limits(), flush_interval_s=3600) as ob:
        sync = MqttSync(fast_cfg(broker.port, batch_threshold=1, batch_max_messages=10), DEVICE, ob)
        sync.start()
        try:
            wait_connected(sync)
            assert broker.proc is not None
            broker.proc.send_signal(signal.SIGSTOP)
            try:
                ids = [ob.put(f"edge/{DEVICE}/detections", {"n": i}) for i in range(100)]
                ob.flush()
                wait_until(lambda: sync.published >= 20, 20, "two batches published")
                time.sleep(0.3)  # the scenario: no PUBACK comes, so no third batch may follow
                assert sync.published == 20 and sync.acked == 0
            finally:
                broker.proc.send_signal(signal.SIGCONT)
            assert sync.drain(20)
        finally:
            sync.stop()
        assert sync.acked == 100
    wait_until(lambda: sum(len(unpack(b)) for b in watch.batches()) >= 100, 10, "every row")
    watch.close()
    sent = [body["id"] for b in watch.batches() for _, body in unpack(b)]
    assert sorted(sent) == sorted(ids) and len(sent) == 100  # each once, oldest first by default
    assert sent == ids


def test_results_one_by_one_are_qos_1_and_the_figures_add_up(tmp_path: Path, broker: Broker) -> None:
    watch = QosWatch(broker.port)
    with Outbox(tmp_path / "q.db", big_limits()) as ob:
        ids = [ob.put(f"edge/{DEVICE}/detections", {"n": i}) for i in range(30)]
        ob.flush()
        sync = MqttSync(fast_cfg(broker.port, inflight=4), DEVICE, ob, status_fn=lambda: {"state": "running"})
        assert sync.stats() == BEFORE_FIRST_CONNECT
        assert sync.publish_status({"state": "running"}) is False  # not connected: not sent
        sync.start()
        try:
            assert sync.drain(20)
            assert sync.publish_status({"state": "running", "n": 2}) is True
        finally:
            sync.stop()
        stats = sync.stats()
        assert sync.publish_status({"state": "running"}) is False
    wait_until(lambda: len(watch.messages) >= 33, 10, "30 results and the status three times")
    watch.close()
    dets = [m for m in watch.messages if m[0].endswith("/detections")]
    assert len(dets) == 30 and all(q == 1 and not r for _, _, q, r in dets)
    status = [m for m in watch.messages if m[0].endswith("/status")]
    assert [(q, r) for _, _, q, r in status] == [(1, False)] * 3  # QoS 1, delivered live (not as retained)
    assert (stats["published"], stats["acked"], stats["connects"]) == (30, 30, 1)
    assert len({p for _, p, _, _ in dets}) == 30 and len(ids) == 30


def test_a_disabled_sync_says_so_and_never_connects(tmp_path: Path) -> None:
    with Outbox(tmp_path / "q.db", big_limits()) as ob:
        sync = MqttSync(MqttConfig(enabled=False), DEVICE, ob)
        sync.start()
        assert sync._thread is None
        assert sync.stats()["state"] == "disabled" and sync.stats()["connect_attempts"] == 0
        sync.stop()


def test_drain_returns_only_when_the_last_row_is_acknowledged(tmp_path: Path, broker: Broker) -> None:
    with Outbox(tmp_path / "q.db", big_limits()) as ob:
        sync = MqttSync(fast_cfg(broker.port), DEVICE, ob)
        sync.start()
        try:
            wait_connected(sync)
            for n in range(3):
                ob.put(f"edge/{DEVICE}/detections", {"n": n})
                assert sync.drain(10)
                assert ob.stats()["pending"] == 0  # one row left is not "drained"
        finally:
            sync.stop()


def test_a_drain_without_a_running_sync_thread_gives_up_at_once_and_keeps_the_rows(
    tmp_path: Path, broker: Broker
) -> None:
    """Nothing would acknowledge the rows, so the hour asked for is not waited (a `queue drain` or
    an agent's shutdown stalled for its whole timeout); the rows stay queued for the next start."""
    answers: list[bool] = []
    with Outbox(tmp_path / "q.db", big_limits()) as ob:
        sync = MqttSync(fast_cfg(broker.port), DEVICE, ob)
        assert sync.stats() == BEFORE_FIRST_CONNECT
        assert sync.publish_status({"state": "running"}) is False  # not connected: nothing sent
        ob.put(f"edge/{DEVICE}/detections", {"n": 0})

        def drain() -> None:
            answers.append(sync.drain(3600))

        for when in ("never started", "stopped"):
            t = threading.Thread(target=drain, daemon=True)
            t.start()
            t.join(20)
            assert not t.is_alive(), f"drain() waited for a sync thread that is {when}"
            if when == "never started":
                sync.start()
                wait_connected(sync)
                # the name py-spy and a debugger show the thread by
                assert [t.name for t in threading.enumerate()].count("mqtt-sync") == 1
                assert sync.drain(20)
                sync.stop()
                ob.put(f"edge/{DEVICE}/detections", {"n": 1})
        assert answers == [False, False]
        assert ob.stats()["pending"] == 1


def test_a_drain_the_broker_does_not_answer_waits_its_whole_timeout_then_says_false(
    tmp_path: Path, broker: Broker
) -> None:
    """A stalled broker (no PUBACK): drain(1.5) waits the 1.5 s it was given -- not a second less,
    not for ever -- answers False and the rows stay queued."""
    answers: list[tuple[bool, float]] = []
    with Outbox(tmp_path / "q.db", big_limits()) as ob:
        sync = MqttSync(fast_cfg(broker.port), DEVICE, ob)
        sync.start()
        try:
            wait_connected(sync)
            assert broker.proc is not None
            broker.proc.send_signal(signal.SIGSTOP)
            try:
                ob.put(f"edge/{DEVICE}/detections", {"n": 0})

                def drain() -> None:
                    t0 = time.monotonic()
                    answers.append((sync.drain(1.5), time.monotonic() - t0))

                t = threading.Thread(target=drain, daemon=True)
                t.start()
                t.join(10)
                assert not t.is_alive(), "drain(1.5) still waiting after 10 s"
                assert ob.stats()["pending"] == 1  # kept: sent once the broker answers
            finally:
                broker.proc.send_signal(signal.SIGCONT)
        finally:
            sync.stop()
    ((answer, took),) = answers
    assert answer is False and took >= 1.5, (answer, took)


def test_a_failed_connect_is_one_warning_naming_the_broker_and_the_last_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    port = free_port()  # nothing listens here
    with Outbox(tmp_path / "q.db", big_limits()) as ob:
        sync = MqttSync(fast_cfg(port), DEVICE, ob)
        sync.start()
        try:
            wait_until(lambda: sync.connect_attempts >= 2, 10, "two connect attempts")
        finally:
            sync.stop()
    reason = f"cannot connect to 127.0.0.1:{port}: Connection refused"
    assert sync.last_error == reason
    warned = [
        r.getMessage() for r in caplog.records if r.name == "edge_agent.mqtt" and r.levelname == "WARNING"
    ]
    assert warned[:2] == [f"mqtt: {reason}; retrying"] * 2


def test_a_status_puback_is_matched_to_the_status_never_left_over(tmp_path: Path, broker: Broker) -> None:
    """mids restart per connection and wrap at 65535: a status PUBACK left unmatched would later be
    taken for the PUBACK of a data row that reuses its mid, and that row deleted unsent. So every
    status mid is registered and its PUBACK consumed (checked on the session's books: 65 536
    publishes to see the wrap itself would take minutes)."""
    with Outbox(tmp_path / "q.db", big_limits()) as ob:
        sync = MqttSync(fast_cfg(broker.port), DEVICE, ob, status_fn=lambda: {"state": "running"})
        sync.start()
        try:
            wait_connected(sync)
            session = sync._session_state
            assert session is not None
            for n in range(5):
                assert sync.publish_status({"state": "running", "n": n})
            wait_until(
                lambda: not session.status_mids and not session.early and not session.acks,
                10,
                lambda: f"every status PUBACK matched: status {session.status_mids}, early {session.early}",
            )
        finally:
            sync.stop()
