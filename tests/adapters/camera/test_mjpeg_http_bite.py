"""The HTTP MJPEG source's every way to end (issue 36), against a scripted local server that
answers exactly the bytes a test gives: the request a camera sees (path, auth, headers), each
refusal's one line, and where a stream stopped (between parts, mid-part, stalled, garbage)."""

from __future__ import annotations

import base64
import locale
import socket
import struct
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Optional

import cv2
import numpy as np
import pytest
from support import wait_until
from support.mjpeg import jpeg_number, numbered_jpeg

from edge_agent.adapters.camera.capture import Camera
from edge_agent.adapters.camera.mjpeg_http import (
    MjpegHttpSource,
    NotMultipart,
    decode_jpeg,
    read_credentials,
)
from edge_agent.core.config.schema import CameraConfig
from edge_agent.errors import CameraError, ImageError

OK_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: multipart/x-mixed-replace;boundary=b0\r\n\r\n"


def part(body: bytes) -> bytes:
    return b"\r\n--b0\r\nContent-Type: image/jpeg\r\nContent-Length: %d\r\n\r\n" % len(body) + body


class Scripted:
    """Answers every connection with ``reply`` then closes it, or holds it open (``hold``)."""

    def __init__(self, reply: bytes, hold: bool = False) -> None:
        self.reply, self.hold = reply, hold
        self.requests: list[bytes] = []
        self.stop = threading.Event()
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.05)  # accept() wakes to see stop: closing the socket does not wake it
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/stream"
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            conn.settimeout(None)
            with conn:
                req = b""
                while b"\r\n\r\n" not in req:
                    chunk = conn.recv(4096)
                    if not chunk:
                        break
                    req += chunk
                self.requests.append(req)
                try:
                    conn.sendall(self.reply)
                    if self.hold:
                        self.stop.wait(30)
                except OSError:
                    pass

    def header(self, name: str) -> Optional[str]:
        for line in self.requests[-1].decode("latin-1").split("\r\n")[1:]:
            key, _, value = line.partition(":")
            if key.lower() == name.lower():
                return value.strip()
        return None

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
        self.sock.close()


@pytest.fixture
def serve() -> Iterator[type[Scripted]]:
    made: list[Scripted] = []

    class Made(Scripted):
        def __init__(self, reply: bytes, hold: bool = False) -> None:
            super().__init__(reply, hold)
            made.append(self)

    yield Made
    for s in made:
        s.close()


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def test_the_request_names_the_client_what_it_takes_and_the_urls_user(serve: type[Scripted]) -> None:
    srv = serve(OK_HEAD + part(numbered_jpeg(3)))
    src = MjpegHttpSource(f"http://ad%40min:p%3Ass@127.0.0.1:{srv.port}/cam?x=1", 2.0)
    try:
        img = src.read()
        assert img is not None and jpeg_number(img) == 3 and src.full_size is None
    finally:
        src.close()
    assert srv.requests[-1].startswith(b"GET /cam?x=1 HTTP/1.1\r\n")
    assert srv.header("User-Agent") == "edge-agent"
    assert srv.header("Accept") == "multipart/x-mixed-replace, image/jpeg"
    assert srv.header("Authorization") == _basic("ad@min", "p:ss")  # percent-escapes undone
    assert "p%3Ass" not in src.name and "p:ss" not in src.name
    MjpegHttpSource(f"http://cam@127.0.0.1:{srv.port}/", 2.0).close()  # a user without a password
    assert srv.header("Authorization") == _basic("cam", "")
    MjpegHttpSource(f"http://127.0.0.1:{srv.port}", 2.0).close()
    assert srv.requests[-1].startswith(b"GET / HTTP/1.1\r\n") and srv.header("Authorization") is None


