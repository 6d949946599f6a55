"""What a drain delivers, counted at the far end (run by hand, not collected by pytest).

    PYTHONPATH=$PWD python tests/bench/bench_confirm_drain.py [--backlog 100000] [--reps 3]

Side by side, interleaved, medians of ``--reps``, on one local mosquitto (loopback, QoS 1):

- bare clients: ``mosquitto_pub -q 1 -l`` fed chunks of <= 10,000 lines (one process per chunk:
  100,000 lines into one ``mosquitto_pub -l`` ended in "disconnected due to out of memory" with
  ~34,500 delivered, so that baseline was ~2.9x too high), and a paho client publishing with a
  window of 100 in flight; each counted by a QoS 1 subscriber on their own topic;
- the batched drain (``batch_threshold = 1``) with ``confirm = "puback"`` (today's default: done
  when the broker acknowledged everything) and with ``confirm = "collector"`` (done when a real
  ``edge-agent collect`` on SQLite confirmed everything); a real collector runs in both, and what
  it stored of each drain is counted in its database.
A rate is only reported beside the count that arrived; a baseline that lost messages says so.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Optional

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))

import paho.mqtt.client as mqtt  # noqa: E402
from bench_outbox import LIMITS, Counter, bare_mosquitto_pub, body, payloads  # noqa: E402
from support.collector import CollectorProc, sqlite_url  # noqa: E402
from support.mqtt import Broker  # noqa: E402
from support.waiting import wait_until  # noqa: E402

from edge_agent.adapters.collector.db import CollectorDb  # noqa: E402
from edge_agent.adapters.mqtt.sync import MqttSync  # noqa: E402
from edge_agent.adapters.outbox.outbox import Outbox  # noqa: E402
from edge_agent.core.config.schema import MqttConfig  # noqa: E402
from edge_agent.core.messages.confirm import bound, confirm_topic, merge, ranges_of  # noqa: E402
from edge_agent.core.messages.confirm import encode as encode_confirm  # noqa: E402


def bare_paho(port: int, data: list[bytes], topic: str, window: int = 100) -> float:
    done = threading.Semaphore(0)
    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"bench-paho-{time.monotonic_ns()}")
    c.max_inflight_messages_set(window)
    c.max_queued_messages_set(0)
    c.on_publish = lambda *a: done.release()
    c.connect("127.0.0.1", port)
    c.loop_start()
    t0 = time.perf_counter()
    for k in range(0, len(data), window):  # never more than a window queued in paho
        for d in data[k : k + window]:
            c.publish(topic, d, qos=1)
        for _ in data[k : k + window]:
            done.acquire()
    dt = time.perf_counter() - t0
    c.disconnect()
    c.loop_stop()
    return len(data) / dt


SEQ_RE = re.compile(rb'"seq":(\d+)')
BOOT_RE = re.compile(rb'"boot":(\d+)')


def stored(url: str, device: str) -> int:
    db = CollectorDb(url)
    try:
        return int(db._x("SELECT COUNT(*) FROM messages WHERE device = ?", (device,)).fetchone()[0])
    finally:
        db.close()


def drain(
    tmp: Path, port: int, n: int, confirm: str, device: str, url: Optional[str]
) -> tuple[float, float, int]:
    """(device rate: first connect to an empty queue; stored rate: to the collector holding all;
    stored)."""
    ob = Outbox(tmp / f"{device}.db", LIMITS, flush_interval_s=60, flush_batch=5000)
    for i in range(n):
        ob.put(f"edge/{device}/detections", {**body(i), "device_id": device})
    ob.flush()
    sync = MqttSync(
        MqttConfig(port=port, batch_threshold=1, confirm=confirm, confirm_timeout_s=60.0),
        device,
        ob,  # type: ignore[arg-type]
    )
    t0 = time.perf_counter()
    sync.start()
    ok = sync.drain(900)
    dt = time.perf_counter() - t0
    sync.stop()
    ob.close()
    assert ok, f"{confirm} drain timed out"
    if url is None:  # the minimal confirmer: what it confirmed is what arrived (it stores nothing)
        return n / dt, n / dt, n if confirm == "collector" else -1
    wait_until(lambda: stored(url, device) >= n, 300, f"{device}: collector stored {n}", every=0.1)
    return n / dt, n / (time.perf_counter() - t0), stored(url, device)


def serve_confirmer(port: int) -> None:
    """``--serve-confirmer``: a confirmer without a database, to see what the device side of the
    protocol costs when the far end is instant: every batch's seqs are confirmed at once (never use
    this outside a bench: it confirms what it did not store)."""
    seen: dict[str, dict[int, list[tuple[int, int]]]] = {}

    def on_message(cl: mqtt.Client, userdata: object, msg: mqtt.MQTTMessage) -> None:
        device = msg.topic.split("/")[1]
        got: dict[int, list[int]] = {}
        # only the numbers, by regex: json.loads of every line made this Python confirmer the
        # slowest part of the bench (the bench's bodies have one "seq" and one "boot" each)
        text = zlib.decompress(msg.payload)
        for boot, seq in zip(BOOT_RE.findall(text), SEQ_RE.findall(text)):
            got.setdefault(int(boot), []).append(int(seq))
        mine = seen.setdefault(device, {})
        for boot, q in got.items():
            mine[boot] = merge([*mine.get(boot, []), *ranges_of(q)])
        cl.publish(confirm_topic("edge", device), encode_confirm(bound(mine, {})), qos=1, retain=True)

    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="bench-confirmer")
    c.on_connect = lambda cl, *a: (cl.subscribe("edge/+/batch.zlib", qos=1), None)[1]
    c.on_message = on_message
    c.connect("127.0.0.1", port)
    c.loop_forever()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backlog", type=int, default=100_000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument(
        "--confirmer",
        choices=("collector", "minimal"),
        default="collector",
        help="the far end: a real `edge-agent collect` on SQLite (both drains store into it), or a "
        "database-less confirmer (what the device side costs with an instant far end)",
    )
    ap.add_argument("--serve-confirmer", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.serve_confirmer:
        serve_confirmer(a.serve_confirmer)
        return 0
    n = a.backlog
    runs: dict[str, list[tuple[float, int]]] = {}
    stored_rates: dict[str, list[float]] = {}

    def add(name: str, rate: float, arrived: int) -> None:
        runs.setdefault(name, []).append((rate, arrived))

    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        broker = Broker(tmp / "broker")
        broker.start()
        url = sqlite_url(tmp / "fleet.db")
        col = CollectorProc(broker.port, url, tmp / "col.log", "bench-col")
        minimal: Optional[subprocess.Popen[bytes]] = None
        if a.confirmer == "collector":
            col.start()
        else:
            minimal = subprocess.Popen([sys.executable, __file__, "--serve-confirmer", str(broker.port)])
            time.sleep(2.0)
        far: Optional[str] = url if a.confirmer == "collector" else None
        try:
            if a.confirmer == "collector":
                wait_until(lambda: "subscribing" in col.text(), 30, "collector subscribed", every=0.1)
            data = payloads(n)
            for rep in range(a.reps):
                benches: list[tuple[str, Callable[[], tuple[float, int]]]] = []
                for name, fn in (
                    (
                        "bare mosquitto_pub (chunks of 10k)",
                        lambda t: bare_mosquitto_pub(tmp, broker.port, data, t),
                    ),
                    ("bare paho, window 100", lambda t: bare_paho(broker.port, data, t)),
                ):
                    topic = f"bare/{rep}/{len(benches)}"

                    def run(fn: Callable[[str], float] = fn, topic: str = topic) -> tuple[float, int]:
                        counter = Counter(broker.port, topic)
                        try:
                            rate = fn(topic)
                            return rate, counter.settle(n)
                        finally:
                            counter.close()

                    benches.append((name, run))
                for confirm in ("puback", "collector"):
                    device = f"bench-{confirm}-{rep}"

                    def run_drain(confirm: str = confirm, device: str = device) -> tuple[float, int]:
                        rate, srate, got = drain(tmp, broker.port, n, confirm, device, far)
                        stored_rates.setdefault(f"batched drain, confirm={confirm}", []).append(srate)
                        return rate, got

                    benches.append((f"batched drain, confirm={confirm}", run_drain))
                for name, fn in benches:
                    rate, arrived = fn()
                    add(name, rate, arrived)
                    print(f"  rep {rep + 1}: {name}: {rate:,.0f}/s, {arrived} of {n} arrived", flush=True)
        finally:
            col.stop()
            if minimal is not None:
                minimal.kill()
                minimal.wait()
            broker.stop()
    print(f"\n{n} results per run, {a.reps} reps interleaved (median), mosquitto on loopback, QoS 1")
    print(f"{'':<40}{'done at the device /s':>22}{'all stored /s':>15}{'arrived (min of reps)':>24}")
    med = {}
    for name, v in runs.items():
        med[name] = statistics.median(r for r, _ in v)
        s = stored_rates.get(name)
        srate = f"{statistics.median(s):,.0f}" if s else "-"
        print(f"{name:<40}{med[name]:>22,.0f}{srate:>15}{min(x for _, x in v):>17} of {n}")
    pub, conf = med["batched drain, confirm=puback"], med["batched drain, confirm=collector"]
    print(f"confirm=collector / confirm=puback (device side): x{conf / pub:.2f}")
    print(json.dumps({k: [round(r) for r, _ in v] for k, v in runs.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
