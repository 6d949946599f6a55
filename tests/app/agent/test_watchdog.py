"""The watchdog is pinged by the loop itself: a hung inference stops the pings."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from pathlib import Path

import cv2
import pytest
from support.models import bright_scene, make_bright_detector
from support.world import agent_toml, running

from edge_agent.adapters.runtime.board import BoardInfo
from edge_agent.adapters.runtime.onnx_model import OnnxModel
from edge_agent.app.agent.agent import Agent
from edge_agent.app.agent.modelset import ModelSet
from edge_agent.core.config.schema import parse_config
from edge_agent.inference.pipeline import Detector, DetectOutput, Prepared


class HangingDetector(Detector):
    """A real detector whose inference blocks while ``hang`` is set, like a wedged driver call."""

    def __init__(self, *a: object, **kw: object) -> None:
        super().__init__(*a, **kw)  # type: ignore[arg-type]
        self.hang = threading.Event()
        self.release = threading.Event()
        self.hanging = threading.Event()

    def detect_prepared(self, prep: Prepared, keep_raw: bool = False) -> DetectOutput:
        if self.hang.is_set():
            self.hanging.set()
            self.release.wait(30)
        return super().detect_prepared(prep, keep_raw)


def test_hung_inference_stops_watchdog_pings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    imgs = tmp_path / "cam"
    imgs.mkdir()
    for i in range(3):
        cv2.imwrite(str(imgs / f"{i}.png"), bright_scene(64, 64, [(8 * i, 8, 8)]))
    det = HangingDetector(
        OnnxModel(make_bright_detector(tmp_path / "d.onnx"), board=BoardInfo("generic-x86", "t", "x86_64", 2))
    )
    queue = {"path": str(tmp_path / "q.db")}
    cfg = parse_config(
        agent_toml(tmp_path, imgs, None, device={"id": "wd"}, camera={"loop": True}, queue=queue, output=None)
    )
    sock_path = tmp_path / "n.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(sock_path))
    sock.settimeout(0.05)
    monkeypatch.setenv("NOTIFY_SOCKET", str(sock_path))
    monkeypatch.setenv("WATCHDOG_USEC", "200000")  # ping every 0.1 s
    agent = Agent(cfg, models=ModelSet(det))

    def pings_during(seconds: float) -> int:
        n, end = 0, time.monotonic() + seconds
        while time.monotonic() < end:
            with contextlib.suppress(socket.timeout):
                n += sock.recv(4096).decode().split("\n").count("WATCHDOG=1")
        return n

    try:
        with running(agent, stop_s=10):
            try:
                assert pings_during(1.0) >= 5  # healthy loop: ~10 pings a second
                det.hang.set()
                assert det.hanging.wait(5)
                pings_during(0.15)  # a ping already in flight when the hang began
                assert pings_during(1.0) == 0  # wedged inference: systemd would restart us
                det.hang.clear()
                det.release.set()
                assert pings_during(1.0) >= 5  # and the pings come back with the loop
            finally:
                det.release.set()  # before the stop: a hung detector would not see it
    finally:
        sock.close()
