"""HTTP multipart MJPEG camera source (ESP32-CAM, mjpg-streamer, IP cameras' ``/stream``).

stdlib ``http.client`` + :mod:`edge_agent.core.camera.mjpeg_parts`; no new dependency. OpenCV's FFmpeg can
open such URLs too, but it guesses the boundary, has no way to take credentials from a file, and
a cut-off part surfaces as a decoder error in the middle of a frame; here every failure mode has
its own line: a stalled server is a timeout (reconnect), a truncated JPEG is skipped, a server
closing mid-part is a reconnect.

Basic auth: ``user:password`` in the URL, or (better: not in the config, not in logs) one line
``user:password`` in ``camera.credentials_file`` (systemd ``LoadCredential=``).
"""

from __future__ import annotations

import base64
import http.client
import socket
from collections import deque
from typing import Callable, Optional
from urllib.parse import unquote, urlsplit

import cv2
import numpy as np

from edge_agent.core.camera.mjpeg_parts import (
    MultipartError,
    MultipartParser,
    Part,
    boundary_from_content_type,
    is_complete_jpeg,
    reduced_scale,
)
from edge_agent.core.camera.source_spec import redact_source
from edge_agent.core.vision.image_header import DEFAULT_MAX_PIXELS, jpeg_size, pixel_problem
from edge_agent.errors import CameraError, ImageError

CHUNK = 64 * 1024
REDUCED_FLAGS = {2: cv2.IMREAD_REDUCED_COLOR_2, 4: cv2.IMREAD_REDUCED_COLOR_4, 8: cv2.IMREAD_REDUCED_COLOR_8}


class NotMultipart(CameraError):
    """The URL answered, but not with multipart MJPEG (an HLS/MP4 URL: let FFmpeg have it)."""


def read_credentials(path: str) -> tuple[str, str]:
    """``user:password`` from the first line of ``path``."""
    try:
        with open(path, encoding="utf-8") as f:
            line = f.readline().strip()
    except OSError as exc:
        raise CameraError(f"camera.credentials_file = {path!r}: cannot read: {exc.strerror or exc}") from None
    user, colon, password = line.partition(":")
    if not colon or not user:
        raise CameraError(
            f"camera.credentials_file = {path!r}: expected one line 'user:password', got no ':'"
        )
    return user, password


def decode_jpeg(
    data: bytes, target_hw: Optional[tuple[int, int]], max_pixels: int = DEFAULT_MAX_PIXELS
) -> tuple[np.ndarray, Optional[tuple[int, int]]]:
    """BGR image, and the JPEG's own (w, h) when it was decoded smaller (libjpeg DCT scaling at
    1/2, 1/4 or 1/8, see reduced_scale), else None.

    The size in the SOF marker is checked against ``max_pixels`` before libjpeg sees the bytes: a
    1 KB part claiming 65000x65000 took 429 MB (decoded at 1/8) before this check, and a JPEG
    whose frame header cannot be found is not handed to libjpeg at all.

    Measured here on bus.jpg (810x1080) -> 1/2 is not taken for a 640 model (1080/2 < 640);
    zidane.jpg (1280x720) -> 1/2 for a 640 model: see docs/performance.md for the decode times.
    """
    size = jpeg_size(data)
    if size is None:
        raise ImageError(f"JPEG without a readable frame header (SOF) ({len(data)} bytes), skipped")
    problem = pixel_problem(size, max_pixels)
    if problem is not None:
        raise ImageError(f"JPEG part of {problem}; not decoded")
    denom = reduced_scale(size, target_hw)
    flag = REDUCED_FLAGS.get(denom, cv2.IMREAD_COLOR)
    try:
        img = cv2.imdecode(np.frombuffer(data, np.uint8), flag)
    except cv2.error as exc:  # OpenCV's own pixel cap, a libjpeg abort: one bad part, not the stream
        raise ImageError(
            f"undecodable JPEG ({len(data)} bytes): {str(exc).strip().splitlines()[-1]}, skipped"
        ) from None
    if img is None:
        raise ImageError(f"undecodable JPEG ({len(data)} bytes), skipped")
    return np.asarray(img), (size if denom > 1 else None)


class MjpegHttpSource:
    """One open multipart response. ``read()`` gives the next complete frame."""

    def __init__(
        self,
        url: str,
        timeout_s: float,
        credentials_file: Optional[str] = None,
        target: Optional[Callable[[], Optional[tuple[int, int]]]] = None,
        max_pixels: int = DEFAULT_MAX_PIXELS,
    ) -> None:
        self.name = redact_source(url)
        self._max_pixels = max_pixels
        self.finite = False
        self.full_size: Optional[tuple[int, int]] = None
        self._target = target
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise CameraError(f"camera.source {self.name!r}: not an http(s) URL with a host")
        path = parts.path or "/"
        if parts.query:
            path += "?" + parts.query
        headers = {"User-Agent": "edge-agent", "Accept": "multipart/x-mixed-replace, image/jpeg"}
        user: Optional[str] = unquote(parts.username) if parts.username else None
        password = unquote(parts.password) if parts.password else ""
        if credentials_file:
            user, password = read_credentials(credentials_file)
        if user is not None:
            token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
            headers["Authorization"] = f"Basic {token}"
        conn_cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        self._conn = conn_cls(parts.hostname, parts.port, timeout=timeout_s)
        self._timeout = timeout_s
        try:
            self._conn.request("GET", path, headers=headers)
            resp = self._conn.getresponse()
        except (OSError, http.client.HTTPException) as exc:
            self._conn.close()
            raise CameraError(f"camera {self.name!r}: cannot connect: {exc}") from None
        if resp.status == 401:
            self._conn.close()
            raise CameraError(
                f"camera {self.name!r}: HTTP 401 unauthorized (check camera.credentials_file / the URL's user)"
            )
        if resp.status != 200:
            self._conn.close()
            raise CameraError(f"camera {self.name!r}: HTTP {resp.status} {resp.reason}")
        ctype = resp.getheader("Content-Type", "")
        boundary = boundary_from_content_type(ctype)
        if boundary is None:
            self._conn.close()
            raise NotMultipart(f"camera {self.name!r}: Content-Type {ctype!r} is not multipart MJPEG")
        self._resp = resp
        self._parser = MultipartParser(boundary)
        self._ready: deque[Part] = deque()

    def read(self) -> Optional[np.ndarray]:
        while not self._ready:
            try:
                data = self._resp.read1(CHUNK)
            except socket.timeout:
                raise CameraError(f"no data from the server for {self._timeout:.1f}s (stalled)") from None
            except (OSError, http.client.HTTPException) as exc:
                raise CameraError(f"stream broken: {exc}") from None
            if not data:
                where = "mid-part" if self._parser.in_part else "between parts"
                raise CameraError(f"server closed the stream {where}")
            try:
                # only the newest complete part matters: older ones in the same read are stale
                self._ready.extend(self._parser.feed(data))
            except MultipartError as exc:
                raise CameraError(f"not a usable MJPEG stream: {exc}") from None
            while len(self._ready) > 1:
                self._ready.popleft()
        part = self._ready.popleft()
        if part.truncated or not is_complete_jpeg(part.body):
            raise ImageError(f"truncated JPEG part ({len(part.body)} bytes, no end marker), skipped")
        img, self.full_size = decode_jpeg(
            part.body, self._target() if self._target else None, self._max_pixels
        )
        return img

    def close(self) -> None:
        self._conn.close()
