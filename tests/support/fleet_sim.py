"""Simulated devices for the collector tests and the fleet benchmark: the REAL outbox and sync.

    python tests/support/fleet_sim.py --port P --dir D --first 0 --devices 50 --per-device 500 [--batch-threshold N]

Each device gets its own outbox file; every result is put (and committed) before the sync
starts -- with the broker down that is "results made during an outage". Then every device's
MqttSync (with a status snapshot, so the collector sees status and last will) drains until its
queue is empty and stops cleanly. Prints ``made N`` when the results are committed and
``drained N in S s`` at the end; exit 1 if a device did not drain within --timeout.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the support package
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout

from edge_agent.adapters.mqtt.sync import MqttSync
from edge_agent.adapters.outbox.outbox import Outbox
from edge_agent.core.config.schema import MqttConfig
from edge_agent.core.messages.builders import result_message
from edge_agent.core.messages.status import build_status
from support.outbox import big_limits


def result(dev: str, i: int) -> dict[str, object]:
    infer = {
        "image": f"rtsp://cam/{dev}#{i}",
        "width": 1280,
        "height": 720,
        "timings_ms": {"preprocess": 2.1, "infer": 38.4, "total": 41.2},
        "detections": [
            {"label": "person", "class_id": 0, "confidence": 0.91, "box": [12.5, 40.0, 210.2, 470.9]},
            {"label": "car", "class_id": 2, "confidence": 0.66, "box": [300.0, 200.0, 620.0, 410.0]},
        ],
    }
    return result_message(infer, device_id=dev, ts=time.time(), frame=i)


def status_fn(dev: str, ob: Outbox, sync: list[MqttSync], t0: float):  # type: ignore[no-untyped-def]
    def snap() -> dict[str, object]:
        now = time.time()
        return build_status(
            device_id=dev,
            version="sim",
            state="running",
            ts=now,
            started_at=t0,
            uptime_s=now - t0,
            ready_s=0.1,
            pid=0,
            counters={},
            fps=0.0,
            latency_ms={},
            queue=ob.stats(),
            broker=sync[0].stats() if sync else None,
            camera=None,
            sensor=None,
            provider=None,
            models={"detector": {"id": "sim-model-1"}},
            clock_synced=True,
        )

    return snap


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--dir", type=Path, required=True)
    ap.add_argument("--first", type=int, default=0)
    ap.add_argument("--devices", type=int, default=10)
    ap.add_argument("--per-device", type=int, default=100)
    ap.add_argument("--batch-threshold", type=int, default=0)
    ap.add_argument("--batch-max", type=int, default=500)
    ap.add_argument("--wait-go", action="store_true", help="start syncing only after a line on stdin")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--rate", type=float, default=0.0, help="each device's rate_limit_per_s (0: none)")
    a = ap.parse_args()
    t0 = time.time()
    boxes, syncs = [], []
    for d in range(a.first, a.first + a.devices):
        dev = f"dev{d:03d}"
        ob = Outbox(a.dir / dev / "q.db", big_limits(), flush_interval_s=0.2, flush_batch=100)
        for i in range(a.per_device):
            ob.put(f"edge/{dev}/detections", result(dev, i))
        ob.flush()
        holder: list[MqttSync] = []
        cfg = MqttConfig(
            port=a.port,
            reconnect_min_s=0.5,
            reconnect_max_s=4.0,
            inflight=100,
            batch_threshold=a.batch_threshold,
            batch_max_messages=a.batch_max,
            status_interval_s=5,
            rate_limit_per_s=a.rate,
        )
        sync = MqttSync(cfg, dev, ob, status_fn=status_fn(dev, ob, holder, t0))
        holder.append(sync)
        boxes.append(ob)
        syncs.append(sync)
    print(f"made {a.devices * a.per_device}", flush=True)
    if a.wait_go:
        sys.stdin.readline()
    start = time.monotonic()
    for s in syncs:
        s.start()
    ok = [False] * len(syncs)

    def drain(k: int) -> None:
        ok[k] = syncs[k].drain(a.timeout)

    threads = [threading.Thread(target=drain, args=(k,)) for k in range(len(syncs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    took = time.monotonic() - start
    for s in syncs:
        s.stop(timeout=5)
    for ob in boxes:
        ob.close()
    print(f"drained {sum(ok) * a.per_device} in {took:.1f} s", flush=True)
    return 0 if all(ok) else 1


if __name__ == "__main__":
    sys.exit(main())
