"""Batched sync ([mqtt] batch_threshold): many rows in one zlib JSON Lines message, acknowledged as
a unit -- no row is deleted before its batch's PUBACK, every row arrives, and the threshold decides."""

from __future__ import annotations

import signal
import time
from pathlib import Path

from support import wait_until
from support.mqtt import Broker, Collector, wait_connected
from support.outbox import big_limits

from edge_agent.adapters.mqtt.sync import MqttSync
from edge_agent.adapters.outbox.outbox import Outbox
from edge_agent.adapters.outbox.views import read_stats
from edge_agent.core.config.schema import MqttConfig
from edge_agent.core.messages.batch import BATCH_KIND, unpack

DEVICE = "dev-1"


def cfg(port: int, **kw: object) -> MqttConfig:
    return MqttConfig(port=port, reconnect_min_s=0.2, reconnect_max_s=0.5, **kw)  # type: ignore[arg-type]


def fill(ob: Outbox, n: int, kind: str = "detections") -> list[str]:
    ids = [ob.put(f"edge/{DEVICE}/{kind}", {"n": i}) for i in range(n)]
    ob.flush()
    return ids


def batches(c: Collector) -> list[list[tuple[str, dict[str, object]]]]:
    with c.lock:
        return [unpack(p) for t, p, _ in c.messages if t.endswith(BATCH_KIND)]


def test_a_batch_is_deleted_only_after_its_puback_and_every_row_arrives(
    tmp_path: Path, broker: Broker
) -> None:
    path = tmp_path / "q.db"
    collector = Collector(broker.port, "edge/#")
    with Outbox(path, big_limits(), flush_interval_s=0.05) as ob:
        sync = MqttSync(cfg(broker.port, batch_threshold=1, batch_max_messages=20), DEVICE, ob)
        sync.start()
        wait_connected(sync)
        assert broker.proc is not None
        broker.proc.send_signal(signal.SIGSTOP)
        try:
            ids = fill(ob, 45) + fill(ob, 5, "sensors")
            wait_until(
                lambda: sync.published >= 20, 10, "20 published"
            )  # a batch written, no PUBACK possible
            time.sleep(0.3)
            assert sync.acked == 0
            assert read_stats(path)["pending"] == 50  # every row still on disk
        finally:
            broker.proc.send_signal(signal.SIGCONT)
        assert sync.drain(20)
        sync.stop()
    collector.wait_until(
        lambda c: sum(len(b) for b in batches(c)) >= 50, 10, "sum(len(b) for b in batches(c)) >= 50"
    )
    got = [body for b in batches(collector) for _, body in b]
    assert {g["id"] for g in got} == set(ids)
    assert all(len(b) <= 20 for b in batches(collector))
    kinds = [k for b in batches(collector) for k, _ in b]
    assert kinds.count("sensors") == 5 and kinds.count("detections") == 45
    assert not collector.on_topic("/detections")  # nothing went out one by one
    collector.close()


def test_below_the_threshold_results_go_one_by_one(tmp_path: Path, broker: Broker) -> None:
    collector = Collector(broker.port, "edge/#")
    with Outbox(tmp_path / "q.db", big_limits(), flush_interval_s=0.05) as ob:
        ids = fill(ob, 5)
        sync = MqttSync(cfg(broker.port, batch_threshold=100), DEVICE, ob)
        sync.start()
        try:
            assert sync.drain(20)
        finally:
            sync.stop()
    collector.wait_until(lambda c: set(c.ids()) == set(ids), 10, "set(c.ids()) == set(ids)")
    assert not batches(collector)
    collector.close()
