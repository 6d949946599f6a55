"""The agent's start and stop as systemd and an operator see them, in process so the order of
events is exact: READY=1 (on a real NOTIFY_SOCKET) only after the models are loaded and the camera
is open; the sensor (a real pty) reported ``reading`` while the agent runs and ``stopped`` in the
final status, in the status file as in the snapshot."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest
from support import wait_until
from support.models import make_bright_detector
from support.world import PtySensor, make_world, offline_config, run_agent

from edge_agent.adapters.camera.capture import Camera
from edge_agent.app.agent.agent import Agent
from edge_agent.app.agent.modelset import ModelSet
from edge_agent.core.messages.status import build_status


def drain(sock: socket.socket) -> list[str]:
    """Every datagram already sent to ``sock`` (sending to a bound AF_UNIX socket is synchronous)."""
    got: list[str] = []
    while True:
        try:
            got.extend(sock.recv(4096, socket.MSG_DONTWAIT).decode().split("\n"))
        except BlockingIOError:
            return got


def test_ready_is_sent_only_after_the_models_are_loaded_and_the_camera_is_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sock_path = tmp_path / "notify.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(sock_path))
    monkeypatch.setenv("NOTIFY_SOCKET", str(sock_path))
    w = make_world(tmp_path / "w")
    events: list[str] = []

    def note(event: str) -> None:
        # the datagrams that arrived before this event, then the event itself
        events.extend(f"notify:{d}" for d in drain(sock) if d in ("READY=1", "STOPPING=1"))
        events.append(event)

    real_from_config = ModelSet.from_config

    def loading(cfg: Any) -> ModelSet:
        note("models-load-start")
        models = real_from_config(cfg)
        note("models-loaded")
        return models

    monkeypatch.setattr(ModelSet, "from_config", staticmethod(loading))

    class SpyCamera(Camera):
        def start(self) -> None:
            note("camera-open-start")
            super().start()
            # the capture thread may already have a frame: starting or streaming, never a retry
            states.append(self.state)
            note("camera-open")

    cfg = offline_config(tmp_path / "state", w["camera"], w["det"])
    results: list[int] = []
    states: list[str] = []

    def on_result(_body: dict[str, Any]) -> None:
        if not results:
            note("first-result")
        results.append(1)

    agent = Agent(cfg, camera=SpyCamera(cfg.camera), on_result=on_result)
    try:
        assert run_agent(agent) == 0
        note("returned")
    finally:
        sock.close()
    assert len(results) == 4
    assert events[:4] == ["models-load-start", "models-loaded", "camera-open-start", "camera-open"]
    assert states in (["starting"], ["streaming"])
    assert events[4:] == ["notify:READY=1", "first-result", "notify:STOPPING=1", "returned"]
    assert agent.ready_s is not None and agent.ready_s > 0


def test_the_sensor_reads_while_running_and_is_stopped_in_the_final_status(tmp_path: Path) -> None:
    w = make_world(tmp_path / "w")
    pty = PtySensor(tmp_path / "ttyUSB0")
    cfg = offline_config(
        tmp_path / "state",
        w["camera"],
        make_bright_detector(tmp_path / "det.onnx"),
        extra=f'[sensor]\nport = "{pty.link}"\nprotocol = "kv"\n',
    )
    while_running: list[dict[str, Any]] = []

    def on_result(_body: dict[str, Any]) -> None:
        if not while_running:
            # the loop waits here for the sensor thread to read its first line (a real pty)
            wait_until(lambda: agent.current_status(fresh=True)["sensor"]["readings"] > 0, what="a reading")
            while_running.append(agent.current_status(fresh=True)["sensor"])

    agent = Agent(cfg, on_result=on_result)
    try:
        assert run_agent(agent) == 0
    finally:
        pty.close()
    assert while_running and while_running[0]["state"] == "reading"
    assert agent.last_status is not None and agent.last_status["state"] == "stopped"
    assert agent.last_status["sensor"]["state"] == "stopped"
    on_disk = json.loads((tmp_path / "state" / "status.json").read_text())
    assert on_disk["state"] == "stopped" and on_disk["sensor"]["state"] == "stopped"
    assert on_disk["sensor"]["readings"] >= 1


def _snap(state: str) -> dict[str, Any]:
    return build_status(
        device_id="d",
        version="1",
        state=state,
        ts=1.0,
        started_at=0.0,
        uptime_s=1.0,
        ready_s=0.5,
        pid=1,
        counters={},
        fps=0.0,
        latency_ms={},
        queue={},
        broker=None,
        camera={"state": "streaming"},
        sensor={"state": "reading", "readings": 3},
        provider=None,
        models=None,
        clock_synced=None,
    )


@pytest.mark.parametrize(
    ("state", "parts"),
    [("running", "live"), ("draining", "live"), ("stopped", "stopped"), ("offline", "stopped")],
)
def test_the_sensor_and_camera_of_an_agent_that_is_not_running_are_stopped(state: str, parts: str) -> None:
    snap = _snap(state)
    want = (
        {"camera": "streaming", "sensor": "reading"}
        if parts == "live"
        else {"camera": "stopped", "sensor": "stopped"}
    )
    assert {"camera": snap["camera"]["state"], "sensor": snap["sensor"]["state"]} == want
    assert snap["sensor"]["readings"] == 3  # the counters stay
