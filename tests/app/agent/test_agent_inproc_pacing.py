"""The agent loop's timing as an operator reads it, in process (so mutation testing credits
app/agent/agent.py): a sensor trigger shoots a frame early in interval mode and a stop is honoured at
once while the loop waits for the next shot; the latency figures include the preparation done in
the prefetch thread and the frame's age; fps and latency are over the last 50 frames."""

from __future__ import annotations

import dataclasses
import socket
import threading
import time
from pathlib import Path
from typing import Any, Optional

import cv2
import pytest
from support.models import bright_scene, make_bright_detector
from support.world import PtySensor, make_world, offline_config, run_agent

from edge_agent.adapters.camera.capture import Camera
from edge_agent.app.agent.agent import Agent
from edge_agent.app.agent.modelset import ModelSet
from edge_agent.core.camera.source_spec import Frame
from edge_agent.inference.pipeline import Detector, DetectOutput, Prepared

SLOW_PREP_S = 0.05
SLOW_INFER_S = 0.03


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return make_world(tmp_path_factory.mktemp("world"))


def test_a_trigger_shoots_early_in_interval_mode_and_a_stop_is_honoured_while_waiting(
    tmp_path: Path, world: dict[str, Path]
) -> None:
    """interval_s = 30 with a trigger: the first frame at the start, the second when the trigger
    fires (not 30 s later); then a stop request ends the run at once, not at the next shot."""
    pty = PtySensor(tmp_path / "tty")  # temp=21.5 every 0.1 s: "temp > 20" becomes true once
    cfg = offline_config(
        tmp_path / "state",
        world["camera"],
        world["det"],
        camera="loop = true\ninterval_s = 30",
        extra=f'[sensor]\nport = "{pty.link}"\nprotocol = "kv"\ntrigger = "temp > 20"\n',
    )
    bodies: list[dict[str, Any]] = []

    def on_result(body: dict[str, Any]) -> None:
        bodies.append(body)
        if len(bodies) == 2:
            agent.stop_event.set()  # what SIGTERM does, while the loop waits ~30 s for its next shot

    agent = Agent(cfg, on_result=on_result)
    try:
        t0 = time.monotonic()
        assert run_agent(agent, 10) == 0
        took = time.monotonic() - t0
    finally:
        pty.close()
    assert len(bodies) == 2 and agent.frames == 2
    assert bodies[1]["sensor"] == {"temp": 21.5, "hum": 40}
    assert took < 5, took  # neither frame waited for the 30 s interval, nor did the stop


def test_a_stop_is_honoured_while_waiting_for_the_next_shot(tmp_path: Path, world: dict[str, Path]) -> None:
    cfg = offline_config(
        tmp_path / "state", world["camera"], world["det"], camera="loop = true\ninterval_s = 30"
    )

    def on_result(_body: dict[str, Any]) -> None:
        agent.stop_event.set()

    agent = Agent(cfg, on_result=on_result)
    t0 = time.monotonic()
    assert run_agent(agent, 10) == 0
    assert agent.frames == 1 and time.monotonic() - t0 < 5


class SlowPrepare(Detector):
    """A real detector whose preparation takes >= 50 ms (a slow CPU), counted in its ``pre_ms``,
    and whose inference takes >= 30 ms."""

    calls = 0

    def prepare(self, image_bgr: Any, ring: Any = None) -> Prepared:
        self.calls += 1
        t0 = time.perf_counter()
        time.sleep(SLOW_PREP_S)
        p = super().prepare(image_bgr, ring)
        return dataclasses.replace(p, pre_ms=(time.perf_counter() - t0) * 1e3)

    def detect_prepared(self, prep: Prepared, keep_raw: bool = False) -> DetectOutput:
        time.sleep(SLOW_INFER_S)
        return super().detect_prepared(prep, keep_raw)


def test_latency_counts_the_prefetch_threads_preparation_and_the_frames_age(
    tmp_path: Path, world: dict[str, Path]
) -> None:
    cfg = offline_config(tmp_path / "state", world["camera"], world["det"])
    base = ModelSet.from_config(cfg)
    bodies: list[dict[str, Any]] = []
    det = SlowPrepare(base.detector.model, base.detector.params)
    agent = Agent(cfg, models=ModelSet(det), on_result=bodies.append)
    assert run_agent(agent) == 0  # free-running: frames are prepared in the prefetch thread
    assert len(bodies) == 4
    assert det.calls == 4  # once each, in the prefetch thread: the loop does not prepare them again
    for b in bodies:
        t = b["timings_ms"]
        # total = the loop's part + the preparation the prefetch thread did; the frame waited for it
        assert t["pre"] >= SLOW_PREP_S * 1e3 and t["pre"] + SLOW_INFER_S * 1e3 <= t["total"] < 10_000, t
        assert SLOW_PREP_S * 1e3 <= t["age"] < 10_000, t
    assert agent.last_status is not None
    assert agent.last_status["latency_ms"]["total"] >= SLOW_PREP_S * 1e3


def test_fps_and_latency_are_over_the_last_50_frames(tmp_path: Path, world: dict[str, Path]) -> None:
    agent = Agent(offline_config(tmp_path / "state", world["camera"], world["det"]))
    agent.pipelines[0].frame_times.extend([0.0, 0.5])
    assert agent.fps() == 2.0  # two frames are enough
    # 60 frames one second apart, then 49 frames 0.1 s apart: the last 50 span 1 s + 4.8 s
    agent.pipelines[0].frame_times.extend(
        [float(i) for i in range(60)] + [60.0 + round(0.1 * i, 6) for i in range(49)]
    )
    assert agent.fps() == pytest.approx(49 / 5.8)
    # latency: the upper median of the last 50 frames (25 fast, 25 slow: the slow value)
    agent.pipelines[0].latency.extend(
        [{"total": 1.0}] * 26 + [{"total": 5.0}] * 25
    )  # the oldest fast one left
    assert agent.latency_ms() == {"total": 5.0}
    agent.pipelines[0].latency.clear()
    agent.pipelines[0].latency.extend([{"total": 5.0}] * 25 + [{"total": 1.0}] * 25)  # all 50 in the window
    assert agent.latency_ms() == {"total": 5.0}


