"""A fleet reconnect storm: 50 devices (real outbox files, real MqttSync clients) queue results
through a broker outage, then all drain into one mosquitto. Nothing may be lost; the jittered
backoff spreads the reconnects. Prints the drain time and the broker's peak connections."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from support.mqtt import Broker, Collector, require_mosquitto
from support.outbox import big_limits

from edge_agent.adapters.mqtt.sync import MqttSync
from edge_agent.adapters.outbox.outbox import Outbox
from edge_agent.core.config.schema import MqttConfig

pytestmark = pytest.mark.slow

DEVICES = 50
PER_DEVICE = 200


class SysBroker(Broker):
    """The test broker with $SYS published every second (for $SYS/broker/clients/maximum)."""

    def _write_conf(self) -> None:
        super()._write_conf()
        self.conf.write_text(self.conf.read_text() + "sys_interval 1\n")


def test_fifty_devices_drain_after_an_outage_with_nothing_lost(tmp_path: Path) -> None:
    require_mosquitto()
    broker = SysBroker(tmp_path / "broker")
    broker.start()
    collector = Collector(broker.port, "edge/+/detections", client_id="fleet-collector")
    peak = Collector(broker.port, "$SYS/broker/clients/maximum", client_id="fleet-sys")
    peak.close()
    broker.stop()  # the outage: every device queues locally and retries with jittered backoff
    boxes, syncs, ids = [], [], set()
    try:
        for d in range(DEVICES):
            ob = Outbox(tmp_path / f"dev{d:02d}" / "q.db", big_limits(), flush_interval_s=0.2)
            cfg = MqttConfig(port=broker.port, reconnect_min_s=0.5, reconnect_max_s=4.0, inflight=50)
            sync = MqttSync(cfg, f"dev{d:02d}", ob)
            sync.start()
            boxes.append(ob)
            syncs.append(sync)
        for d, ob in enumerate(boxes):
            for i in range(PER_DEVICE):
                ids.add(ob.put(f"edge/dev{d:02d}/detections", {"n": i}))
            ob.flush()
        time.sleep(3.0)  # a few failed attempts each: the retries are now spread by the jitter
        assert all(s.state != "connected" and s.connect_attempts >= 1 for s in syncs)
        broker.start()
        t0 = time.monotonic()
        done = [False] * DEVICES

        def drain(k: int) -> None:
            done[k] = syncs[k].drain(120)

        threads = [threading.Thread(target=drain, args=(k,)) for k in range(DEVICES)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(150)
        took = time.monotonic() - t0
        assert all(done), [s.last_error for s, ok in zip(syncs, done) if not ok][:3]
        collector.wait_until(lambda c: set(c.ids()) >= ids, 60, "set(c.ids()) >= ids")
        time.sleep(1.5)  # $SYS is refreshed every second
        sysmax = Collector(broker.port, "$SYS/broker/clients/maximum", client_id="fleet-sys-2")
        sysmax.wait_for(lambda c: bool(c.messages), 5)
        maximum = int(sysmax.messages[-1][1]) if sysmax.messages else -1
        sysmax.close()
    finally:
        for s in syncs:
            s.stop(timeout=2)
        for ob in boxes:
            ob.close()
        collector.close()
        broker.stop()
    got = collector.ids()
    assert set(got) == ids and len(ids) == DEVICES * PER_DEVICE  # 0 lost (duplicates allowed)
    print(
        f"\nfleet drain: {DEVICES} devices x {PER_DEVICE} results = {len(ids)} in {took:.1f} s; "
        f"broker peak connections {maximum} (incl. the collector and the $SYS reader); "
        f"{len(got) - len(ids)} duplicates"
    )
    assert 0 < maximum <= DEVICES + 3
