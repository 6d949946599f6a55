"""Start/stop the real RTSP server (tests/support/rtsp_server.py) under Debian's python3 with GStreamer.

Tests skip with the reason when python3-gi / gir1.2-gst-rtsp-server-1.0 / the encoders are missing
(CI installs them from .ci/packages.d/issue13.txt, so there they run).
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Optional

import numpy as np
import pytest

from support import free_port

SERVER = Path(__file__).resolve().parent / "rtsp_server.py"
SYSTEM_PYTHON = os.environ.get("EDGE_AGENT_GI_PYTHON", "/usr/bin/python3")
PROBE = (
    "import gi; gi.require_version('Gst', '1.0'); gi.require_version('GstRtspServer', '1.0');"
    "from gi.repository import Gst, GstRtspServer; Gst.init(None);"
    "missing = [n for n in ('x264enc', 'rtph264pay', 'jpegenc', 'rtpjpegpay', 'appsrc', 'videoconvert')"
    " if Gst.ElementFactory.find(n) is None]; print(' '.join(missing))"
)


def require_rtsp_server() -> None:
    """Skip (with what is missing) unless Debian's python3 can run a gst-rtsp-server with x264enc."""
    if not Path(SYSTEM_PYTHON).exists():
        pytest.skip(
            f"{SYSTEM_PYTHON} not found (the RTSP server runs under the distro python3 with python3-gi)"
        )
    r = subprocess.run([SYSTEM_PYTHON, "-c", PROBE], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        pytest.skip(
            "RTSP server needs apt packages python3-gi gir1.2-gst-rtsp-server-1.0 gstreamer1.0-plugins-ugly "
            f"gstreamer1.0-plugins-good: {r.stderr.strip().splitlines()[-1] if r.stderr.strip() else r.returncode}"
        )
    if r.stdout.strip():
        pytest.skip(f"GStreamer elements missing: {r.stdout.strip()} (gstreamer1.0-plugins-ugly/-good/-base)")


class RtspServer:
    """``rtsp://127.0.0.1:PORT/cam`` (``protocols="udp"``: refuses RTP over TCP with 461, like VLC);
    ``stop()`` kills it (SIGKILL: a camera losing power), ``start()`` again."""

    def __init__(
        self,
        fps: int = 25,
        codec: str = "h264",
        port: Optional[int] = None,
        protocols: str = "any",
        size: tuple[int, int] = (320, 240),
        image: Optional[Path] = None,
    ) -> None:
        """``size`` (w, h) of the frames; ``image``: a file of raw BGR bytes of that size to serve
        (see rtsp_server.py --image) instead of the time stamp."""
        self.fps, self.codec, self.protocols = fps, codec, protocols
        self.size, self.image = size, image
        self.port = port or free_port()
        self.url = f"rtsp://127.0.0.1:{self.port}/cam"
        self.proc: Optional[subprocess.Popen[str]] = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [
                SYSTEM_PYTHON,
                str(SERVER),
                "--port",
                str(self.port),
                "--fps",
                str(self.fps),
                "--codec",
                self.codec,
                "--protocols",
                self.protocols,
                "--size",
                f"{self.size[0]}x{self.size[1]}",
                *(["--image", str(self.image)] if self.image is not None else []),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if line.strip() != "READY":
            err = self.proc.stderr.read() if self.proc.stderr else ""
            raise RuntimeError(f"RTSP server did not start: {line!r} {err[-500:]}")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(10)
            for f in (self.proc.stdout, self.proc.stderr):
                if f is not None:
                    f.close()
            self.proc = None


def stamp_of(img: np.ndarray) -> int:
    """The server's wall-clock ms (mod 2**32) a frame was made at (see rtsp_server.frame_bytes)."""
    h, w = img.shape[:2]
    grey = img if img.ndim == 2 else img[:, :, 1]
    v = 0
    for r in range(4):
        for c in range(8):
            v = (v << 1) | int(grey[int((r + 0.5) * h / 4), int((c + 0.5) * w / 8)] > 128)
    return v


def age_ms(img: np.ndarray, now_wall: Optional[float] = None) -> int:
    """How long ago (ms) the server made this frame."""
    now = int((time.time() if now_wall is None else now_wall) * 1000) & 0xFFFFFFFF
    return (now - stamp_of(img)) & 0xFFFFFFFF
