"""A local multipart MJPEG server (stdlib) that behaves like an ESP32-CAM / mjpg-streamer ``/stream``,
with switches for the ways field cameras fail: stall, truncated JPEG, close mid-part, basic auth."""

from __future__ import annotations

import base64
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Optional

import cv2
import numpy as np

BOUNDARY = "123456789000000000000987654321"  # what the ESP32 CameraWebServer sends


def numbered_jpeg(n: int, shape: tuple[int, int] = (120, 160)) -> bytes:
    """A JPEG whose frame number reads back with :func:`jpeg_number` (big grey blocks survive JPEG)."""
    img = np.zeros((*shape, 3), np.uint8)
    h, w = shape
    for bit in range(8):
        if (n >> bit) & 1:
            img[: h // 2, bit * w // 8 : (bit + 1) * w // 8] = 255
    ok, buf = cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, 90])
    assert ok
    return bytes(buf.tobytes())


def jpeg_number(img: np.ndarray) -> int:
    h, w = img.shape[:2]
    return sum(1 << bit for bit in range(8) if img[h // 4, bit * w // 8 + w // 16].mean() > 128)


class MjpegServer:
    """``mode``: "ok", "stall" (stops sending after ``after`` parts, keeps the socket open),
    "truncate" (part number ``after`` is cut short), "truncate_first" (the first ``after`` parts
    are), "close" (closes mid-part after ``after`` parts).
    ``content_length``: send the Content-Length header (ESP32, mjpg-streamer do; some cameras don't).
    """

    def __init__(
        self,
        mode: str = "ok",
        after: int = 5,
        fps: float = 30.0,
        auth: Optional[tuple[str, str]] = None,
        content_length: bool = True,
        shape: tuple[int, int] = (120, 160),
    ) -> None:
        self.mode, self.after, self.period, self.auth = mode, after, 1.0 / fps, auth
        self.content_length = content_length
        self.shape = shape
        self.connections = 0
        self.paths: list[str] = []  # the request target of every GET, query included
        self.sent = 0
        self.stop = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                outer.serve(self)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/stream"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def serve(self, h: BaseHTTPRequestHandler) -> None:
        self.paths.append(h.path)
        if self.auth is not None:
            token = base64.b64encode(f"{self.auth[0]}:{self.auth[1]}".encode()).decode()
            if h.headers.get("Authorization") != f"Basic {token}":
                h.send_response(401)
                h.send_header("WWW-Authenticate", 'Basic realm="cam"')
                h.end_headers()
                return
        self.connections += 1
        conn = self.connections
        h.send_response(200)
        h.send_header("Content-Type", f"multipart/x-mixed-replace;boundary={BOUNDARY}")
        h.end_headers()
        n = 0
        try:
            while not self.stop.is_set():
                jpg = numbered_jpeg(self.sent % 256, self.shape)
                first_conn = conn == 1
                if first_conn and self.mode == "stall" and n >= self.after:
                    self.stop.wait(60)  # silent, socket open: what a hung camera does
                    return
                if first_conn and self.mode == "close" and n >= self.after:
                    head = (
                        f"\r\n--{BOUNDARY}\r\nContent-Type: image/jpeg\r\nContent-Length: {len(jpg)}\r\n\r\n"
                    )
                    h.wfile.write(head.encode() + jpg[: len(jpg) // 2])
                    h.wfile.flush()
                    h.connection.shutdown(socket.SHUT_RDWR)
                    return
                body = jpg
                if first_conn and self.mode == "truncate" and n == self.after:
                    body = jpg[: len(jpg) // 2]  # the camera's buffer overflowed: a cut JPEG
                if first_conn and self.mode == "truncate_first" and n < self.after:
                    body = jpg[: len(jpg) // 2]
                length = f"Content-Length: {len(body)}\r\n" if self.content_length else ""
                head = f"\r\n--{BOUNDARY}\r\nContent-Type: image/jpeg\r\n{length}\r\n"
                h.wfile.write(head.encode() + body)
                h.wfile.flush()
                self.sent += 1
                n += 1
                time.sleep(self.period)
        except (BrokenPipeError, ConnectionResetError):
            return

    def close(self) -> None:
        self.stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()
