"""Refused camera input is logged through LogThrottle: the first refusal as is, then every 250th
with the count (one line per refused MJPEG part was 280 lines in 14 s), on real sources: a folder
of 1,000 undecodable files and an MJPEG stream whose parts are cut short."""

from __future__ import annotations

import logging
import re
import time
from pathlib import Path

import cv2
import numpy as np
import pytest
from support.mjpeg import MjpegServer

from edge_agent.adapters.camera.capture import Camera
from edge_agent.core.config.schema import CameraConfig
from edge_agent.core.messages.log_throttle import DEVICE_EVERY

LOGGER = "edge_agent.adapters.camera.capture"


def _refusal_lines(caplog: pytest.LogCaptureFixture, what: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and what in r.getMessage()]


def _wait(cond: object, seconds: float) -> None:
    end = time.monotonic() + seconds
    while not cond() and time.monotonic() < end:  # type: ignore[operator]
        time.sleep(0.02)


def test_a_thousand_undecodable_files_make_five_lines_the_last_with_the_count(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    for i in range(1000):
        (tmp_path / f"{i:04d}.jpg").write_bytes(b"not a jpeg %d" % i)
    cv2.imwrite(str(tmp_path / "9999.jpg"), np.zeros((40, 40, 3), np.uint8))
    caplog.set_level(logging.INFO, LOGGER)
    cam = Camera(CameraConfig(source=str(tmp_path)))
    cam.start()
    try:
        _wait(lambda: cam.frames >= 1, 60)
    finally:
        cam.stop()
    assert (cam.skipped, cam.frames) == (1000, 1)  # every refusal still counted
    lines = _refusal_lines(caplog, "not a decodable image")
    assert len(lines) == 1000 // DEVICE_EVERY + 1 == 5
    assert lines[0].endswith("0000.jpg: not a decodable image (12 bytes), expected JPEG/PNG/WebP/BMP/TIFF")
    assert "(1000 refused for " in lines[-1] and "0999.jpg" in lines[-1]


def test_cut_mjpeg_parts_make_a_line_per_250_with_the_count() -> None:
    srv = MjpegServer(mode="truncate_first", after=1200, fps=2000)
    records: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record.getMessage())

    handler = Keep()
    log = logging.getLogger(LOGGER)
    log.addHandler(handler)
    old = log.level
    log.setLevel(logging.INFO)
    cam = Camera(CameraConfig(source=srv.url, stall_timeout_s=5.0))
    cam.start()
    try:
        _wait(lambda: cam.frames >= 1, 60)  # every cut part read (or skipped as stale), then a whole one
    finally:
        cam.stop()
        srv.close()
        log.removeHandler(handler)
        log.setLevel(old)
    lines = [m for m in records if "truncated JPEG part" in m]
    assert cam.skipped >= DEVICE_EVERY, cam.skipped  # enough refusals for a counted line
    assert len(lines) == cam.skipped // DEVICE_EVERY + 1
    counts = [int(m) for line in lines for m in re.findall(r"\((\d+) refused for ", line)]
    assert counts == [DEVICE_EVERY * k for k in range(1, len(lines))]
