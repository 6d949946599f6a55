"""Issue 21's acceptance, with the real commands end to end: an offline `edge-agent run` makes N
results (broker down); mosquitto comes back; `edge-agent queue drain` sends them; `edge-agent
collect` (SQLite) is kill -9'd mid-ingest -- held inside its commit by another writer, so the kill
lands mid-ingest every time -- and restarted. The database then holds exactly N distinct
(device, boot, seq), and `edge-agent fleet gaps` reports none. (That the ack waits for the commit is
proven in test_collect_cmd.py, which fails when the ack is moved before the commit; here the
stuck round may hold only the drain's status message.)"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from support import cli, free_port, wait_until
from support.collector import REPO, CollectorProc, fleet, metrics, sqlite_url
from support.fleetrun import count
from support.mqtt import Broker
from support.world import agent_toml

from edge_agent.adapters.collector.db import CollectorDb

pytestmark = pytest.mark.slow
FRAMES = 120


def test_offline_agent_results_land_once_despite_a_collector_kill(tmp_path: Path, broker: Broker) -> None:
    state = tmp_path / "state"
    state.mkdir()
    conf = tmp_path / "agent.toml"
    conf.write_text(
        agent_toml(
            state,
            REPO / "models" / "samples",
            REPO / "models" / "demo-detector-int8.onnx",
            port=broker.port,
            device={"id": "cam-acc"},
            camera={"loop": True},
            mqtt={"host": None, "status_interval_s": None, "reconnect_min_s": 0.5},
            queue={"path": str(state / "q.db")},
        )
    )
    db_path = tmp_path / "fleet.db"
    url = sqlite_url(db_path)
    mport = free_port()
    col = CollectorProc(broker.port, url, tmp_path / "col.log", "col-acc", metrics_port=mport)
    col.start()
    try:
        wait_until(
            lambda: "subscribing" in col.text(),
            30,
            lambda: '"subscribing" in col.text()' + "; " + str(col.text()),
            every=0.2,
        )
        broker.stop()  # the agent is offline: every result stays in its outbox
        run = cli("run", "--config", str(conf), "--max-frames", str(FRAMES), "-q", quiet=False, timeout=300)
        assert run.returncode == 0, run.stderr[-2000:]
        stats = json.loads(
            cli("queue", "stats", "--config", str(conf), "--json", quiet=False, timeout=300).stdout
        )
        n = stats["pending"]
        assert n >= FRAMES and stats["seq"] == n  # every frame a result, nothing sent yet
        connects = col.text().count("connected to")
        broker.start()
        wait_until(
            lambda: col.text().count("connected to") > connects,
            60,
            'col.text().count("connected to") > connects',
            every=0.2,
        )
        lock = sqlite3.connect(db_path, isolation_level=None)
        lock.execute("BEGIN EXCLUSIVE")  # the collector's next commit waits: mid-ingest
        drain = cli("queue", "drain", "--config", str(conf), "--timeout", "60", quiet=False, timeout=300)
        assert drain.returncode == 0, drain.stderr[-2000:]  # the broker has them all (PUBACKs)
        wait_until(
            lambda: metrics(mport)["edge_agent_collector_taken_total"] > 0,
            30,
            'metrics(mport)["edge_agent_collector_taken_total"] > 0',
            every=0.2,
        )
        col.kill9()
        lock.execute("ROLLBACK")
        lock.close()
        assert count(url) == 0  # nothing of that round committed
        col.start()
        wait_until(
            lambda: count(url) >= n,
            60,
            lambda: "count(url) >= n" + "; " + str((count(url), n, col.text()[-2000:])),
            every=0.2,
        )
    finally:
        col.stop()
    db = CollectorDb(url)
    try:
        rows, keys = db.message_stats()
        (dev,) = db.devices()
    finally:
        db.close()
    assert rows == keys == n
    assert dev["device"] == "cam-acc" and dev["messages"] == n and dev["gaps"] == 0
    gaps = fleet("gaps", "cam-acc", "--db", url)
    assert gaps.returncode == 0 and gaps.stdout.strip() == "cam-acc: no gaps", gaps.stdout + gaps.stderr
    print(
        f"\nacceptance (SQLite): {n} results made offline, collector kill -9'd mid-ingest, {rows} rows, 0 gaps"
    )
