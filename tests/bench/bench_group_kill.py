"""A group member killed mid-stream (run by hand, not collected by pytest).

    PYTHONPATH=$PWD python tests/bench/bench_group_kill.py [--publishers 8] [--per 12000]
        [--kill-after 1.0] [--broker-restart]

Two ``edge-agent collect`` share ``$share/g/...``, each with its own SQLite file; ``--publishers``
QoS 1 clients publish ``--per`` results each as fast as the broker acks them; ``--kill-after``
seconds in, the first collector is ``kill -9``'d and restarted 0.5 s later (same client id) while
publishing goes on. ``--broker-restart`` first restarts mosquitto (sessions restored from its
persistence file). Prints what each file holds, how many are in both, and how many are missing:
every message acknowledged to a publisher must be in exactly one file. Exit 1 otherwise.
(docs/collector.md, "Shared subscriptions: what mosquitto does when a member dies".)
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))

import paho.mqtt.client as mqtt  # noqa: E402
from support import poll, wait_until  # noqa: E402
from support.collector import CollectorProc, sqlite_url  # noqa: E402
from support.mqtt import Broker  # noqa: E402


def keys(db: Path) -> set[tuple[str, int]]:
    c = sqlite3.connect(db, timeout=60)
    try:
        return {(d, int(s)) for d, s in c.execute("SELECT device, seq FROM messages")}
    finally:
        c.close()


def publisher(port: int, k: int, per: int) -> None:
    dev = f"dev{k}"
    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"pub{k}", protocol=mqtt.MQTTv5)
    c.max_inflight_messages_set(100)
    c.connect("127.0.0.1", port)
    c.loop_start()
    infos = []
    for s in range(1, per + 1):
        body = {"id": f"{dev}-{s}", "seq": s, "boot": 1, "device_id": dev, "ts": 1796000000.0}
        infos.append(c.publish(f"edge/{dev}/detections", json.dumps(body).encode(), qos=1))
    for i in infos:
        i.wait_for_publish(120)
    c.disconnect()
    c.loop_stop()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--publishers", type=int, default=8)
    ap.add_argument("--per", type=int, default=12000)
    ap.add_argument("--kill-after", type=float, default=1.0)
    ap.add_argument("--broker-restart", action="store_true")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="group-kill-") as d:
        tmp = Path(d)
        broker = Broker(tmp / "broker")
        broker.start()
        dbs = [tmp / "a.db", tmp / "b.db"]
        cols = [
            CollectorProc(broker.port, sqlite_url(db), tmp / f"{n}.log", f"col-{n}", group="g")
            for n, db in zip("ab", dbs)
        ]
        try:
            for c in cols:
                c.start()
            wait_until(
                lambda: all("subscribing" in c.text() for c in cols),
                30,
                'all("subscribing" in c.text() for c in cols)',
                every=0.2,
            )
            if a.broker_restart:
                broker.stop()
                time.sleep(1)
                broker.start()
                wait_until(
                    lambda: all(c.text().count("subscribing") >= 2 for c in cols),
                    60,
                    'all(c.text().count("subscribing") >= 2 for c in cols)',
                    every=0.2,
                )
            time.sleep(1)
            pubs = [
                threading.Thread(target=publisher, args=(broker.port, k, a.per)) for k in range(a.publishers)
            ]
            t0 = time.monotonic()
            for p in pubs:
                p.start()
            time.sleep(a.kill_after)
            cols[0].kill9()
            killed = time.monotonic() - t0
            time.sleep(0.5)
            cols[0].start()
            for p in pubs:
                p.join()
            published = time.monotonic() - t0
            n = a.publishers * a.per
            poll(lambda: len(keys(dbs[0]) | keys(dbs[1])) >= n, 120, every=0.2)
            ka, kb = keys(dbs[0]), keys(dbs[1])
        finally:
            for c in cols:
                c.stop()
            broker.stop()
    missing = n - len(ka | kb)
    print(
        f"{n} published by {a.publishers} clients (done at {published:.1f} s; kill -9 at {killed:.1f} s, "
        f"restart 0.5 s later{', after a broker restart' if a.broker_restart else ''}): "
        f"collector a {len(ka)}, b {len(kb)}, in both {len(ka & kb)}, missing {missing}"
    )
    return 0 if missing == 0 and not (ka & kb) else 1


if __name__ == "__main__":
    sys.exit(main())
