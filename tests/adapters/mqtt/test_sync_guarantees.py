"""What the sync promises, against a real mosquitto: rows leave the disk only on PUBACK, the rate
limit holds, the sync thread survives its own failures, reconnects are jittered."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest
from support import wait_until
from support.mqtt import Broker, Collector, wait_connected
from support.outbox import big_limits

from edge_agent.adapters.mqtt.sync import MqttSync
from edge_agent.adapters.outbox.outbox import Outbox
from edge_agent.adapters.outbox.views import read_stats
from edge_agent.core.config.schema import MqttConfig

DEVICE = "dev-1"


def fast_cfg(port: int, **kw: object) -> MqttConfig:
    return MqttConfig(port=port, reconnect_min_s=0.2, reconnect_max_s=1.0, **kw)  # type: ignore[arg-type]


def fill(ob: Outbox, n: int) -> list[str]:
    ids = [ob.put(f"edge/{DEVICE}/detections", {"n": i}) for i in range(n)]
    ob.flush()
    return ids


def test_rows_stay_on_disk_until_the_puback(tmp_path: Path, broker: Broker) -> None:
    """A paused broker (SIGSTOP) reads nothing and acks nothing: every published row must still be
    in the file; after the connection is lost they are sent again."""
    path = tmp_path / "q.db"
    collector = Collector(broker.port)
    with Outbox(path, big_limits(), flush_interval_s=0.05) as ob:
        sync = MqttSync(fast_cfg(broker.port), DEVICE, ob)
        sync.start()
        wait_connected(sync)
        assert broker.proc is not None
        broker.proc.send_signal(signal.SIGSTOP)
        try:
            ids = fill(ob, 50)
            wait_until(
                lambda: sync.published == 50, 10, "50 published"
            )  # written to the socket, not acknowledged
            time.sleep(0.3)  # not a synchronisation: nothing may be acked while the broker is stopped
            assert sync.acked == 0
            assert read_stats(path)["pending"] == 50  # on disk, by another reader
        finally:
            sync.stop(timeout=5)  # gives up waiting for the PUBACKs
            broker.proc.send_signal(signal.SIGCONT)
        assert read_stats(path)["pending"] == 50
        again = MqttSync(fast_cfg(broker.port), DEVICE, ob)
        again.start()
        try:
            assert again.drain(20)
        finally:
            again.stop()
    collector.wait_until(lambda c: set(c.ids()) >= set(ids), 10, "set(c.ids()) >= set(ids)")
    collector.close()


def test_rate_limit_is_applied(tmp_path: Path, broker: Broker) -> None:
    collector = Collector(broker.port)
    with Outbox(tmp_path / "q.db", big_limits()) as ob:
        fill(ob, 60)
        sync = MqttSync(fast_cfg(broker.port, rate_limit_per_s=20.0), DEVICE, ob)
        t0 = time.monotonic()
        sync.start()
        try:
            assert sync.drain(30)
        finally:
            sync.stop()
        took = time.monotonic() - t0
    collector.close()
    # 20/s with a one-second burst: 60 messages need at least 2 s (unlimited: well under 0.5 s here)
    assert took >= 1.8, f"60 messages in {took:.2f} s at rate_limit_per_s = 20"


def test_a_failing_sync_thread_is_restarted_counted_and_shown(
    tmp_path: Path, broker: Broker, caplog: pytest.LogCaptureFixture
) -> None:
    collector = Collector(broker.port)
    with Outbox(tmp_path / "q.db", big_limits()) as ob:
        ids = fill(ob, 20)
        real_claim = ob.claim
        calls = {"n": 0}

        def claim_that_breaks_once(n: int, newest_first: bool = False) -> list:  # type: ignore[type-arg]
            calls["n"] += 1
            if calls["n"] == 1:
                raise RuntimeError("injected: a bug in the sync path")
            return real_claim(n, newest_first)

        ob.claim = claim_that_breaks_once  # type: ignore[method-assign]
        sync = MqttSync(fast_cfg(broker.port), DEVICE, ob, status_fn=lambda: {"state": "running"})
        sync.start()
        try:
            assert sync.drain(20)
            stats = sync.stats()
        finally:
            sync.stop()
    collector.wait_until(lambda c: set(c.ids()) >= set(ids), 10, "set(c.ids()) >= set(ids)")
    collector.close()
    assert stats["thread_restarts"] == 1
    assert any("sync thread failed: RuntimeError: injected" in r.message for r in caplog.records)


def test_status_is_the_snapshot_given_and_the_will_says_offline(tmp_path: Path, broker: Broker) -> None:
    collector = Collector(broker.port, f"edge/{DEVICE}/status", client_id="status-watch")
    with Outbox(tmp_path / "q.db", big_limits()) as ob:
        sync = MqttSync(fast_cfg(broker.port), DEVICE, ob, status_fn=lambda: {"state": "running", "n": 1})
        sync.start()
        try:
            wait_connected(sync)
            collector.wait_until(lambda c: bool(c.messages), 5, "bool(c.messages)")
        finally:
            sync.stop()
    collector.wait_until(lambda c: len(c.messages) >= 2, 5, "len(c.messages) >= 2")
    bodies = [json.loads(p) for _, p, _ in collector.messages]
    collector.close()
    # stamped with the connection and the status counter (the will was 1, set before the CONNECT)
    assert bodies[0] == {"state": "running", "n": 1, "link": 1, "status_seq": 2}
    assert bodies[-1] == {"state": "offline", "n": 1, "link": 1, "status_seq": 3}
