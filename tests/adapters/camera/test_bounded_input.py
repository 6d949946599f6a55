"""Bounded input: image headers checked before decoding, serial lines capped where they are read."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
import serial
from support import wait_until
from support.bigpng import write_huge_png

from edge_agent.adapters.camera.images import check_pixels, read_image
from edge_agent.adapters.sensor.serial_reader import MAX_LINE_BYTES, SerialLike, SerialSensor
from edge_agent.core.config.schema import SensorConfig
from edge_agent.core.vision.image_header import image_dimensions
from edge_agent.errors import ImageError

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("ext", [".png", ".jpg", ".bmp", ".webp", ".tiff"])
def test_header_dimensions_match_the_decoded_image(tmp_path: Path, ext: str) -> None:
    img = np.zeros((37, 53, 3), np.uint8)
    ok, buf = cv2.imencode(ext, img)
    assert ok
    data = buf.tobytes()
    dims = image_dimensions(data)
    if ext == ".tiff":
        assert dims is None  # not parsed here: Pillow reads that header
        check_pixels(data, "x.tiff", 37 * 53)
        with pytest.raises(ImageError, match="53x37 pixels"):
            check_pixels(data, "x.tiff", 37 * 53 - 1)
    else:
        assert dims == (53, 37)
    with open(tmp_path / f"x{ext}", "wb") as f:
        f.write(data)
    assert read_image(tmp_path / f"x{ext}").shape == (37, 53, 3)
    with pytest.raises(ImageError, match=r"exceeds the limit.*not decoded"):
        read_image(tmp_path / f"x{ext}", max_pixels=1000)


def _peak_rss_mb(code: str) -> tuple[float, subprocess.CompletedProcess[str]]:
    """Run ``code`` in a fresh interpreter (its only child) and return the child's peak RSS."""
    probe = (
        "import resource, subprocess, sys\n"
        f"r = subprocess.run([sys.executable, '-c', {code!r}], capture_output=True, text=True)\n"
        "sys.stdout.write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) + '\\n')\n"
        "sys.stdout.write(str(r.returncode) + '\\n' + r.stdout + '\\x00' + r.stderr)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, timeout=120)
    rss_kb, rc, rest = out.stdout.split("\n", 2)
    stdout, stderr = rest.split("\x00", 1)
    return int(rss_kb) / 1024, subprocess.CompletedProcess([], int(rc), stdout, stderr)


def test_infer_refuses_a_20000x20000_png_in_one_line_under_300_mb(tmp_path: Path) -> None:
    big = write_huge_png(tmp_path / "big.png")
    rss, r = _peak_rss_mb(
        f"import sys; from edge_agent.app.cli.main import main; sys.argv = ['edge-agent', '-q', 'infer', {str(big)!r}]; "
        "sys.exit(main())"
    )
    assert r.returncode == 1
    errors = [line for line in r.stderr.splitlines() if line.strip()]
    assert errors == [
        f"edge-agent infer: error: {big}: 20000x20000 pixels (400 MP) exceeds the limit of 40 MP "
        "(max_pixels); not decoded"
    ]
    assert rss < 300, f"peak RSS {rss:.0f} MB"


def test_folder_camera_skips_and_counts_a_huge_image_under_300_mb(tmp_path: Path) -> None:
    cam = tmp_path / "cam"
    cam.mkdir()
    cv2.imwrite(str(cam / "000.png"), np.zeros((48, 64, 3), np.uint8))
    write_huge_png(cam / "001.png")
    cv2.imwrite(str(cam / "002.png"), np.full((48, 64, 3), 255, np.uint8))
    rss, r = _peak_rss_mb(
        "from edge_agent.core.config.schema import CameraConfig\n"
        "from edge_agent.adapters.camera.capture import Camera\n"
        "from edge_agent.errors import ImageError\n"
        f"cam = Camera(CameraConfig(source={str(cam)!r}))\n"
        "cam.start()\n"
        "got = []\n"
        "while not cam.finished or len(got) < 2:\n"
        "    f = cam.read(1.0)\n"
        "    if f is not None: got.append(f.name)\n"
        "    if cam.finished and len(got) >= 2: break\n"
        "cam.stop()\n"
        "print(got, cam.stats()['skipped'], cam.stats()['last_error'])\n"
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("['000.png', '002.png'] 1 ")
    assert "20000x20000 pixels" in r.stdout
    assert rss < 300, f"peak RSS {rss:.0f} MB"


def test_serial_line_without_newline_is_bounded_and_counted(tmp_path: Path) -> None:
    master, slave = os.openpty()
    link = tmp_path / "ttyUSB0"
    link.symlink_to(os.ttyname(slave))
    os.close(slave)
    chunks: list[int] = []

    class Spy:
        def __init__(self, port: Any) -> None:
            self.port = port

        def readline(self, size: int = -1, /) -> bytes:
            data: bytes = self.port.readline(size)
            chunks.append(len(data))
            return data

        def close(self) -> None:
            self.port.close()

    def factory(url: str, baud: int, timeout: float) -> SerialLike:
        return Spy(serial.serial_for_url(url, baud, timeout=timeout))

    s = SerialSensor(SensorConfig(port=str(link), protocol="kv"), serial_factory=factory, read_timeout_s=0.05)
    s.start()
    try:
        wait_until(lambda: s.state == "reading", what="port open")
        noise = b"\x55" * (1 << 20)  # 1 MB without a newline (wrong baud rate)

        def write() -> None:
            view = memoryview(noise + b"\ntemp=21.5\n")
            while view:
                n = os.write(master, view[:65536])
                view = view[n:]

        t = threading.Thread(target=write)
        t.start()
        t.join(120)
        wait_until(lambda: s.readings == 1, timeout=60, what="the line after the noise")
        assert s.latest() == {"temp": 21.5}
        assert s.garbage == 1 and "longer than 4096 bytes" in str(s.last_error)
        assert max(chunks) <= MAX_LINE_BYTES + 1  # never more than the bound in memory
    finally:
        s.stop()
        os.close(master)
