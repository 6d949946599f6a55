"""camera.rtsp_transport (issue 18): against a real RTSP server that offers UDP only (gst-rtsp-server
restricted to UDP answers a TCP SETUP with 461 Unsupported Transport, as VLC and many NVRs do):
"auto" opens over UDP and says so, "tcp" fails naming the transport and the fix, and doctor gives
that fix instead of "plug the camera in". The pure parts (options, RTSP replies, SDP) first."""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from support.rtsp import RtspServer, age_ms, require_rtsp_server

from edge_agent.adapters.camera.capture import Camera
from edge_agent.adapters.camera.rtsp import probe_tcp_setup
from edge_agent.app.cli.doctor_cmd import _camera
from edge_agent.core.camera.rtsp_options import (
    capture_options,
    digest_authorization,
    first_video_control,
    parse_reply,
)
from edge_agent.core.config.schema import CameraConfig, parse_config
from edge_agent.errors import ConfigError


def test_capture_options_set_the_transport_and_keep_the_operators_other_options() -> None:
    assert capture_options("udp") == "rtsp_transport;udp"
    assert (
        capture_options("tcp", "rtsp_transport;udp|stimeout;5000000") == "stimeout;5000000|rtsp_transport;tcp"
    )


def test_rtsp_reply_and_sdp_control() -> None:
    status, headers = parse_reply(b"RTSP/1.0 461 Unsupported transport\r\nCSeq: 3\r\nSession: ab;timeout=60")
    assert status == 461 and headers == {"cseq": "3", "session": "ab;timeout=60"}
    with pytest.raises(ValueError, match="not an RTSP reply"):
        parse_reply(b"HTTP/1.1 200 OK")
    sdp = "v=0\r\na=control:*\r\nm=audio 0 RTP/AVP 0\r\na=control:trackID=2\r\nm=video 0 RTP/AVP 96\r\na=control:trackID=1\r\n"
    assert first_video_control(sdp, "rtsp://h/cam") == "rtsp://h/cam/trackID=1"
    assert first_video_control(sdp.replace("trackID=1", "rtsp://o/v"), "rtsp://h/cam/") == "rtsp://o/v"
    assert first_video_control("v=0\r\nm=video 0 RTP/AVP 96\r\n", "rtsp://h/cam/") == "rtsp://h/cam/"


def test_digest_answer_is_md5_of_ha1_nonce_ha2() -> None:
    # RFC 2069 section 2.4 example (its errata gives this response): the no-qop form cameras ask for
    got = digest_authorization(
        'Digest realm="testrealm@host.com", nonce="dcd98b7102dd2f0e8b11d0f600bfb0c093"',
        "Mufasa",
        "CircleOfLife",
        "GET",
        "/dir/index.html",
    )
    assert got is not None and 'response="1949323746fe6a43ef61f9606e7febea"' in got
    assert digest_authorization('Basic realm="x"', "u", "p", "GET", "/") is None


def test_config_takes_only_the_three_transports() -> None:
    assert parse_config("").camera.rtsp_transport == "auto"
    assert parse_config('[camera]\nrtsp_transport = "udp"\n').camera.rtsp_transport == "udp"
    with pytest.raises(ConfigError, match=r"camera\.rtsp_transport = 'http'"):
        parse_config('[camera]\nrtsp_transport = "http"\n')


@pytest.fixture
def udp_only() -> Iterator[RtspServer]:
    require_rtsp_server()
    srv = RtspServer(fps=15, protocols="udp")
    srv.start()
    yield srv
    srv.stop()


