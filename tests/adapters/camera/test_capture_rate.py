"""A camera's ``fps_in`` is the rate of its mean frame interval, also when frames come in bursts.

Several cameras drop a frame as stale by this rate (core/camera/scheduler.py: older than two
intervals while a newer one waits). A capture thread that was not scheduled for a while reads the
frames buffered meanwhile back to back; the former mean of 1/dt then read ~50x the true rate
(found by tests/bench/bench_cameras.py: a 5 fps MJPEG camera read as 62 fps, 42 frames dropped
as stale in 20 s and the loop idle a quarter of the time)."""

from __future__ import annotations

import time
from typing import Optional

import numpy as np
import pytest
from support import wait_until

from edge_agent.adapters.camera.capture import Camera
from edge_agent.core.config.schema import CameraConfig


class Bursty:
    """A live source: two frames 1 ms apart every 200 ms (10 frames/s on average)."""

    name = "bursty"
    finite = False

    def __init__(self) -> None:
        self.n = 0

    def read(self) -> Optional[np.ndarray]:
        self.n += 1
        time.sleep(0.001 if self.n % 2 == 0 else 0.199)
        return np.full((4, 4, 3), self.n % 256, np.uint8)  # never the same bytes twice running

    def close(self) -> None:
        pass


def test_fps_in_is_the_mean_rate_of_a_bursty_source() -> None:
    cam = Camera(CameraConfig(source="rtsp://127.0.0.1:9/cam"), source_factory=Bursty)
    with cam:
        wait_until(lambda: cam.frames >= 40, 30, "40 frames")
        # scheduling delays on a loaded machine only lower the rate; a mean of 1/dt read ~500
        assert 5.0 <= cam.fps_in <= 12.5, cam.fps_in
        assert cam.stats()["fps"] == pytest.approx(cam.fps_in, abs=0.01)
