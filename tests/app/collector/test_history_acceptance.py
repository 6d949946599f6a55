"""Issue 33's acceptance for the health history and the per-device metrics, with the real
commands: `edge-agent run` online (a status a second) next to `edge-agent collect` (metrics on)
and a real mosquitto, on SQLite and PostgreSQL. `fleet history DEVICE --json` then shows the
statuses over time (>= 2), the collector's /metrics has the device's `online` series at 1 (and
`promtool check metrics` finds nothing to lint in the scrape); after the agent stops, its goodbye
says offline with an empty backlog (a stopped device with an empty queue showed BACKLOG 1: the
goodbye carried the last tick's queue figures, counted before the drain) and `online` drops to 0."""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.request
from pathlib import Path

import pytest
from support import cli, free_port, wait_until
from support.collector import REPO, CollectorProc, fleet
from support.mqtt import Broker
from support.world import AgentProc, agent_toml

from edge_agent.adapters.collector import history
from edge_agent.adapters.collector.db import CollectorDb

pytestmark = pytest.mark.slow
DEVICE = "cam-hist"
ONLINE = f'edge_agent_device_online{{device="{DEVICE}"}}'


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        return str(r.read().decode())


def sample(text: str, key: str) -> float:
    for ln in text.splitlines():
        if ln.startswith(key + " "):
            return float(ln.rsplit(" ", 1)[1])
    return -1.0


def statuses(url: str) -> int:
    db = CollectorDb(url)
    try:
        return len(history.rows(db, DEVICE, None, 1000)) if db.schema_version() else 0
    except db.errors():
        return 0
    finally:
        db.close()


def test_an_online_agent_has_a_history_and_per_device_metrics(
    tmp_path: Path, broker: Broker, url: str
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    conf = tmp_path / "agent.toml"
    conf.write_text(
        agent_toml(
            state,
            REPO / "models" / "samples",
            REPO / "models" / "demo-detector-int8.onnx",
            port=broker.port,
            device={"id": DEVICE},
            camera={"loop": True},
        )
    )
    mport = free_port()
    col = CollectorProc(broker.port, url, tmp_path / "col.log", "col-hist", metrics_port=mport)
    col.start()
    agent = AgentProc(conf)
    try:
        wait_until(
            lambda: "subscribing" in col.text(), 30, lambda: "collector subscribed; " + col.text()[-2000:]
        )
        agent.start()
        wait_until(lambda: statuses(url) >= 3, 60, lambda: f"3 statuses stored; {statuses(url)}", every=0.5)
        wait_until(
            lambda: sample(scrape(mport), ONLINE) == 1,
            40,
            lambda: "online 1; " + scrape(mport)[-3000:],
            every=0.5,
        )
        text = scrape(mport)
        assert sample(text, f'edge_agent_device_fps{{device="{DEVICE}"}}') > 0
        assert sample(text, f'edge_agent_device_disk_free_bytes{{device="{DEVICE}"}}') > 0
        assert f'edge_agent_device_model_info{{device="{DEVICE}",model_id="' in text
        assert "# TYPE edge_agent_device_crashes_total counter" in text
        promtool = shutil.which("promtool")
        if promtool is not None:  # else the lint is skipped here (tests/core/messages says why)
            lint = subprocess.run(
                [promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60
            )
            assert lint.returncode == 0, lint.stdout + lint.stderr
        agent.stop()
        wait_until(
            lambda: sample(scrape(mport), ONLINE) == 0,
            40,
            lambda: "online 0; " + scrape(mport)[-3000:],
            every=0.5,
        )
    finally:
        agent.stop()
        col.stop()
    out = fleet("history", DEVICE, "--db", url, "--json")
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)["statuses"]
    assert len(rows) >= 2 and rows[0]["time"] < rows[-1]["time"]
    assert {"fps", "backlog", "disk_free_bytes", "crashes", "errors", "model_id", "provider"} <= set(rows[0])
    assert rows[-1]["state"] == "offline" and any(r["state"] == "running" and r["fps"] for r in rows)
    assert all(r["disk_free_bytes"] and r["model_id"] for r in rows)
    stats = json.loads(
        cli("queue", "stats", "--config", str(conf), "--json", quiet=False, timeout=120).stdout
    )
    assert stats["pending"] == 0
    assert rows[-1]["backlog"] == 0, rows[-1]  # the goodbye counts the queue as it is at the stop
    st = fleet("status", "--db", url, "--json")
    (dev,) = json.loads(st.stdout)["devices"]
    assert dev["backlog"] == 0 and dev["state"] == "offline" and dev["model_version"] not in ("", "None")
    text = fleet("history", DEVICE, "--db", url, "--since", "10m")
    assert text.returncode == 0 and text.stdout.split()[:3] == ["TIME", "(UTC)", "STATE"]
    print(f"\nhistory acceptance ({url.split(':')[0]}): {len(rows)} statuses kept")
