"""Batched vs single-result sync, side by side (run by hand, not collected by pytest).

    PYTHONPATH=$PWD python tests/bench/bench_batch_sync.py [--results 30000] [--reps 3]

A backlog of ``--results`` realistic results (two detections each) in a real outbox is drained
by ``MqttSync`` into a local mosquitto (loopback, QoS 1), once one message per result (today's
default) and once with ``batch_threshold = 1`` (500 results / 256 KiB per zlib JSON Lines
message). Reports the drain rate (results/s, from the first connect to an empty queue) and the
bytes on the wire per result, from the broker's own ``$SYS/broker/bytes/received`` and
``/sent`` counters (MQTT bytes both ways: PUBLISH + PUBACK, no TCP/IP headers). Medians.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))

from support.fleet_sim import result  # noqa: E402
from support.mqtt import Broker, Collector  # noqa: E402

from edge_agent.adapters.mqtt.sync import MqttSync  # noqa: E402
from edge_agent.adapters.outbox.outbox import Outbox  # noqa: E402
from edge_agent.core.config.schema import MqttConfig  # noqa: E402
from edge_agent.core.queue.policy import Limits  # noqa: E402

LIMITS = Limits(10**8, 10**11, 1e9)


class SysBroker(Broker):
    def _write_conf(self) -> None:
        super()._write_conf()
        self.conf.write_text(self.conf.read_text() + "sys_interval 1\n")


def sys_bytes(port: int) -> int:
    """received + sent bytes of the broker so far, once the counters have settled.

    mosquitto publishes them every ``sys_interval`` (1 s here); one read right after a drain was
    seen to miss up to ~3 MB of it (batched figures of 10-42 B/result in one evening), so read until
    two reads a publish apart differ by no more than our own probe clients' few hundred bytes.
    """
    prev = -(10**9)
    for _ in range(15):
        time.sleep(1.1)
        got = {}
        for name in ("received", "sent"):
            c = Collector(
                port, f"$SYS/broker/bytes/{name}", client_id=f"bench-sys-{name}-{time.monotonic_ns()}"
            )
            c.wait_for(lambda c: bool(c.messages), 5)
            got[name] = int(c.messages[-1][1])
            c.close()
        total = got["received"] + got["sent"]
        if total - prev <= 2048:
            return total
        prev = total
    raise RuntimeError("the broker's byte counters did not settle in 15 s")


def drain_once(
    tmp: Path, port: int, n: int, batch: int, bmax: int = 500, bkib: int = 256
) -> tuple[float, float]:
    ob = Outbox(tmp / f"q-{time.monotonic_ns()}.db", LIMITS, flush_interval_s=0.2, flush_batch=100)
    for i in range(n):
        ob.put("edge/bench-1/detections", result("bench-1", i))
    ob.flush()
    before = sys_bytes(port)
    sync = MqttSync(
        MqttConfig(
            port=port, inflight=100, batch_threshold=batch, batch_max_messages=bmax, batch_max_kib=bkib
        ),
        "bench-1",
        ob,
    )
    t0 = time.perf_counter()
    sync.start()
    ok = sync.drain(600)
    dt = time.perf_counter() - t0
    sync.stop()
    ob.close()
    assert ok, "drain timed out"
    wire = sys_bytes(port) - before
    return n / dt, wire / n


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--results", type=int, default=30000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--batch-max", type=int, default=500, help="[mqtt] batch_max_messages")
    ap.add_argument("--batch-kib", type=int, default=256, help="[mqtt] batch_max_kib")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        broker = SysBroker(tmp / "broker")
        broker.start()
        runs: dict[str, list[tuple[float, float]]] = {"single": [], "batched": []}
        try:
            for _ in range(a.reps):  # interleaved: both modes see the same machine load
                runs["single"].append(drain_once(tmp, broker.port, a.results, 0))
                runs["batched"].append(drain_once(tmp, broker.port, a.results, 1, a.batch_max, a.batch_kib))
        finally:
            broker.stop()
    med = {
        k: (statistics.median(r for r, _ in v), statistics.median(b for _, b in v)) for k, v in runs.items()
    }
    print(
        f"{a.results} results, {a.reps} reps (median), real mosquitto on loopback, QoS 1; "
        f"batches of {a.batch_max} results / {a.batch_kib} KiB"
    )
    print(f"{'mode':<10}{'drain results/s':>18}{'wire bytes/result':>20}")
    for k, (rate, b) in med.items():
        print(f"{k:<10}{rate:>18,.0f}{b:>20.1f}")
    (rs, bs), (rb, bb) = med["single"], med["batched"]
    print(f"batched / single: drain x{rb / rs:.1f}, bytes {100 * bb / bs:.0f} %")
    for k, v in runs.items():
        print(f"  {k} runs: " + ", ".join(f"{r:,.0f}/s {b:.0f} B" for r, b in v))
    return 0


if __name__ == "__main__":
    sys.exit(main())
