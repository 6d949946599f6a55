"""The agent end to end: ``edge-agent run`` as a subprocess with a folder camera, a pty serial
sensor, a real mosquitto, a NOTIFY_SOCKET, and real signals."""

from __future__ import annotations

import json
import signal
import socket
import time
from pathlib import Path
from typing import Any

import pytest
from support import cli, wait_until
from support.models import make_bright_detector
from support.mqtt import Broker, Collector
from support.world import PtySensor, World, make_world, start_agent, status

pytestmark = pytest.mark.slow


@pytest.fixture
def world(tmp_path: Path) -> World:
    """Models, a folder of 4 scenes (0..3 red squares), and a state dir."""
    return make_world(tmp_path)


def write_config(
    w: World,
    *,
    port: int = 1,
    loop: bool = False,
    extra: str = "",
    det: Path | None = None,
    mqtt: bool = True,
    mode: str = "every_frame",
    interval: float = 0.0,
    prom_port: int | None = None,
) -> Path:
    """The world's config with its classifier, a camera that gives up quickly, a broker on ``port``
    (``mqtt=False``: none) and Prometheus on ``prom_port``."""
    return w.write_config(
        port=port,
        extra=extra,
        camera={"loop": loop, "interval_s": interval, "stall_timeout_s": 1.0, "reconnect_max_s": 0.5},
        detector={"model": str(det or w.det), "conf_threshold": 0.6},
        classifier={"model": str(w.cls)},
        mqtt={"enabled": mqtt, "status_interval_s": None},
        queue={"flush_interval_s": 0.2},
        output={"mode": mode},
        health={"prometheus_port": prom_port} if prom_port else {},
    )


def queue_stats(cfg: Path) -> dict[str, Any]:
    r = cli("queue", "stats", "--config", str(cfg), "--json", quiet=False, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)  # type: ignore[no-any-return]


def test_results_with_detections_and_sensor_readings_reach_the_broker(world: World, broker: Broker) -> None:
    sensor = PtySensor(world["root"] / "ttyUSB0", garbage_every=3)
    try:
        cfg = write_config(
            world,
            port=broker.port,
            extra=f'[sensor]\nport = "{sensor.link}"\nprotocol = "kv"\npublish = true\n',
            interval=0.4,
        )
        col = Collector(broker.port, "edge/#", client_id="e2e-collector")
        proc = start_agent(cfg)
        assert proc.wait(60) == 0, proc.stderr.read() if proc.stderr else ""
        col.wait_until(
            lambda c: len(c.on_topic("/detections")) >= 4, 20, 'len(c.on_topic("/detections")) >= 4'
        )
        msgs = sorted(col.on_topic("/detections"), key=lambda m: m["image"])
        readings = col.on_topic("/sensors")
        col.close()
    finally:
        sensor.close()
    assert [m["image"] for m in msgs] == ["000.png", "001.png", "002.png", "003.png"]
    for n, m in enumerate(msgs):
        assert len(m["detections"]) == n  # one detection per red square
        assert all(d["label"] == "bright" and d["classification"]["label"] == "red" for d in m["detections"])
        assert m["device_id"] == "cam-1" and m["schema"] == 1 and len(m["id"]) == 32
        assert (
            m["models"]["detector"]["sha256"]
            == __import__("hashlib").sha256(world["det"].read_bytes()).hexdigest()
        )
        assert "clock_synced" in m and m["ts_mono"] > 0
        assert isinstance(m["sensor"], dict)
    # readings arrive every 0.1 s (garbage lines skipped); frames every 0.4 s: the later ones carry them
    assert msgs[-1]["sensor"] == {"temp": 21.5, "hum": 40}
    # publish = true: every parsed line also went out on edge/cam-1/sensors (garbage lines did not)
    assert readings and all(
        r["reading"] == {"temp": 21.5, "hum": 40} and r["device_id"] == "cam-1" for r in readings
    )
    assert queue_stats(cfg)["pending"] == 0


def test_notify_socket_gets_ready_status_and_watchdog(world: World, tmp_path: Path) -> None:
    sock_path = tmp_path / "notify.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(sock_path))
    sock.settimeout(0.5)
    from support import free_port

    prom = free_port()
    cfg = write_config(world, loop=True, mqtt=False, prom_port=prom)
    proc = start_agent(cfg, env={"NOTIFY_SOCKET": str(sock_path), "WATCHDOG_USEC": "400000"})
    got: list[str] = []
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (
            "READY=1" in got and got.count("WATCHDOG=1") >= 3 and any(g.startswith("STATUS=") for g in got)
        ):
            try:
                got.extend(sock.recv(4096).decode().split("\n"))
            except socket.timeout:
                continue
        import urllib.request

        metrics = urllib.request.urlopen(f"http://127.0.0.1:{prom}/metrics", timeout=5).read().decode()
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
        sock.close()
    frames = [line for line in metrics.splitlines() if line.startswith("edge_agent_frames_total{")]
    assert len(frames) == 1 and float(frames[0].split()[-1]) > 0
    assert 'edge_agent_queue_pending{device="cam-1"}' in metrics
    assert got.count("READY=1") == 1 and got.count("WATCHDOG=1") >= 3
    ready = got.index("READY=1")
    # systemd hears READY after the models are warm and before the loop's first watchdog ping
    # (the order against the camera opening is pinned in process: tests/app/agent/test_ready_and_stop.py)
    warm = next(i for i, g in enumerate(got) if g.startswith("STATUS=models warm"))
    assert warm < ready < got.index("WATCHDOG=1")
    assert any(g.startswith("STATUS=") and "fps" in g and "queue" in g for g in got)


