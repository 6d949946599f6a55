"""What the sync's windows and limits promise a user (issue 19: survivors of `python .ci/mutation.py
mqtt-sync`): the batch threshold at its exact value, a rate limit counted per batch while
PUBACKs keep coming, and a stop that waits a moment for in-flight PUBACKs so nothing is sent
twice after a restart. Real mosquitto per test."""

from __future__ import annotations

import signal
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from support import wait_until
from support.mqtt import Broker, Collector, wait_connected
from support.outbox import big_limits

from edge_agent.adapters.mqtt.sync import MqttSync
from edge_agent.adapters.outbox.outbox import Outbox
from edge_agent.core.config.schema import MqttConfig
from edge_agent.core.messages.batch import BATCH_KIND, unpack

DEVICE = "dev-1"
DET = f"edge/{DEVICE}/detections"


def cfg(port: int, **kw: object) -> MqttConfig:
    return MqttConfig(port=port, reconnect_min_s=0.2, reconnect_max_s=1.0, **kw)  # type: ignore[arg-type]


def fill(ob: Outbox, n: int) -> list[str]:
    ids = [ob.put(DET, {"n": i}) for i in range(n)]
    ob.flush()
    return ids


def batch_ids(c: Collector) -> list[list[str]]:
    with c.lock:
        return [
            [str(body["id"]) for _, body in unpack(p)] for t, p, _ in c.messages if t.endswith(BATCH_KIND)
        ]


def test_exactly_the_threshold_goes_in_one_batch_one_less_goes_one_by_one(
    tmp_path: Path, broker: Broker
) -> None:
    collector = Collector(broker.port, "edge/#")
    # no background flush: the rows appear at once, as a backlog after an outage does
    with Outbox(tmp_path / "q.db", big_limits(), flush_interval_s=3600) as ob:
        five = fill(ob, 5)
        sync = MqttSync(cfg(broker.port, batch_threshold=5), DEVICE, ob)
        sync.start()
        try:
            assert sync.drain(10)
            collector.wait_until(lambda c: len(batch_ids(c)) == 1, 10, "one batch")
            four = fill(ob, 4)
            assert sync.drain(10)
        finally:
            sync.stop()
    collector.wait_until(lambda c: len(c.ids()) == 4, 10, "four results one by one")
    assert batch_ids(collector) == [five]  # the five at the threshold, in one batch
    assert sorted(collector.ids()) == sorted(four)  # one less: not batched
    collector.close()


def test_a_rate_limit_counts_batches_and_pubacks_are_applied_while_it_holds(
    tmp_path: Path, broker: Broker
) -> None:
    """2 batches/s (a one-second burst of two): 4 batches of 5 take at least ~1 s, and the PUBACKs
    that arrive while the limit holds the next batch back still delete and count their rows."""
    collector = Collector(broker.port, "edge/#")
    with Outbox(tmp_path / "q.db", big_limits(), flush_interval_s=3600) as ob:
        ids = fill(ob, 20)
        sync = MqttSync(
            cfg(broker.port, batch_threshold=1, batch_max_messages=5, rate_limit_per_s=2.0), DEVICE, ob
        )
        sync.start()
        try:
            wait_connected(sync)
            t0 = time.monotonic()
            assert sync.drain(20), sync.stats()
            took = time.monotonic() - t0
        finally:
            sync.stop()
        assert ob.stats()["pending"] == 0 and ob.stats()["inflight"] == 0
    collector.wait_until(lambda c: sum(map(len, batch_ids(c))) >= 20, 10, "20 rows in batches")
    got = batch_ids(collector)
    collector.close()
    assert [len(b) for b in got] == [5, 5, 5, 5]
    assert sorted(r for b in got for r in b) == sorted(ids)  # each row once
    assert (sync.published, sync.acked) == (20, 20)
    assert took >= 0.8, took  # two at once, then one per 0.5 s (unlimited: well under 0.1 s)