def test_the_loop_has_its_camera_decode_large_jpegs_at_the_detectors_scale(tmp_path: Path) -> None:
    """A 1280x720 JPEG for a 64 px detector is decoded at 1/8 (libjpeg DCT scaling) by the agent's
    camera: the agent hands the detector's input size to the camera it runs, its own or a given one."""
    cam = tmp_path / "cam"
    cam.mkdir()
    cv2.imwrite(
        str(cam / "0.jpg"), bright_scene(720, 1280, [(480, 240, 320)]), [cv2.IMWRITE_JPEG_QUALITY, 90]
    )
    cfg = offline_config(tmp_path / "state", cam, make_bright_detector(tmp_path / "det.onnx"))
    seen: list[tuple[Any, Any]] = []

    class Seen(Camera):
        def read(self, timeout_s: Optional[float] = 1.0) -> Optional[Frame]:
            frame = super().read(timeout_s)
            if frame is not None:
                seen.append((frame.image.shape[:2], frame.full_size))
            return frame

    bodies: list[dict[str, Any]] = []
    assert run_agent(Agent(cfg, camera=Seen(cfg.camera), on_result=bodies.append)) == 0
    assert len(seen) == 1 and seen[0][1] == (1280, 720) and seen[0][0][1] < 1280, seen
    assert (bodies[0]["width"], bodies[0]["height"]) == (1280, 720)


class Stalled(Camera):
    """A camera that is open but delivers nothing (a stream that stopped sending)."""

    def read(self, timeout_s: Optional[float] = 1.0) -> Optional[Frame]:
        self._stop.wait(timeout_s)
        return None

    @property
    def finished(self) -> bool:
        return False


@pytest.mark.parametrize(
    "mode",
    ["long interval", "interval and trigger", "stalled camera", "stalled camera, paced", "trigger only"],
)
def test_the_watchdog_is_pinged_in_time_while_the_loop_waits(
    tmp_path: Path, world: dict[str, Path], monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """WatchdogSec=1: systemd kills the service unless a ping comes at least once a second, also
    while the loop waits for its next shot (interval_s = 30, with or without a trigger that may
    shoot early), for a camera that sends nothing, or for a trigger."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(tmp_path / "n.sock"))
    sock.settimeout(0.05)
    monkeypatch.setenv("NOTIFY_SOCKET", str(tmp_path / "n.sock"))
    monkeypatch.setenv("WATCHDOG_USEC", "1000000")  # the agent pings every 0.5 s
    pty = PtySensor(tmp_path / "tty") if "trigger" in mode else None
    cfg = offline_config(
        tmp_path / "state",
        world["camera"],
        world["det"],
        camera={"long interval": "interval_s = 30", "interval and trigger": "interval_s = 30"}.get(
            mode, "interval_s = 0.1" if mode.endswith("paced") else ""
        ),
        extra=f'[sensor]\nport = "{pty.link}"\nprotocol = "kv"\ntrigger = "temp > 20"\n' if pty else "",
    )
    agent = Agent(cfg, camera=Stalled(cfg.camera) if mode.startswith("stalled") else None)
    pings: list[float] = []
    t = threading.Thread(target=agent.run, daemon=True)
    t.start()
    try:
        deadline = time.monotonic() + 30
        while len(pings) < 4 and time.monotonic() < deadline and t.is_alive():
            try:
                if b"WATCHDOG=1" in sock.recv(4096).split(b"\n"):
                    pings.append(time.monotonic())
            except socket.timeout:
                pass
    finally:
        agent.stop_event.set()
        t.join(10)
        sock.close()
        if pty is not None:
            pty.close()
    assert len(pings) == 4, pings
    gaps = [b - a for a, b in zip(pings, pings[1:])]
    assert max(gaps) < 1.0, gaps  # 0.5 s + at most one 0.25 s turn of the loop


def test_a_frame_still_being_prepared_when_the_source_ends_is_not_lost(
    tmp_path: Path, world: dict[str, Path]
) -> None:
    """Preparing a frame took longer than the loop's 0.25 s wait for the hand-off (a large image on
    a slow board): the loop took "camera finished, nothing handed over" for the end and the last
    frame of every file/folder run was lost."""
    cam = tmp_path / "cam"
    cam.mkdir()
    for name in ("000.png", "001.png"):
        (cam / name).write_bytes((world["camera"] / name).read_bytes())
    cfg = offline_config(tmp_path / "state", cam, world["det"])
    base = ModelSet.from_config(cfg)

    class Slower(Detector):
        def prepare(self, image_bgr: Any, ring: Any = None) -> Prepared:
            time.sleep(0.4)
            return super().prepare(image_bgr, ring)

    bodies: list[dict[str, Any]] = []
    agent = Agent(
        cfg, models=ModelSet(Slower(base.detector.model, base.detector.params)), on_result=bodies.append
    )
    assert run_agent(agent) == 0  # free-running: prepared in the prefetch thread
    assert [b["image"] for b in bodies] == ["000.png", "001.png"]