def test_sigterm_keeps_every_result(world: World) -> None:
    # broker port 1 is closed: everything must stay in the queue, nothing lost at SIGTERM
    cfg = write_config(world, loop=True, port=1)
    proc = start_agent(cfg)
    wait_until(lambda: status(world).get("results", 0) >= 10, what="10 results")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0
    final = status(world)
    assert final["state"] == "stopped"
    assert queue_stats(cfg)["pending"] == final["results"] >= 10


def test_sighup_swaps_the_model_and_keeps_the_old_one_on_failure(world: World) -> None:
    cfg = write_config(world, loop=True, mqtt=False)
    proc = start_agent(cfg)
    try:
        wait_until(lambda: status(world).get("frames", 0) >= 3, what="frames")
        # a broken model: the reload fails and the agent keeps running on the old one
        bad = world["root"] / "broken.onnx"
        bad.write_bytes(world["det"].read_bytes()[:100])
        write_config(world, loop=True, mqtt=False, det=bad)
        proc.send_signal(signal.SIGHUP)
        wait_until(lambda: status(world).get("reload_failures") == 1, what="the failed reload counted")
        frames = status(world).get("frames", 0)
        wait_until(lambda: status(world).get("frames", 0) > frames + 3, what="frames after failed reload")
        assert status(world).get("reloads") == 0 and proc.poll() is None
        # a good new model with other class names: swapped in
        new = make_bright_detector(world["root"] / "det2.onnx", imgsz=96)
        write_config(world, loop=True, mqtt=False, det=new)
        proc.send_signal(signal.SIGHUP)
        wait_until(lambda: status(world).get("reloads") == 1, what="reload")
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    r = cli("queue", "export", "--config", str(cfg), quiet=False, timeout=60)
    shas = {
        json.loads(line)["payload"]["models"]["detector"]["sha256"][:12] for line in r.stdout.splitlines()
    }
    assert len(shas) == 2  # results from the old and the new detector


def test_camera_folder_removed_and_restored_recovers(world: World) -> None:
    cfg = write_config(world, loop=True, mqtt=False)
    proc = start_agent(cfg)
    moved = world["root"] / "camera-away"
    try:
        wait_until(lambda: status(world).get("frames", 0) >= 3, what="frames")
        world["camera"].rename(moved)
        wait_until(
            lambda: status(world).get("camera", {}).get("state") == "reconnecting", what="reconnecting"
        )
        moved.rename(world["camera"])
        before = status(world)["frames"]
        wait_until(
            lambda: (
                status(world).get("camera", {}).get("state") == "streaming"
                and status(world)["frames"] > before + 3
            ),
            what="recovery",
        )
        assert status(world)["camera"]["reconnects"] >= 1
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0


@pytest.mark.parametrize(
    ("snippet", "expected"),
    [
        ("[mqtt]\nhots = 'x'\n", "unknown key 'mqtt.hots'"),
        ("[mqtt]\nport = 'eighty'\n", "mqtt.port = 'eighty'"),
        ("[output]\nheartbeat_s = -5\n", "output.heartbeat_s = -5"),
        ("[device\nid = 1\n", "not valid TOML"),
        ("[output]\nmode = 'sometimes'\n", "output.mode"),
        ("[sensor]\nport = 'loop://'\ntrigger = 'pir >>> 1'\n", "pir >>> 1"),
        ("[detector]\nmodel = 'MISSING.onnx'\n", "MISSING.onnx: model file not found"),
        ("[detector]\nclasses = ['unicorn']\n", "unknown class 'unicorn'"),
    ],
)
def test_invalid_configs_give_one_clear_error(world: World, snippet: str, expected: str) -> None:
    cfg = world["root"] / "bad.toml"
    base = (
        f'[camera]\nsource = "{world["camera"]}"\n[queue]\npath = "{world["state"]}/q.db"\n'
        f'[health]\nstatus_file = "{world["state"]}/s.json"\n'
    )
    if "[detector]" in snippet:
        if "MISSING" not in snippet:
            snippet = snippet.replace("[detector]\n", f'[detector]\nmodel = "{world["det"]}"\n')
    else:
        base += f'[detector]\nmodel = "{world["det"]}"\n'

    cfg.write_text(snippet + "\n" + base if "[device" in snippet else base + snippet)
    r = cli("run", "--config", str(cfg), "--max-frames", "1", timeout=60)
    assert r.returncode == 1
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in r.stderr
    assert expected in err[0]
    if "[detector]" not in snippet:  # config-level errors name the file, model errors the model
        assert str(cfg) in err[0]