def first_frame(cam: Camera, timeout: float = 15.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not cam.finished:
        f = cam.read(0.5)
        if f is not None:
            return f
    return None


@pytest.mark.slow
def test_the_udp_only_server_refuses_tcp_with_461(udp_only: RtspServer) -> None:
    assert probe_tcp_setup(udp_only.url) == 461


@pytest.mark.slow
def test_auto_falls_back_to_udp_on_461_and_logs_it(
    udp_only: RtspServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="edge_agent.adapters.camera.rtsp")
    cam = Camera(CameraConfig(source=udp_only.url, rtsp_transport="auto", stall_timeout_s=5.0))
    cam.start()
    try:
        frame = first_frame(cam)
        assert frame is not None, cam.stats()
        assert frame.image.shape == (240, 320, 3) and age_ms(frame.image) < 3000
    finally:
        cam.stop()
    used = [r.getMessage() for r in caplog.records if "RTSP over" in r.getMessage()]
    assert used == [
        f"camera {udp_only.url}: RTSP over UDP (the server answers 461 Unsupported Transport to TCP; "
        'camera.rtsp_transport = "auto")'
    ]


@pytest.mark.slow
def test_udp_opens_the_udp_only_server(udp_only: RtspServer) -> None:
    cam = Camera(CameraConfig(source=udp_only.url, rtsp_transport="udp", stall_timeout_s=5.0))
    cam.start()
    try:
        assert first_frame(cam) is not None, cam.stats()
    finally:
        cam.stop()


@pytest.mark.slow
def test_tcp_only_names_the_transport_and_doctor_gives_the_fix(udp_only: RtspServer) -> None:
    cfg = parse_config(
        f'[camera]\nsource = "{udp_only.url}"\nrtsp_transport = "tcp"\nstall_timeout_s = 5.0\n'
    )
    cam = Camera(cfg.camera, max_reconnects=0)
    cam.start()
    try:
        assert first_frame(cam, 10.0) is None
        assert "461 Unsupported Transport to RTP over TCP" in str(cam.last_error)
        assert 'rtsp_transport = "udp"' in str(cam.last_error)
    finally:
        cam.stop()
    found: list[tuple[str, str, str]] = []
    _camera(cfg, lambda name, status, detail, fix="": found.append((status, detail, fix)))
    [(status, detail, fix)] = found
    assert status == "FAIL" and "461 Unsupported Transport" in detail
    assert fix == 'set [camera] rtsp_transport = "udp" (or "auto")' and "plug" not in fix


@pytest.mark.slow
def test_auto_stays_on_tcp_when_the_server_offers_it(caplog: pytest.LogCaptureFixture) -> None:
    require_rtsp_server()
    srv = RtspServer(fps=15)
    srv.start()
    caplog.set_level(logging.INFO, logger="edge_agent.adapters.camera.rtsp")
    cam = Camera(CameraConfig(source=srv.url, stall_timeout_s=5.0))
    try:
        cam.start()
        assert first_frame(cam) is not None, cam.stats()
    finally:
        cam.stop()
        srv.stop()
    used = [r.getMessage() for r in caplog.records if "RTSP over" in r.getMessage()]
    assert used == [f"camera {srv.url}: RTSP over TCP (camera.rtsp_transport = auto)"]


@pytest.mark.slow
def test_rtsp_frames_over_camera_max_pixels_are_not_opened() -> None:
    require_rtsp_server()
    srv = RtspServer(fps=15)
    srv.start()
    cam = Camera(
        CameraConfig(source=srv.url, max_pixels=320 * 240 - 1, stall_timeout_s=5.0), max_reconnects=0
    )
    try:
        cam.start()
        assert first_frame(cam, 10.0) is None
        assert "320x240 pixels" in str(cam.last_error) and "camera.max_pixels" in str(cam.last_error)
    finally:
        cam.stop()
        srv.stop()


def test_a_camera_url_with_a_port_that_does_not_parse_is_an_error_not_a_crash() -> None:
    """``rtsp://user:pw@host:554x/...`` passed config check and then raised out of Camera(): the
    redacted name asked urlsplit for the port; `edge-agent run` died with a traceback."""
    cam = Camera(
        CameraConfig(source="rtsp://admin:s3cret@127.0.0.1:554x/s1", stall_timeout_s=2.0), max_reconnects=0
    )
    assert cam.name == "rtsp://***@127.0.0.1:554x/s1"
    try:
        cam.start()
        assert first_frame(cam, 10.0) is None
        assert cam.last_error is not None and "s3cret" not in str(cam.last_error)
    finally:
        cam.stop()


def test_the_probe_asks_an_ipv6_camera_at_its_bracketed_address() -> None:
    """The DESCRIBE URL was built from ``hostname``, which drops the brackets: ``rtsp://::1:PORT/s1``
    is no URL a server can parse. A listener on [::1] reads what the probe sends."""
    try:
        srv = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        srv.bind(("::1", 0))
    except OSError as exc:
        pytest.skip(f"no IPv6 loopback here: {exc}")
    srv.listen(1)
    port = srv.getsockname()[1]
    seen: list[bytes] = []

    def serve() -> None:
        conn, _ = srv.accept()
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(4096)
            seen.append(data)
            conn.sendall(b"RTSP/1.0 404 Not Found\r\nCSeq: 1\r\n\r\n")

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        assert probe_tcp_setup(f"rtsp://admin:pw@[::1]:{port}/s1", timeout_s=5.0) == 404
    finally:
        t.join(5.0)
        srv.close()
    assert seen and seen[0].startswith(f"DESCRIBE rtsp://[::1]:{port}/s1 RTSP/1.0\r\n".encode())
    assert b"admin:pw" not in seen[0].split(b"\r\n")[0]  # credentials go in a header, not the URL
