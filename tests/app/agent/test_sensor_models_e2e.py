"""Sensor models end to end: ``edge-agent run`` reads the BasicMotions test recordings replayed
through a pseudo-terminal into ``[sensor] port``, classifies every window with the demo sensor
model, and the results arrive over a real mosquitto; they agree with ``infer --sensor`` on the same
file and every window is accounted. Then a garbage line, a disconnect (the pty closed and a new one
put at the port's path) with readings lost, and a burst far faster than the recording: counted.

The replay runs at 40x the recording's 10 Hz (400 readings/s, 10 s for the 4000 readings); the
windows follow the readings' own ``t`` column ([[sensor_models]] time_field), so the pace does not
change them. EDGE_AGENT_SENSOR_REALTIME=1 replays at the recorded rate (400 s)."""

from __future__ import annotations

import csv
import json
import os
import signal
import time
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from support import cli, wait_until
from support.collector import CollectorProc, sqlite_url
from support.mqtt import Broker, Collector
from support.world import World, make_world, start_agent

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
RECORDING = ROOT / "models" / "data" / "basicmotions" / "test.csv"
MODEL = ROOT / "models" / "demo-sensor.onnx"
TEST_SPLIT_ACCURACY = 0.9833  # docs/models.md: python models/train_sensor.py eval
SPEED = 1.0 if os.environ.get("EDGE_AGENT_SENSOR_REALTIME") == "1" else 40.0
CHANNELS = ["acc_x", "acc_y", "acc_z", "gyr_x", "gyr_y", "gyr_z"]


class PtyPort:
    """A pseudo-terminal whose slave is reachable at ``link``; :meth:`reconnect` closes it (the
    agent's reader sees the port go) and puts a new one at the same path, like a USB adapter
    unplugged and plugged back."""

    def __init__(self, link: Path) -> None:
        self.link = link
        self.master = -1
        self._open()

    def _open(self) -> None:
        self.master, slave = os.openpty()
        tmp = self.link.with_suffix(".new")
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(os.ttyname(slave))
        os.replace(tmp, self.link)
        os.close(slave)

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            n = os.write(self.master, view)
            view = view[n:]

    def replay(self, lines: list[bytes], rate_hz: float) -> None:
        start = time.monotonic()
        for i, line in enumerate(lines):
            delay = start + i / rate_hz - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            self.write(line)

    def reconnect(self) -> None:
        os.close(self.master)
        time.sleep(0.3)
        self._open()

    def close(self) -> None:
        os.close(self.master)


def jsonl(rows: list[dict[str, str]], t0: float = 0.0) -> list[bytes]:
    """Readings as the microcontroller would print them: one JSON object a line, with ``t``."""
    return [
        (
            json.dumps({"t": round(float(r["t"]) + t0, 3), **{c: float(r[c]) for c in CHANNELS}}) + "\n"
        ).encode()
        for r in rows
    ]


def read_status(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())  # type: ignore[no-any-return]
    except (OSError, ValueError):
        return {}


def stored(db: Path) -> dict[str, dict[str, Any]]:
    """The collector's sensor_results rows, by message id."""
    import sqlite3

    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            got = con.execute("SELECT body FROM messages WHERE kind = 'sensor_results'").fetchall()
        finally:
            con.close()
    except sqlite3.Error:
        return {}
    return {m["id"]: m for m in (json.loads(b) for (b,) in got)}


@pytest.fixture
def world(tmp_path: Path) -> World:
    return make_world(tmp_path)


