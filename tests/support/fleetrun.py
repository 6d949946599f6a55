"""One fleet outage run, shared by tests/app/collector/test_collector_e2e.py (5 x 200) and
tests/bench/bench_fleet_collect.py (200 x 500): devices (the real outbox and sync, in
``procs`` child processes of tests/support/fleet_sim.py) make results while mosquitto is down; the broker
comes back; ``edge-agent collect`` (one, or two on a shared subscription) stores them; the first
collector is kill -9'd once mid-ingest and restarted. Returns the figures; the caller asserts."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from edge_agent.adapters.collector.db import CollectorDb
from support import wait_until
from support.collector import REPO, CollectorProc
from support.mqtt import Broker, require_mosquitto


def count(url: str) -> int:
    """Rows stored (the primary key makes them distinct (device, boot, seq))."""
    db = CollectorDb(url)
    try:
        return int(db._x("SELECT COUNT(*) FROM messages").fetchone()[0]) if db.schema_version() else 0
    finally:
        db.close()


def offline(url: str) -> int:
    db = CollectorDb(url)
    try:
        return sum(d["state"] == "offline" for d in db.devices())
    finally:
        db.close()


def outage_run(
    tmp: Path,
    url: str,
    *,
    devices: int,
    per_device: int,
    procs: int = 1,
    batch: int = 0,
    batch_max: int = 20,
    group: str = "",
    kill_at: int = 1,
    rate: float = 0.0,
    timeout: float = 240,
    poll: float = 0.02,
) -> dict[str, Any]:
    require_mosquitto()
    n = devices * per_device
    broker = Broker(tmp / "broker")
    broker.start()
    names = ["col-a", "col-b"] if group else ["col-a"]
    cols = [CollectorProc(broker.port, url, tmp / f"{c}.log", c, group=group) for c in names]
    sims: list[subprocess.Popen[str]] = []
    try:
        for c in cols:
            c.start()
        # the sessions exist at the broker before the outage (its persistence keeps them)
        wait_until(
            lambda: all("subscribing" in c.text() for c in cols),
            60,
            lambda: f"subscribing\n{cols[0].text()}",
            0.2,
        )
        broker.stop()
        t_make = time.monotonic()
        per_proc = -(-devices // procs)
        for first in range(0, devices, per_proc):
            k = min(per_proc, devices - first)
            sims.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        str(REPO / "tests" / "support" / "fleet_sim.py"),
                        "--port",
                        str(broker.port),
                        "--dir",
                        str(tmp / "fleet"),
                        "--first",
                        str(first),
                        "--devices",
                        str(k),
                        "--per-device",
                        str(per_device),
                        "--batch-threshold",
                        str(batch),
                        "--batch-max",
                        str(batch_max),
                        "--timeout",
                        str(timeout),
                        "--rate",
                        str(rate),
                        *(["--wait-go"] if group else []),
                    ],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    text=True,
                )
            )
        for s in sims:
            assert s.stdout is not None
            line = s.stdout.readline().strip()
            assert line.startswith("made "), line
        made_s = time.monotonic() - t_make
        time.sleep(1.0)  # the devices retry against the dead broker
        before = [c.text().count("connected to") for c in cols]
        t0 = time.monotonic()
        broker.start()
        if group:
            # mosquitto 2.0.11 drops messages for a shared subscription restored from persistence
            # until a member reconnects (docs/collector.md): the devices go once the group is back
            reconnected = lambda: all(c.text().count("connected to") > b for c, b in zip(cols, before))  # noqa: E731
            wait_until(reconnected, 60, "every collector reconnected", 0.2)
            for s in sims:
                assert s.stdin is not None
                s.stdin.write("go\n")
                s.stdin.flush()
        wait_until(
            lambda: count(url) >= kill_at, timeout, lambda: f"{kill_at} rows\n{cols[0].text()[-2000:]}", poll
        )
        at_kill = count(url)
        cols[0].kill9()
        time.sleep(0.5)
        cols[0].start()
        wait_until(
            lambda: count(url) >= n,
            timeout,
            lambda: f"{n} rows, got {count(url)}\n{cols[0].text()[-3000:]}",
            max(poll, 0.2),
        )
        took = time.monotonic() - t0
        for s in sims:
            assert s.wait(timeout) == 0
        wait_until(lambda: offline(url) == devices, 60, "the devices' goodbyes", 0.2)
    finally:
        for s in sims:
            if s.poll() is None:
                s.kill()
        for c in cols:
            c.stop()
        broker.stop()
    db = CollectorDb(url)
    try:
        rows, keys = db.message_stats()
        ids = int(db._x("SELECT COUNT(DISTINCT msg_id) FROM messages").fetchone()[0])
        devs = db.devices()
    finally:
        db.close()
    dup = sum(_duplicates(c.text()) for c in cols)
    return {
        "n": n,
        "made_s": made_s,
        "took": took,
        "at_kill": at_kill,
        "rows": rows,
        "keys": keys,
        "ids": ids,
        "devices": devs,
        "duplicates_dropped": dup,
    }


def _duplicates(log: str) -> int:
    """Duplicates the collectors logged at their clean stop (the killed run's are not counted)."""
    total = 0
    for line in log.splitlines():
        if "duplicates dropped" in line:
            total += int(line.rsplit("duplicates dropped ", 1)[1].split(",")[0])
    return total
