"""A fake live camera for the camera tests (hardware that cannot exist here), kept out of the
production modules. It behaves like a V4L2/RTSP capture: frames come at a rate, ``read()`` blocks
until the next one is due, and a stalled read gives up after a timeout."""

from __future__ import annotations

import threading
import time
from typing import Optional

import numpy as np

from edge_agent.errors import CameraError


class FakeDevice:
    """A fake live camera for tests: distinct numbered frames at ``fps``, with failure switches.

    ``open`` is the frame source factory. Each image carries its frame number in pixel (0, 0)
    (3 bytes, little endian) so tests can tell frames apart. Like a real V4L2/RTSP source,
    ``read()`` blocks until the next frame is due; a stalled read gives up after ``read_timeout_s``
    (what CAP_PROP_READ_TIMEOUT_MSEC does) and returns None.
    """

    def __init__(
        self, fps: float = 100.0, shape: tuple[int, int] = (48, 64), read_timeout_s: float = 0.2
    ) -> None:
        self.period = 1.0 / fps
        self.shape = shape
        self.read_timeout_s = read_timeout_s
        self.produced = 0
        self.opens = 0
        self.unplugged = False
        self.fail_reads = 0
        self.frozen = False
        self._unstall = threading.Event()
        self._unstall.set()
        self._lock = threading.Lock()

    # switches the test flips
    def unplug(self) -> None:
        self.unplugged = True

    def replug(self) -> None:
        self.unplugged = False

    def stall(self) -> None:
        self._unstall.clear()

    def unstall(self) -> None:
        self._unstall.set()

    def open(self) -> FakeCapture:
        if self.unplugged:
            raise CameraError("fake camera: no such device")
        self.opens += 1
        return FakeCapture(self)

    def next_image(self) -> np.ndarray:
        with self._lock:
            n = self.produced
            self.produced += 1
        img = np.zeros((*self.shape, 3), dtype=np.uint8)
        img[0, 0] = (n & 0xFF, (n >> 8) & 0xFF, (n >> 16) & 0xFF)
        return img


def fake_frame_number(img: np.ndarray) -> int:
    """The frame number :class:`FakeDevice` wrote into pixel (0, 0)."""
    b, g, r = (int(v) for v in img[0, 0])
    return b | (g << 8) | (r << 16)


class FakeCapture:
    def __init__(self, dev: FakeDevice) -> None:
        self._dev = dev
        self.name = "fake"
        self.finite = False
        self._next = time.monotonic()
        self._last: Optional[np.ndarray] = None
        self._closed = False

    def read(self) -> Optional[np.ndarray]:
        dev = self._dev
        if self._closed:
            raise CameraError("fake camera: read after close")
        if dev.unplugged:
            raise CameraError("fake camera: device disconnected")
        if not dev._unstall.wait(dev.read_timeout_s):
            return None
        delay = self._next - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        self._next = max(self._next + dev.period, time.monotonic())
        if dev.fail_reads > 0:
            dev.fail_reads -= 1
            return None
        if dev.frozen and self._last is not None:
            return self._last.copy()
        self._last = dev.next_image()
        return self._last

    def close(self) -> None:
        self._closed = True
