"""The capture thread's defaults and its first open (issue 36, from camera-capture-scripted's
survivors): a frozen stream is 100 repeats, the first retry of a camera absent at start comes
after 0.5 s, a folder's JPEGs are decoded for the model's input, and what a failed first open
leaves in the counters before any retry."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import wait_until
from support.mjpeg import numbered_jpeg

from edge_agent.adapters.camera.capture import Camera
from edge_agent.core.config.schema import CameraConfig
from edge_agent.errors import CameraError

from .test_capture_bite import LIVE, Script, factory_of, image


@pytest.fixture
def cams() -> Iterator[list[Camera]]:
    made: list[Camera] = []
    yield made
    for c in made:
        c.stop()


def test_by_default_a_stream_is_frozen_after_100_repeats_of_one_frame(cams: list[Camera]) -> None:
    same = Script([image(1)] * 120, finite=False)
    cam = Camera(
        CameraConfig(source=LIVE, stall_timeout_s=60.0), source_factory=factory_of(same), max_reconnects=0
    )
    cams.append(cam)
    cam.start()
    wait_until(lambda: cam.state == "failed", 10.0, "the frozen stream given up")
    assert cam.last_error == "stream frozen: the same frame 101 times" and cam.frames == 100


def test_a_camera_absent_at_start_is_first_retried_after_half_a_second(
    cams: list[Camera], caplog: pytest.LogCaptureFixture
) -> None:
    cam = Camera(CameraConfig(source=LIVE), source_factory=factory_of(CameraError("no such device")))
    cams.append(cam)
    cam.start()
    st = cam.stats()  # the first open's failure, before any retry
    assert (st["state"], st["open_failures"], st["errors"], st["last_error"]) == (
        "reconnecting",
        1,
        1,
        "no such device",
    )
    assert all(t.daemon for t in threading.enumerate() if t.name == "camera")  # never holds an exit
    retry = f"camera {LIVE}: reopen failed (no such device), next try in 1.0s"  # after 0.5 s, then 1 s
    wait_until(lambda: retry in caplog.messages, 10.0, lambda: f"{retry!r} in {caplog.messages}")


def test_a_folders_jpeg_is_decoded_small_for_the_models_input(tmp_path: Path, cams: list[Camera]) -> None:
    (tmp_path / "a.jpg").write_bytes(numbered_jpeg(3, (480, 640)))
    cam = Camera(CameraConfig(source=str(tmp_path)))
    cams.append(cam)
    cam.decode_target = (160, 160)  # set by the agent after start-up, read at each decode
    cam.start()
    frame = cam.read(10.0)
    assert frame is not None and frame.image.shape == (120, 160, 3) and frame.full_size == (640, 480)
