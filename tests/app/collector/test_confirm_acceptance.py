"""End-to-end confirmation against a stock mosquitto (persistence on, everything else default:
max_queued_messages 1000, autosave_interval 1800): a collector subscribed once and stopped; an
offline device's 3,000 results are drained (`edge-agent queue drain`); the broker then loses what it
acknowledged -- `kill -9` (nothing autosaved) or the collector's session wiped by a clean-start
client using its id; the collector starts; the device drains again. With confirm = "collector"
the database holds exactly 3,000 distinct results and `fleet gaps` reports none; with "puback"
(today's default) the same run loses them: the contrast is asserted too."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import paho.mqtt.client as mqtt
import pytest
from support import cli, wait_until
from support.collector import CollectorProc, fleet, sqlite_url
from support.fleetrun import count
from support.mqtt import Broker, require_mosquitto
from support.toml_text import toml_text

from edge_agent.adapters.collector.db import CollectorDb
from edge_agent.adapters.outbox.outbox import Outbox
from edge_agent.core.queue.policy import Limits

pytestmark = pytest.mark.slow
N = 3000
DEVICE = "cam-conf"
COLLECTOR_ID = "col-conf"


def _config(tmp_path: Path, port: int, confirm: str) -> Path:
    conf = tmp_path / "agent.toml"
    doc = {
        "device": {"id": DEVICE, "state_dir": str(tmp_path)},
        "mqtt": {
            "host": "127.0.0.1",
            "port": port,
            "reconnect_min_s": 0.2,
            "reconnect_max_s": 1.0,
            "confirm": confirm,
            "confirm_timeout_s": 1.0,
        },
        "queue": {"path": str(tmp_path / "q.db")},
    }
    conf.write_text(toml_text(doc))
    return conf


def _offline_results(path: Path) -> None:
    """N results stored while offline (what `edge-agent run` leaves in the outbox)."""
    with Outbox(path, Limits(10**6, 1 << 30, 1e9, "drop_oldest"), flush_interval_s=0.05) as ob:
        for i in range(N):
            ob.put(f"edge/{DEVICE}/detections", {"ts": 1.8e9 + i, "detections": [], "frame": i})


def _subscribed(col: CollectorProc, before: int) -> Callable[[], bool]:
    return lambda: col.text().count("subscribing") > before


def _wipe_session(port: int) -> None:
    """A client connecting with the collector's id and a clean start: mosquitto discards its session."""
    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=COLLECTOR_ID, protocol=mqtt.MQTTv5)
    c.connect("127.0.0.1", port, 30, clean_start=True)
    c.loop_start()
    wait_until(c.is_connected, 10, "the clean-start client connected")
    c.disconnect()
    c.loop_stop()


def _run(tmp_path: Path, confirm: str, lose: str) -> tuple[int, int, str]:
    """The scenario; (rows, distinct keys, `fleet gaps` output)."""
    require_mosquitto()
    broker = Broker(tmp_path / "broker", stock=True)
    broker.start()
    url = sqlite_url(tmp_path / "fleet.db")
    col = CollectorProc(broker.port, url, tmp_path / "col.log", COLLECTOR_ID)
    conf = _config(tmp_path, broker.port, confirm)
    try:
        col.start()
        wait_until(_subscribed(col, 0), 30, lambda: "collector subscribed; " + col.text()[-2000:], every=0.2)
        assert col.stop() == 0  # its session stays on the broker (in memory: never autosaved)
        _offline_results(tmp_path / "q.db")
        first = cli("queue", "drain", "--config", str(conf), "--timeout", "6", quiet=False, timeout=120)
        # puback: every result acknowledged by the broker, deleted; collector: kept as SENT
        assert first.returncode == (0 if confirm == "puback" else 1), first.stderr[-2000:]
        if confirm == "collector":
            assert f"{N} of them sent and awaiting the collector's confirmation" in first.stderr
        stats = json.loads(cli("queue", "stats", "--config", str(conf), "--json", timeout=60).stdout)
        if confirm == "collector":
            assert stats["pending"] == N and stats["sent"] == N, stats
            assert stats["oldest_unconfirmed_s"] is not None
        else:
            assert stats["pending"] == 0 and stats["sent"] == 0, stats
        if lose == "kill9":
            broker.kill9()
            broker.start()
        else:
            _wipe_session(broker.port)
        col.start()
        wait_until(
            _subscribed(col, 1), 30, lambda: "collector subscribed again; " + col.text()[-2000:], every=0.2
        )
        again = cli("queue", "drain", "--config", str(conf), "--timeout", "90", quiet=False, timeout=180)
        assert again.returncode == 0, again.stderr[-2000:]
        if confirm == "collector":  # the drain ended on the confirmations: committed already
            assert count(url) == N
    finally:
        col.stop()
        broker.stop()
    db = CollectorDb(url)
    try:
        rows, keys = db.message_stats()
    finally:
        db.close()
    gaps = fleet("gaps", DEVICE, "--db", url)
    return rows, keys, gaps.stdout + gaps.stderr


@pytest.mark.parametrize("lose", ["kill9", "wiped"])
def test_with_collector_confirmation_every_result_lands_once(tmp_path: Path, lose: str) -> None:
    rows, keys, gaps = _run(tmp_path, "collector", lose)
    assert rows == keys == N
    assert gaps.strip() == f"{DEVICE}: no gaps", gaps
    print(f"\nconfirm=collector, broker {lose}: {rows} rows of {N}, no gaps")


@pytest.mark.parametrize("lose", ["kill9", "wiped"])
def test_with_puback_the_broker_loses_what_it_acknowledged(tmp_path: Path, lose: str) -> None:
    """The contrast: today's default deletes on PUBACK, and the broker drops (1000 queued at most)
    and then loses (kill -9 before an autosave / a wiped session) what it acknowledged."""
    rows, keys, _ = _run(tmp_path, "puback", lose)
    assert rows == keys and rows < N
    print(f"\nconfirm=puback, broker {lose}: {rows} rows of {N}")