def test_replayed_recordings_are_classified_as_infer_does_and_every_window_is_accounted(
    world: World, broker: Broker, tmp_path: Path
) -> None:
    rows = list(csv.DictReader(RECORDING.open(newline="")))
    port = PtyPort(tmp_path / "ttyACM0")
    extra = (
        f'[sensor]\nport = "{port.link}"\nprotocol = "jsonl"\nattach_to_results = false\n'
        f'[[sensor_models]]\nname = "activity"\nmodel = "{MODEL}"\ntime_field = "t"\nmissing = "hold"\n'
        "trigger_camera = true\n"
    )
    cfg = world.write_config(
        port=broker.port,
        extra=extra,
        camera={"loop": True, "interval_s": 0.0},  # frames only when the activity changes
        detector={"model": str(world.det)},
        mqtt={"status_interval_s": 1.0},
        queue={"flush_interval_s": 0.2},
    )
    col = Collector(broker.port, "edge/#", client_id="sensor-e2e")
    db = tmp_path / "collector.db"
    collector = CollectorProc(broker.port, sqlite_url(db), tmp_path / "col.log", "sensor-collector")
    collector.start()
    wait_until(lambda: "collector: subscribed to" in collector.text(), 30, lambda: collector.text()[-2000:])
    proc = start_agent(cfg)
    status_file = world.state / "status.json"

    def model_stats() -> dict[str, Any]:
        return dict(
            ((read_status(status_file).get("sensor") or {}).get("models") or {}).get("activity") or {}
        )

    try:
        wait_until(
            lambda: (
                (read_status(status_file).get("sensor") or {}).get("state") == "reading"
                or proc.poll() is not None
            ),
            60,
            "the agent reading the pty",
        )
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        # 1. the whole test split, paced
        port.replay(jsonl(rows), 10.0 * SPEED)
        col.wait_until(lambda c: len(c.on_topic("/activity/sensor_results")) >= 159, 60, "159 sensor results")
        clean = {m["window"]: m for m in col.on_topic("/activity/sensor_results")}
        # 2. a garbage line, a disconnect with 10 s of readings lost, then a burst
        end_t = float(rows[-1]["t"]) + 0.1
        port.write(b"%% \xff\xfe garbage after a reset\n")
        port.replay(jsonl(rows[:100], end_t), 10.0 * SPEED)
        wait_until(
            lambda: model_stats().get("readings") == 4100, 30, lambda: f"4100 readings: {model_stats()}"
        )
        port.reconnect()  # (what is still in the pty when it closes would be lost with it: read first)
        wait_until(
            lambda: (
                (read_status(status_file).get("sensor") or {}).get("reconnects", 0) >= 1
                and read_status(status_file)["sensor"]["state"] == "reading"
            ),
            30,
            "the reader back on the new pty",
        )
        port.replay(jsonl(rows[:100], end_t + 20.0), 10.0 * SPEED)  # 10 s after the last: 100 lost
        port.write(b"".join(jsonl(rows[:2000], end_t + 30.0)))  # a burst: 2000 readings at once
        wait_until(
            lambda: model_stats().get("readings") == 4000 + 2200,
            60,
            lambda: f"every reading windowed: {read_status(status_file).get('sensor')}",
        )
        time.sleep(1.0)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(60)
        finally:
            port.close()
    err = proc.stderr.read() if proc.stderr else ""
    assert rc == 0, err
    final = read_status(status_file)
    sensor = final["sensor"]
    stats = sensor["models"]["activity"]
    col.wait_until(
        lambda c: len({m["id"] for m in c.on_topic("/activity/sensor_results")}) >= stats["published"],
        30,
        "every published sensor result at the collector",
    )
    msgs = {m["id"]: m for m in col.on_topic("/activity/sensor_results")}
    col.close()
    # the collector stored every one of them, as sent
    try:
        wait_until(
            lambda: len(stored(db)) >= len(msgs), 30, lambda: f"{len(stored(db))} stored of {len(msgs)}"
        )
    finally:
        assert collector.stop() == 0, collector.text()[-2000:]
    rows = stored(db)
    assert sorted(rows) == sorted(msgs) and all(rows[k] == msgs[k] for k in msgs)

    # -- agreement with infer --sensor on the same file, and accuracy --
    r = cli("infer", "--sensor", str(RECORDING), "-m", str(MODEL), "--json", quiet=False, timeout=120)
    assert r.returncode == 0, r.stderr
    offline = [json.loads(line) for line in r.stdout.splitlines()]
    assert len(offline) == 159 and sorted(clean) == [o["window"] for o in offline]
    assert [clean[o["window"]]["label"] for o in offline] == [o["label"] for o in offline]
    assert [round(clean[o["window"]]["confidence"], 4) for o in offline] == [
        round(o["confidence"], 4) for o in offline
    ]
    labelled = [o for o in offline if "truth" in o]
    accuracy = sum(clean[o["window"]]["label"] == o["truth"] for o in labelled) / len(labelled)
    assert len(labelled) == 120 and abs(accuracy - TEST_SPLIT_ACCURACY) <= 0.02, accuracy

    # -- every message valid; every window accounted --
    import jsonschema

    schema = json.loads(resources.files("edge_agent").joinpath("schemas", "sensor_result.json").read_text())
    validator = jsonschema.Draft202012Validator(schema)
    for m in msgs.values():
        validator.validate(m)
    assert len({(m["boot"], m["seq"]) for m in msgs.values()}) == len(msgs)
    dropped = stats["dropped"]
    assert stats["windows_due"] == stats["published"] + stats["unchanged"] + sum(dropped.values()), stats
    assert len(msgs) == stats["published"]
    assert stats["readings"] == 6200 and stats["late"] == 100, stats  # 10.1 s between two readings: 100 lost
    assert dropped.get("gap", 0) >= 1, stats
    assert sensor["garbage"] >= 1 and sensor["reconnects"] >= 1, sensor
    # the camera ran on the sensor model's label changes only
    labels = [m["label"] for m in sorted(msgs.values(), key=lambda m: m["window"])]
    changes = sum(1 for i, lab in enumerate(labels) if i == 0 or lab != labels[i - 1])
    assert sensor["triggers"] == changes > 10, (sensor, changes)
    frames = final["frames"]
    assert 1 <= frames <= changes, (frames, changes)
    windows = sorted(m["window"] for m in msgs.values())
    assert windows == sorted(set(windows)) and windows[-1] == stats["windows_due"] - 1
