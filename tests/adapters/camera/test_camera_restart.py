"""A camera started twice, and started again after a stop, with real threads (issue 36): a second
start opens nothing and starts no second capture thread, frames come from one stream only, and a
restart after stop() opens the source anew and delivers again; a restart while the old thread is
still stuck in a read is refused with one line."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Optional

import cv2
import numpy as np
import pytest
from support import wait_until
from support.camera import FakeCapture, FakeDevice, fake_frame_number

from edge_agent.adapters.camera.capture import Camera
from edge_agent.core.config.schema import CameraConfig
from edge_agent.errors import CameraError


def fast_cfg(source: Any) -> CameraConfig:
    return CameraConfig(source=source, stall_timeout_s=0.3, reconnect_max_s=0.2)


def capture_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "camera" and t.is_alive()]


def test_a_second_start_opens_nothing_and_starts_no_second_thread() -> None:
    dev = FakeDevice(fps=200)
    before = len(capture_threads())
    cam = Camera(fast_cfg(0), source_factory=dev.open)
    cam.start()
    try:
        with pytest.raises(CameraError, match=r"^camera '0': already started$"):
            cam.start()
        assert dev.opens == 1, "the second start opened the device again"
        assert len(capture_threads()) == before + 1
        numbers = []
        for _ in range(20):
            f = cam.read(2.0)
            assert f is not None
            numbers.append(fake_frame_number(f.image))
        # one stream: every frame handed out is newer than the one before (two streams into one
        # slot would hand out each number twice, or go back)
        assert all(b > a for a, b in zip(numbers, numbers[1:])), numbers
    finally:
        cam.stop()
    assert len(capture_threads()) == before


def test_a_restart_after_stop_opens_the_source_again_and_delivers(tmp_path: Path) -> None:
    dev = FakeDevice(fps=200)
    before = len(capture_threads())
    cam = Camera(fast_cfg(0), source_factory=dev.open)
    cam.start()
    first = cam.read(2.0)
    assert first is not None
    cam.stop()
    assert len(capture_threads()) == before
    cam.start()
    try:
        assert dev.opens == 2 and len(capture_threads()) == before + 1
        again = [cam.read(2.0) for _ in range(3)]
        assert all(f is not None for f in again)
        assert cam.state == "streaming" and not cam.finished
        got = [fake_frame_number(f.image) for f in again if f is not None]
        assert min(got) > fake_frame_number(first.image)
    finally:
        cam.stop()
    assert len(capture_threads()) == before
    assert cam.read(0.1) is None and cam.finished is False  # stopped, not ended


def test_a_folder_stopped_and_started_again_resumes_without_handing_out_an_image_twice(
    tmp_path: Path,
) -> None:
    names = [f"img{i}.png" for i in range(6)]
    for i, name in enumerate(names):
        assert cv2.imwrite(str(tmp_path / name), np.full((8, 8, 3), i * 40, dtype=np.uint8))
    cam = Camera(fast_cfg(str(tmp_path)))
    cam.start()
    got: list[str] = []
    for _ in range(2):
        f = cam.read(2.0)
        assert f is not None
        got.append(str(f.name))
    cam.stop()
    cam.start()
    try:
        while True:
            f = cam.read(2.0)
            if f is None:
                break
            got.append(str(f.name))
    finally:
        cam.stop()
    # the one the thread held in its slot at the stop may be gone; none comes twice, none goes back
    assert got == sorted(set(got)) and len(got) >= 5 and got[-1] == "img5.png", got
    assert cam.state == "ended" and cam.frames == 6  # each image read from the folder once


class _Stuck(FakeCapture):
    """A read that hangs in the "driver" until released (what a dead USB camera does)."""

    def __init__(self, dev: FakeDevice, release: threading.Event) -> None:
        super().__init__(dev)
        self.release = release
        self.entered = threading.Event()

    def read(self) -> Optional[np.ndarray]:
        self.entered.set()
        self.release.wait(10)
        return super().read()


def test_a_restart_while_the_old_thread_is_stuck_is_refused_then_works_once_it_ends() -> None:
    dev = FakeDevice(fps=200)
    release = threading.Event()
    opened: list[_Stuck] = []

    def factory() -> _Stuck:
        dev.opens += 1
        src = _Stuck(dev, release if not opened else threading.Event())
        opened.append(src)
        if len(opened) > 1:
            src.release.set()
        return src

    cam = Camera(fast_cfg(0), source_factory=factory)
    cam.start()
    assert opened[0].entered.wait(5)
    cam.stop(timeout_s=0.05)  # the read is stuck: stop() gives up waiting
    with pytest.raises(
        CameraError, match=r"^camera '0': still stopping \(its capture thread has not ended\)$"
    ):
        cam.start()
    assert len(opened) == 1
    release.set()
    wait_until(
        lambda: not any(t.is_alive() for t in capture_threads() if t is cam._thread), what="old thread ended"
    )
    cam.start()
    try:
        assert len(opened) == 2
        assert cam.read(2.0) is not None
    finally:
        cam.stop()
