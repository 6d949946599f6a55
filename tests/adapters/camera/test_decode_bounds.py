"""Every decode path honours max_pixels (issue 17): HTTP MJPEG parts, video/RTSP/V4L2 frames
through cv2.VideoCapture, and formats no header reader can measure; and the reduced-scale decode
maps x and y back separately on a non-square frame."""

from __future__ import annotations

import struct
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
from support.mjpeg import jpeg_number, numbered_jpeg

from edge_agent.adapters.camera.backends import CvCaptureSource
from edge_agent.adapters.camera.capture import Camera
from edge_agent.adapters.camera.images import read_image
from edge_agent.adapters.camera.mjpeg_http import decode_jpeg
from edge_agent.core.camera.source_spec import Frame, SourceKind
from edge_agent.core.config.schema import CameraConfig
from edge_agent.errors import CameraError, ImageError

REPO = Path(__file__).resolve().parents[3]


def claims(w: int, h: int) -> bytes:
    """A 1 KB JPEG whose frame header (SOF) claims w x h."""
    data = bytearray(numbered_jpeg(1, (16, 16)))
    i = data.find(b"\xff\xc0")
    data[i + 5 : i + 9] = struct.pack(">HH", h, w)
    return bytes(data)


class PartsServer:
    """multipart MJPEG serving ``parts`` in a loop (a camera, or someone posing as one)."""

    def __init__(self, parts: list[bytes]) -> None:
        outer = self
        self.stop = threading.Event()

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "multipart/x-mixed-replace;boundary=b0")
                self.end_headers()
                try:
                    while not outer.stop.wait(0.02):
                        for p in parts:
                            head = f"\r\n--b0\r\nContent-Type: image/jpeg\r\nContent-Length: {len(p)}\r\n\r\n"
                            self.wfile.write(head.encode() + p)
                except (BrokenPipeError, ConnectionResetError):
                    return

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/stream"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def huge_then_good() -> Iterator[PartsServer]:
    s = PartsServer([claims(65000, 65000), numbered_jpeg(7)])
    yield s
    s.close()


def test_an_mjpeg_part_claiming_65000x65000_is_refused_before_decoding_under_100_mb(
    huge_then_good: PartsServer,
) -> None:
    # before: decoded at 1/8 (8125x8125), 429 MB peak RSS for this very script
    code = (
        "from edge_agent.adapters.camera.mjpeg_http import MjpegHttpSource\n"
        "from edge_agent.errors import ImageError\n"
        f"s = MjpegHttpSource({huge_then_good.url!r}, 5.0, target=lambda: (640, 640))\n"
        "for _ in range(40):\n"
        "    try:\n"
        "        s.read()\n"
        "    except ImageError as exc:\n"
        "        print(exc)\n"
        "        break\n"
    )
    # a fresh interpreter whose only child is the reader: its RUSAGE_CHILDREN is that reader alone
    probe = (
        "import resource, subprocess, sys\n"
        f"r = subprocess.run([sys.executable, '-c', {code!r}], capture_output=True, text=True)\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, r.returncode)\n"
        "sys.stdout.write(r.stdout + r.stderr)\n"
    )
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, timeout=60)
    head, _, out = r.stdout.partition("\n")
    rss_kb, rc = (int(v) for v in head.split())
    assert rc == 0, out
    assert out.strip() == (
        "JPEG part of 65000x65000 pixels (4225 MP) exceeds the limit of 40 MP (max_pixels); not decoded"
    )
    assert rss_kb / 1024 < 100, f"peak RSS {rss_kb / 1024:.0f} MB"


def test_the_camera_skips_and_counts_the_huge_part_and_keeps_streaming(huge_then_good: PartsServer) -> None:
    cam = Camera(CameraConfig(source=huge_then_good.url, max_pixels=1_000_000))
    cam.start()
    try:
        got = []
        for _ in range(200):
            f = cam.read(1.0)
            if f is not None:
                got.append(jpeg_number(f.image))
            if len(got) >= 3 and cam.stats()["skipped"] >= 3:
                break
        st = cam.stats()
        assert got[:3] == [7, 7, 7] and st["reconnects"] == 0
        assert st["skipped"] >= 3 and "65000x65000 pixels" in st["last_error"]
    finally:
        cam.stop()


def test_decode_refuses_a_jpeg_without_a_frame_header() -> None:
    data = numbered_jpeg(3)
    i = data.find(b"\xff\xc0")
    no_sof = data[:i] + b"\xff\xfe\x00\x02" + data[i + 2 :]  # SOF0 renamed to a comment: unmeasurable
    with pytest.raises(ImageError, match="without a readable frame header"):
        decode_jpeg(no_sof, None)


def test_a_video_file_with_frames_over_camera_max_pixels_is_not_opened(tmp_path: Path) -> None:
    clip = tmp_path / "clip.avi"
    vw = cv2.VideoWriter(str(clip), cv2.VideoWriter.fourcc(*"MJPG"), 10, (320, 240))
    for n in range(3):
        vw.write(cv2.cvtColor(np.full((240, 320), 40 * n, np.uint8), cv2.COLOR_GRAY2BGR))
    vw.release()
    ok = CvCaptureSource(CameraConfig(source=str(clip), max_pixels=320 * 240), SourceKind.VIDEO_FILE, 5.0)
    assert ok.read() is not None
    ok.close()
    with pytest.raises(
        CameraError, match=r"320x240 pixels .* exceeds the limit of 0.0768 MP \(camera.max_pixels\)"
    ):
        CvCaptureSource(CameraConfig(source=str(clip), max_pixels=320 * 240 - 1), SourceKind.VIDEO_FILE, 5.0)


def test_a_format_no_header_reader_can_measure_is_not_handed_to_cv2(tmp_path: Path) -> None:
    # Radiance HDR: cv2 decodes it (to float32: 12 bytes a pixel), neither our reader nor Pillow
    # can tell its size, so it is refused instead of decoded to see
    hdr = tmp_path / "x.hdr"
    assert cv2.imwrite(str(hdr), np.zeros((8, 8, 3), np.float32))
    assert cv2.imdecode(np.fromfile(hdr, np.uint8), cv2.IMREAD_COLOR) is not None
    with pytest.raises(ImageError, match=r"not a decodable image .* expected JPEG/PNG/WebP/BMP/TIFF"):
        read_image(hdr)


def test_reduced_decode_maps_x_and_y_back_separately_on_a_non_square_frame() -> None:
    # 1283x721 for a 320 model decodes at 1/4 to ceil(1283/4) x ceil(721/4) = 321x181: the x and y
    # factors differ (3.997 vs 3.983); one factor for both would put a box 3 px off at the bottom
    img = np.zeros((721, 1283, 3), np.uint8)
    img[680:700, 1200:1240] = 255
    _ok, buf = cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, 95])
    small, full = decode_jpeg(buf.tobytes(), (320, 320))
    assert full == (1283, 721) and small.shape[:2] == (181, 321)
    frame = Frame(image=small, ts_mono=0.0, ts_wall=0.0, seq=1, source="x", full_size=full)
    sx, sy = frame.full_scale()
    assert (sx, sy) == (1283 / 321, 721 / 181) and sx != sy
    ys, xs = np.nonzero(small[:, :, 0] > 128)
    box = (xs.min() * sx, ys.min() * sy, (xs.max() + 1) * sx, (ys.max() + 1) * sy)
    assert max(abs(a - b) for a, b in zip(box, (1200, 680, 1240, 700))) <= 4, box