def test_a_credentials_file_overrides_the_urls_user(serve: type[Scripted], tmp_path: Path) -> None:
    srv = serve(OK_HEAD)
    cred = tmp_path / "cred"
    cred.write_text("  admin:s3:cr et \nsecond line\n")
    MjpegHttpSource(f"http://old:pw@127.0.0.1:{srv.port}/", 2.0, credentials_file=str(cred)).close()
    assert srv.header("Authorization") == _basic("admin", "s3:cr et")


def test_a_credentials_file_that_is_not_one_line_user_colon_password_is_one_line(tmp_path: Path) -> None:
    f = tmp_path / "c"
    f.write_text("admin:\n")
    assert read_credentials(str(f)) == ("admin", "")
    for bad in (":pw\n", "nocolon\n", "\n"):
        f.write_text(bad)
        with pytest.raises(CameraError) as ei:
            read_credentials(str(f))
        assert (
            str(ei.value)
            == f"camera.credentials_file = {str(f)!r}: expected one line 'user:password', got no ':'"
        )
    gone = tmp_path / "gone"
    with pytest.raises(CameraError) as ei:
        read_credentials(str(gone))
    assert str(ei.value) == f"camera.credentials_file = {str(gone)!r}: cannot read: No such file or directory"


@pytest.mark.parametrize(
    ("reply", "line"),
    [
        (
            b"HTTP/1.1 401 Unauthorized\r\n\r\n",
            "HTTP 401 unauthorized (check camera.credentials_file / the URL's user)",
        ),
        (b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n", "HTTP 404 Not Found"),
        (
            b"HTTP/1.1 200 OK\r\nContent-Type: video/mp4\r\n\r\n",
            "Content-Type 'video/mp4' is not multipart MJPEG",
        ),
        (b"HTTP/1.1 200 OK\r\n\r\n", "Content-Type '' is not multipart MJPEG"),
        (b"garbage, no HTTP\r\n\r\n", "cannot connect: "),
    ],
)
def test_an_answer_that_is_no_stream_is_one_line_naming_the_camera(
    serve: type[Scripted], reply: bytes, line: str
) -> None:
    srv = serve(reply)
    with pytest.raises(CameraError) as ei:
        MjpegHttpSource(srv.url, 2.0)
    assert str(ei.value).startswith(f"camera {srv.url!r}: {line}"), str(ei.value)
    assert isinstance(ei.value, NotMultipart) == ("Content-Type" in line)


def test_an_https_url_speaks_tls_and_a_url_without_http_is_refused(serve: type[Scripted]) -> None:
    srv = serve(OK_HEAD)  # plain HTTP: a TLS handshake with it fails
    with pytest.raises(CameraError, match="cannot connect"):
        MjpegHttpSource(f"https://127.0.0.1:{srv.port}/stream", 0.5)
    for url in ("rtsp://127.0.0.1/stream", "http:///stream", "ftp://cam/x"):
        with pytest.raises(CameraError) as ei:
            MjpegHttpSource(url, 2.0)
        assert str(ei.value) == f"camera.source {url!r}: not an http(s) URL with a host"
    closed = socket.create_server(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    with pytest.raises(CameraError, match=rf"^camera 'http://127.0.0.1:{port}/': cannot connect: "):
        MjpegHttpSource(f"http://127.0.0.1:{port}/", 2.0)


@pytest.mark.parametrize(
    ("tail", "where"),
    [
        (b"", "server closed the stream between parts"),
        (b"\r\n--b0\r\nContent-Length: 900\r\n\r\nxx", "server closed the stream mid-part"),
    ],
)
def test_a_server_that_closes_says_where_in_the_stream(
    serve: type[Scripted], tail: bytes, where: str
) -> None:
    srv = serve(OK_HEAD + part(numbered_jpeg(1)) + tail)
    src = MjpegHttpSource(srv.url, 2.0)
    try:
        assert src.read() is not None
        with pytest.raises(CameraError) as ei:
            src.read()
        assert str(ei.value) == where
    finally:
        src.close()


def test_a_stalled_server_is_a_timeout_naming_the_wait(serve: type[Scripted]) -> None:
    srv = serve(OK_HEAD, hold=True)
    src = MjpegHttpSource(srv.url, 0.3)
    try:
        with pytest.raises(CameraError) as ei:
            src.read()
        assert str(ei.value) == "no data from the server for 0.3s (stalled)"
    finally:
        src.close()


def test_a_part_claiming_more_than_the_cap_is_not_a_usable_stream(serve: type[Scripted]) -> None:
    srv = serve(OK_HEAD + b"\r\n--b0\r\nContent-Length: 999999999999\r\n\r\n", hold=True)
    src = MjpegHttpSource(srv.url, 2.0)
    try:
        with pytest.raises(CameraError, match=r"^not a usable MJPEG stream: "):
            src.read()
    finally:
        src.close()


def test_parts_in_one_read_give_the_newest_and_a_cut_one_is_skipped(serve: type[Scripted]) -> None:
    cut = numbered_jpeg(9)[:-2]  # no end marker
    srv = serve(
        OK_HEAD + part(numbered_jpeg(1)) + part(numbered_jpeg(2)) + part(cut) + b"\r\n--b0\r\n", hold=True
    )
    src = MjpegHttpSource(srv.url, 2.0)
    try:
        with pytest.raises(ImageError) as ei:
            src.read()  # all three came in one read: the newest is the cut one
        assert str(ei.value) == f"truncated JPEG part ({len(cut)} bytes, no end marker), skipped"
    finally:
        src.close()
    srv2 = serve(OK_HEAD + part(numbered_jpeg(1)) + part(numbered_jpeg(2)) + b"\r\n--b0\r\n", hold=True)
    src = MjpegHttpSource(srv2.url, 2.0)
    try:
        img = src.read()
        assert img is not None and jpeg_number(img) == 2
    finally:
        src.close()


def test_a_large_part_is_decoded_small_for_the_model_it_is_asked_for(serve: type[Scripted]) -> None:
    big = numbered_jpeg(5, (480, 640))
    srv = serve(OK_HEAD + part(big) + part(big) + b"\r\n--b0\r\n", hold=True)
    asked: list[int] = []

    def target() -> tuple[int, int]:
        asked.append(1)
        return (160, 160)

    src = MjpegHttpSource(srv.url, 2.0, target=target)
    try:
        img = src.read()
        assert img is not None and img.shape == (120, 160, 3) and jpeg_number(img) == 5
        assert src.full_size == (640, 480) and asked
    finally:
        src.close()


def _jpeg(h: int, w: int) -> bytes:
    img = np.full((h, w, 3), 200, np.uint8)
    return bytes(cv2.imencode(".jpg", img)[1].tobytes())


@pytest.mark.parametrize(
    ("target", "shape"), [((300, 300), (240, 320)), ((120, 120), (120, 160)), ((60, 60), (60, 80))]
)
def test_decode_takes_the_smallest_scale_the_model_allows(
    target: tuple[int, int], shape: tuple[int, int]
) -> None:
    img, full = decode_jpeg(_jpeg(480, 640), target)
    assert img.shape[:2] == shape and full == (640, 480)
    img, full = decode_jpeg(_jpeg(480, 640), None)
    assert img.shape[:2] == (480, 640) and full is None


def test_a_part_that_is_no_jpeg_or_too_large_is_one_line_and_not_decoded() -> None:
    with pytest.raises(ImageError) as ei:
        decode_jpeg(b"\xff\xd8nothing", None)
    assert str(ei.value) == "JPEG without a readable frame header (SOF) (9 bytes), skipped"
    with pytest.raises(ImageError, match=r"^JPEG part of 640x480 pixels .*; not decoded$"):
        decode_jpeg(_jpeg(480, 640), None, max_pixels=640 * 480 - 1)
    data = _jpeg(48, 64)
    sof = data.index(b"\xff\xc0")
    broken = data[: sof + 20] + b"\x00" * 40  # a frame header, then no image
    with pytest.raises(ImageError, match=rf"^undecodable JPEG \({len(broken)} bytes\)"):
        decode_jpeg(broken, None)


def test_a_user_is_up_to_the_first_colon_and_is_never_empty(tmp_path: Path) -> None:
    f = tmp_path / "c"
    f.write_text("admin:s3:cr:et\n")  # RFC 7617: a user-id holds no colon, a password may
    assert read_credentials(str(f)) == ("admin", "s3:cr:et")
    f.write_text(":pw:more\n")
    with pytest.raises(CameraError, match="expected one line 'user:password'"):
        read_credentials(str(f))


@pytest.mark.skipif(sys.flags.utf8_mode == 1, reason="Python's UTF-8 mode: every locale reads UTF-8")
def test_a_credentials_file_is_utf8_whatever_the_locale(tmp_path: Path) -> None:
    f = tmp_path / "c"
    f.write_bytes("kamera:pässwörd\n".encode())  # what systemd's LoadCredential= hands over, as written
    saved = locale.setlocale(locale.LC_CTYPE)
    locale.setlocale(locale.LC_CTYPE, "C")  # the service's environment without a UTF-8 locale: ASCII
    try:
        assert read_credentials(str(f)) == ("kamera", "pässwörd")
    finally:
        locale.setlocale(locale.LC_CTYPE, saved)


def test_a_connection_reset_mid_stream_is_a_broken_stream() -> None:
    sock = socket.create_server(("127.0.0.1", 0))
    opened = threading.Event()

    def serve() -> None:
        conn, _ = sock.accept()
        conn.recv(4096)
        conn.sendall(OK_HEAD)
        opened.wait(10)
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close = RST
        conn.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    src = MjpegHttpSource(f"http://127.0.0.1:{sock.getsockname()[1]}/", 5.0)
    try:
        opened.set()
        t.join(10)
        with pytest.raises(CameraError) as ei:
            src.read()
        assert str(ei.value).startswith("stream broken: ") and "reset" in str(ei.value), str(ei.value)
    finally:
        src.close()
        sock.close()


def test_a_jpeg_above_opencvs_own_cap_is_one_line_with_opencvs_reason() -> None:
    data = bytearray(_jpeg(48, 64))
    sof = data.index(b"\xff\xc0")
    data[sof + 5 : sof + 9] = struct.pack(">HH", 40000, 40000)  # 1.6 G pixels: above CV_IO_MAX_IMAGE_PIXELS
    with pytest.raises(ImageError) as ei:
        decode_jpeg(bytes(data), None, max_pixels=2 * 10**9)  # our cap raised above OpenCV's
    line = str(ei.value)
    assert line.startswith(f"undecodable JPEG ({len(data)} bytes): OpenCV(") and "\n" not in line, line
    assert line.endswith("in function 'validateInputImageSize', skipped"), line


def test_an_http_camera_is_live_so_a_frozen_stream_is_reconnected() -> None:
    sock = socket.create_server(("127.0.0.1", 0))
    done = threading.Event()

    def serve() -> None:  # the same picture over and over, one part at a time: a hung camera's buffer
        conn, _ = sock.accept()
        with conn:
            conn.recv(4096)
            try:
                conn.sendall(OK_HEAD)
                while not done.wait(0.02):
                    conn.sendall(part(numbered_jpeg(4)))
            except OSError:
                pass

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/"
    cam = Camera(CameraConfig(source=url), repeat_limit=3, max_reconnects=0)
    cam.start()
    try:
        wait_until(lambda: cam.last_error, 20.0, "a reason the stream was dropped")
        assert cam.last_error == "stream frozen: the same frame 4 times"
    finally:
        cam.stop()
        done.set()
        t.join(5)
        sock.close()
