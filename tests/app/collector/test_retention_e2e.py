"""The acceptance of retention, with ``edge-agent collect`` running on a real mosquitto, on SQLite
and a real PostgreSQL: with retention_results_days = 1, 20,000 rows stamped two days ago (written
before and while it runs) are deleted by the collector's maintenance in batches while results
published meanwhile are stored (every one), the newer rows stay, no expired row shows as a gap,
and /metrics counts them."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from pathlib import Path

import paho.mqtt.client as mqtt
import pytest
from support import free_port, wait_until
from support.collector import CollectorProc, fleet
from support.mqtt import Broker

from edge_agent.adapters.collector.db import CollectorDb
from edge_agent.core.messages.fleet import parse

pytestmark = pytest.mark.slow
OLD = 20_000


def body(dev: str, seq: int, ts: float) -> bytes:
    return json.dumps({"id": f"{dev}-{seq}", "seq": seq, "boot": 1, "device_id": dev, "ts": ts}).encode()


def count(url: str, dev: str) -> int:
    db = CollectorDb(url)
    try:
        return int(db._x("SELECT COUNT(*) FROM messages WHERE device = ?", (dev,)).fetchone()[0])
    finally:
        db.close()


def expired_total(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    assert "# TYPE edge_agent_collector_expired_rows_total counter" in text
    out = {}
    for ln in text.splitlines():
        if ln.startswith("edge_agent_collector_expired_rows_total{"):
            out[ln.split('kind="')[1].split('"')[0]] = float(ln.rsplit(" ", 1)[1])
    return out


def test_a_day_of_retention_with_the_collector_ingesting(tmp_path: Path, broker: Broker, url: str) -> None:
    now = time.time()
    db = CollectorDb(url)
    db.migrate()
    old = [
        r
        for s in range(1, OLD + 1)
        for r in parse("edge", "edge/old/detections", body("old", s, now - 2 * 86400 + s / 100), now).records
    ]
    db.store(old[: OLD // 2], now)
    db.store(parse("edge", "edge/old/detections", body("old", OLD + 1, now), now).records, now)  # newer

    db.close()

    def more() -> None:  # the other half while the collector runs: purge and ingest overlap
        w = CollectorDb(url)
        try:
            for i in range(OLD // 2, OLD, 500):
                w.store(old[i : i + 500], now)
                time.sleep(0.05)
        finally:
            w.close()

    writer = threading.Thread(target=more)
    (tmp_path / "c.toml").write_text(
        "[collector]\nretention_results_days = 1\nmaintenance_every_s = 1\nmaintenance_batch = 500\n"
    )
    mport = free_port()
    col = CollectorProc(
        broker.port,
        url,
        tmp_path / "col.log",
        "col-1",
        metrics_port=mport,
        extra=("--config", str(tmp_path / "c.toml")),
    )
    col.start()
    pub = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="test-pub", protocol=mqtt.MQTTv5)
    try:
        wait_until(lambda: "collector: subscribed to" in col.text(), 30, lambda: col.text()[-400:], every=0.1)
        pub.connect("127.0.0.1", broker.port)
        pub.loop_start()
        writer.start()
        for s in range(1, 301):  # published while old rows come in and are purged
            pub.publish("edge/cam-1/detections", body("cam-1", s, time.time()), qos=1).wait_for_publish(10)
            time.sleep(0.01)
        writer.join(60)
        during = count(url, "cam-1")  # stored while the purge had rows to delete
        wait_until(
            lambda: count(url, "cam-1") == 300 and count(url, "old") == 1,
            120,
            lambda: col.text()[-600:],
            every=0.2,
        )
        assert during > 0, "nothing was stored while old rows were being written and deleted"
        wait_until(lambda: expired_total(mport).get("results") == OLD, 30, lambda: str(expired_total(mport)))
        assert expired_total(mport)["counts"] == 0
    finally:
        pub.disconnect()
        pub.loop_stop()
        assert col.stop() == 0, col.text()[-600:]
    out = fleet("gaps", "old", "--db", url, "--json")
    assert out.returncode == 0, out.stderr
    gaps = json.loads(out.stdout)
    assert gaps["gaps"] == [] and gaps["expired"]["rows"] == OLD