@pytest.mark.parametrize("threshold", [0, 1], ids=["one-by-one", "batched"])
def test_a_stop_waits_for_in_flight_pubacks_so_nothing_is_sent_twice(
    tmp_path: Path, broker: Broker, threshold: int
) -> None:
    """stop() while 20 results wait for their PUBACK (the broker paused, then resumed 0.5 s later):
    the sync waits up to 2 s for them, so the rows are deleted, not released and sent again by the
    next start."""
    collector = Collector(broker.port, "edge/#")
    with Outbox(tmp_path / "q.db", big_limits(), flush_interval_s=3600) as ob:
        sync = MqttSync(cfg(broker.port, batch_threshold=threshold, batch_max_messages=10), DEVICE, ob)
        sync.start()
        wait_connected(sync)
        assert broker.proc is not None
        broker.proc.send_signal(signal.SIGSTOP)
        try:
            ids = fill(ob, 20)
            wait_until(lambda: sync.published == 20, 10, "20 published, not acknowledged")
            stopper = threading.Thread(target=sync.stop)
            stopper.start()
            time.sleep(0.5)  # the scenario: the PUBACKs come half a second into the stop
        finally:
            broker.proc.send_signal(signal.SIGCONT)
        stopper.join(10)
        assert not stopper.is_alive()
        assert sync.acked == 20 and ob.stats()["pending"] == 0 and ob.stats()["inflight"] == 0
        again = MqttSync(cfg(broker.port, batch_threshold=threshold), DEVICE, ob)
        again.start()
        try:
            wait_connected(again)
            assert again.drain(5)
        finally:
            again.stop()
        assert again.published == 0
    if threshold:
        collector.wait_until(lambda c: sum(map(len, batch_ids(c))) >= 20, 10, "20 rows in batches")
    collector.wait_until(lambda c: len(c.ids()) + sum(map(len, batch_ids(c))) >= 20, 10, "20 results")
    time.sleep(0.2)  # not a synchronisation: a duplicate would arrive right behind
    got = collector.ids() + [r for b in batch_ids(collector) for r in b]
    assert sorted(got) == sorted(ids)  # each once
    collector.close()


def test_a_stop_with_a_stalled_broker_ends_the_sync_within_its_grace(tmp_path: Path, broker: Broker) -> None:
    """The broker reads nothing (SIGSTOP) and 5 results wait for their PUBACK: stop() gives them
    2 s (and the "offline" status 1 s more), then ends the sync thread -- it does not hold the
    agent's shutdown -- and the 5 rows are back to pending for the next start."""
    with Outbox(tmp_path / "q.db", big_limits(), flush_interval_s=3600) as ob:
        sync = MqttSync(cfg(broker.port), DEVICE, ob, status_fn=lambda: {"state": "running"})
        sync.start()
        wait_connected(sync)
        thread = sync._thread
        assert broker.proc is not None and thread is not None
        broker.proc.send_signal(signal.SIGSTOP)
        try:
            fill(ob, 5)
            wait_until(lambda: sync.published == 5, 10, "5 published")
            t0 = time.monotonic()
            sync.stop(timeout=10.0)
            took = time.monotonic() - t0
            alive = thread.is_alive()
        finally:
            broker.proc.send_signal(signal.SIGCONT)
        assert not alive and 1.9 <= took < 8.0, took  # 2 s grace, 1 s for the offline status, paho stopping
        assert (sync.acked, ob.stats()["pending"], ob.stats()["inflight"]) == (0, 5, 0)


@pytest.mark.parametrize("threshold", [0, 1], ids=["one-by-one", "batched"])
def test_a_drop_between_claim_and_publish_loses_nothing(
    tmp_path: Path, broker: Broker, threshold: int
) -> None:
    """The connection dies after the sync claimed rows and before it published them (paho then
    refuses the publish): the claimed rows go back to pending and the next connection sends every
    one of them; the first connection counts nothing as published."""
    collector = Collector(broker.port, "edge/#")
    with Outbox(tmp_path / "q.db", big_limits(), flush_interval_s=3600) as ob:
        ids = fill(ob, 12)
        sync = MqttSync(cfg(broker.port, batch_threshold=threshold, batch_max_messages=5), DEVICE, ob)
        real_claim = ob.claim
        seen: dict[str, int] = {}

        def claim_then_drop(n: int, newest_first: bool = False) -> list[Any]:
            msgs = real_claim(n, newest_first)
            session, client = sync._session_state, sync._client
            if msgs and "claimed" not in seen and session is not None and client is not None:
                seen["claimed"] = len(msgs)
                client.socket().shutdown(socket.SHUT_RDWR)
                wait_until(session.lost.is_set, 10, "paho saw the drop")  # its socket is gone now
                seen["published"] = sync.published
            return msgs

        ob.claim = claim_then_drop  # type: ignore[method-assign]
        sync.start()
        try:
            assert sync.drain(20), sync.stats()
        finally:
            sync.stop()
        assert ob.stats()["inflight"] == 0
    assert seen == {"claimed": 5 if threshold else 12, "published": 0}
    assert (sync.connects, sync.published, sync.thread_restarts) == (2, 12, 0)
    if threshold:
        collector.wait_until(lambda c: sum(map(len, batch_ids(c))) >= 12, 10, "12 rows in batches")
        got = [r for b in batch_ids(collector) for r in b]
    else:
        collector.wait_until(lambda c: len(c.ids()) >= 12, 10, "12 results")
        got = collector.ids()
    collector.close()
    assert sorted(got) == sorted(ids)  # every row, once


def test_at_most_inflight_results_wait_for_their_puback(tmp_path: Path, broker: Broker) -> None:
    """[mqtt] inflight = 7 and a broker that reads nothing (SIGSTOP): seven results go out, then
    the sync waits (asleep: a Pi's CPU is not spent on it); once the broker answers, the rest
    follow, each result once."""
    collector = Collector(broker.port)
    with Outbox(tmp_path / "q.db", big_limits(), flush_interval_s=3600) as ob:
        sync = MqttSync(cfg(broker.port, inflight=7), DEVICE, ob)
        sync.start()
        try:
            wait_connected(sync)
            assert broker.proc is not None
            broker.proc.send_signal(signal.SIGSTOP)
            try:
                ids = fill(ob, 30)
                wait_until(lambda: sync.published >= 7, 10, "the window published")
                cpu = time.process_time()
                time.sleep(1.0)  # the scenario: no PUBACK comes, so nothing more may go out
                cpu = time.process_time() - cpu
                assert (sync.published, sync.acked) == (7, 0)
                assert cpu < 0.1, f"{cpu:.2f} s of CPU in 1 s of waiting for PUBACKs"  # waits, no spinning
            finally:
                broker.proc.send_signal(signal.SIGCONT)
            assert sync.drain(20)
        finally:
            sync.stop()
    collector.wait_until(lambda c: len(c.ids()) >= 30, 10, "30 results")
    assert sorted(collector.ids()) == sorted(ids) and sync.published == 30
    collector.close()


def test_status_and_batches_go_under_the_configured_prefix_and_device(tmp_path: Path, broker: Broker) -> None:
    """[mqtt] topic_prefix and the device id name every topic the sync itself builds: the status,
    the batches (results keep the topic they were queued with)."""
    collector = Collector(broker.port, "#")
    with Outbox(tmp_path / "q.db", big_limits(), flush_interval_s=3600) as ob:
        ob.put("site7/edge/cam-9/detections", {"n": 1})
        ob.flush()
        sync = MqttSync(
            cfg(broker.port, topic_prefix="site7/edge", batch_threshold=1),
            "cam-9",
            ob,
            status_fn=lambda: {"state": "running"},
        )
        sync.start()
        try:
            assert sync.drain(10)
        finally:
            sync.stop()
    collector.wait_until(lambda c: len(c.messages) >= 3, 10, "status, batch, offline status")
    with collector.lock:
        got = [t for t, _, _ in collector.messages]
    collector.close()
    assert sorted(set(got)) == ["site7/edge/cam-9/batch.zlib", "site7/edge/cam-9/status"], got


def test_inflight_1_sends_one_result_at_a_time_and_every_one(tmp_path: Path, broker: Broker) -> None:
    collector = Collector(broker.port)
    with Outbox(tmp_path / "q.db", big_limits(), flush_interval_s=3600) as ob:
        ids = fill(ob, 10)
        sync = MqttSync(cfg(broker.port, inflight=1), DEVICE, ob)
        sync.start()
        try:
            assert sync.drain(10), sync.stats()
        finally:
            sync.stop()
    collector.wait_until(lambda c: len(c.ids()) >= 10, 10, "10 results")
    assert collector.ids() == ids  # one at a time: in order, each once
    collector.close()
