"""HTTP multipart MJPEG: the pure parser, then the real source against a local multipart server
(normal, basic auth, stall, truncated JPEG, close mid-part)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Callable

import cv2
import numpy as np
import pytest
from support import wait_until
from support.mjpeg import MjpegServer, jpeg_number, numbered_jpeg

from edge_agent.adapters.camera.capture import Camera
from edge_agent.adapters.camera.mjpeg_http import MjpegHttpSource, decode_jpeg
from edge_agent.core.camera.mjpeg_parts import (
    MultipartError,
    MultipartParser,
    boundary_from_content_type,
    is_complete_jpeg,
    reduced_scale,
)
from edge_agent.core.config.schema import CameraConfig
from edge_agent.core.vision.image_header import jpeg_size
from edge_agent.errors import CameraError, ImageError


def stream(parts: list[bytes], boundary: str = "b0", length: bool = True) -> bytes:
    out = b""
    for p in parts:
        cl = f"Content-Length: {len(p)}\r\n" if length else ""
        out += f"--{boundary}\r\nContent-Type: image/jpeg\r\n{cl}\r\n".encode() + p + b"\r\n"
    return out


# ---- pure -----------------------------------------------------------------------------------
def test_boundary_from_content_type() -> None:
    assert boundary_from_content_type("multipart/x-mixed-replace;boundary=abc") == "abc"
    assert boundary_from_content_type('multipart/x-mixed-replace; boundary="--x y"') == "--x y"
    assert boundary_from_content_type("image/jpeg") is None
    assert boundary_from_content_type("multipart/x-mixed-replace") is None


@pytest.mark.parametrize("length", [True, False])
def test_parser_splits_parts_fed_one_byte_at_a_time(length: bool) -> None:
    jpgs = [numbered_jpeg(n) for n in range(3)]
    # without Content-Length a part ends at the next boundary
    data = stream(jpgs, length=length) + b"--b0\r\n"
    p = MultipartParser("b0")
    got = []
    for i in range(len(data)):
        got += p.feed(data[i : i + 1])
    assert [g.body for g in got] == jpgs
    assert not any(g.truncated for g in got)
    assert got[0].headers["content-type"] == "image/jpeg"


def test_parser_accepts_a_boundary_quoted_with_its_dashes() -> None:
    jpg = numbered_jpeg(7)
    # header says boundary=--myboundary, the stream uses --myboundary (not ----myboundary)
    data = b"--myboundary\r\nContent-Length: %d\r\n\r\n" % len(jpg) + jpg + b"\r\n"
    assert [p.body for p in MultipartParser("--myboundary").feed(data)] == [jpg]


def test_parser_marks_a_part_cut_short_by_the_next_boundary() -> None:
    a, b = numbered_jpeg(1), numbered_jpeg(2)
    cut = b"--b0\r\nContent-Length: %d\r\n\r\n" % len(a) + a[:100] + b"\r\n"
    parts = MultipartParser("b0").feed(cut + stream([b]))
    assert [p.truncated for p in parts] == [True, False]
    assert parts[1].body == b
    assert not is_complete_jpeg(parts[0].body) and is_complete_jpeg(parts[1].body)


def test_parser_refuses_endless_garbage() -> None:
    p = MultipartParser("b0", max_part=1000)
    p.feed(b"--b0\r\n\r\n")
    with pytest.raises(MultipartError):
        p.feed(b"x" * 2000)


def test_jpeg_size_reads_the_sof_marker() -> None:
    samples = sorted((Path(__file__).resolve().parents[3] / "models" / "samples").glob("*.jpg"))
    assert samples
    for path in samples:
        data = path.read_bytes()
        img = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
        assert jpeg_size(data) == (img.shape[1], img.shape[0])
    assert jpeg_size(b"not a jpeg") is None


def test_reduced_scale_only_when_the_letterbox_is_at_most_half() -> None:
    assert reduced_scale((1280, 720), (640, 640)) == 2  # 640x360: the letterbox size exactly
    assert reduced_scale((810, 1080), (640, 640)) == 1  # 1080/2 < 640*1080/1080
    assert reduced_scale((2592, 1944), (640, 640)) == 4
    assert reduced_scale((5120, 2880), (320, 320)) == 8
    assert reduced_scale((1280, 720), None) == 1


def test_decode_jpeg_at_half_scale_reports_the_full_size() -> None:
    big = np.zeros((720, 1280, 3), np.uint8)
    cv2.rectangle(big, (200, 100), (600, 500), (255, 255, 255), -1)
    data = cv2.imencode(".jpg", big)[1].tobytes()
    img, full = decode_jpeg(data, (640, 640))
    assert img.shape == (360, 640, 3) and full == (1280, 720)
    assert img[150, 200].min() > 200 and img[300, 400].max() < 50
    img, full = decode_jpeg(data, (1280, 1280))
    assert img.shape == (720, 1280, 3) and full is None


# ---- against a local multipart server --------------------------------------------------------
@pytest.fixture
def server_factory() -> Iterator[Callable[..., MjpegServer]]:
    servers: list[MjpegServer] = []

    def make(**kw: object) -> MjpegServer:
        s = MjpegServer(**kw)  # type: ignore[arg-type]
        servers.append(s)
        return s

    yield make
    for s in servers:
        s.close()


def cam_cfg(url: str, **kw: object) -> CameraConfig:
    return CameraConfig(source=url, stall_timeout_s=1.0, reconnect_max_s=0.5, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("content_length", [True, False])
def test_frames_arrive_in_order(server_factory: Callable[..., MjpegServer], content_length: bool) -> None:
    srv = server_factory(content_length=content_length)
    src = MjpegHttpSource(srv.url, 2.0)
    try:
        nums = []
        for _ in range(6):
            img = src.read()
            assert img is not None and img.shape == (120, 160, 3)
            nums.append(jpeg_number(img))
        assert nums == sorted(nums) and len(set(nums)) == 6
    finally:
        src.close()


def test_basic_auth_from_a_credential_file(
    server_factory: Callable[..., MjpegServer], tmp_path: Path
) -> None:
    srv = server_factory(auth=("admin", "s3cr:et"))
    with pytest.raises(CameraError, match=r"HTTP 401 unauthorized \(check camera.credentials_file"):
        MjpegHttpSource(srv.url, 2.0)
    cred = tmp_path / "cam.cred"
    cred.write_text("admin:s3cr:et\n")
    src = MjpegHttpSource(srv.url, 2.0, credentials_file=str(cred))
    assert src.read() is not None
    src.close()
    cred.write_text("no colon here\n")
    with pytest.raises(CameraError, match=r"credentials_file.*user:password"):
        MjpegHttpSource(srv.url, 2.0, credentials_file=str(cred))


def test_a_truncated_jpeg_is_skipped_and_the_stream_goes_on(
    server_factory: Callable[..., MjpegServer],
) -> None:
    srv = server_factory(mode="truncate", after=3, fps=50)
    src = MjpegHttpSource(srv.url, 2.0)
    outcomes = []
    try:
        for _ in range(8):
            try:
                img = src.read()
                outcomes.append("ok" if img is not None else "none")
            except ImageError as exc:
                assert "truncated JPEG" in str(exc)
                outcomes.append("skipped")
    finally:
        src.close()
    assert outcomes.count("skipped") == 1 and outcomes.count("ok") == 7


@pytest.mark.parametrize("mode", ["stall", "close"])
def test_camera_reconnects_after_a_stall_or_a_close_mid_part(
    server_factory: Callable[..., MjpegServer], mode: str
) -> None:
    srv = server_factory(mode=mode, after=4)
    cam = Camera(cam_cfg(srv.url), reconnect_min_s=0.1)
    cam.start()
    try:
        wait_until(lambda: srv.connections >= 2 and cam.frames >= 8, what="a reconnect and 8 frames")
        st = cam.stats()
        assert st["reconnects"] >= 1
        expected = "stalled" if mode == "stall" else "closed the stream mid-part"
        assert expected in (st["last_error"] or "")
        assert cam.read(2.0) is not None
    finally:
        cam.stop()


def test_camera_counts_a_truncated_part_as_skipped(server_factory: Callable[..., MjpegServer]) -> None:
    srv = server_factory(mode="truncate", after=2)
    cam = Camera(cam_cfg(srv.url))
    cam.start()
    try:
        wait_until(lambda: cam.frames >= 6, what="6 frames")
        assert cam.skipped == 1 and cam.reconnects == 0
    finally:
        cam.stop()


def test_camera_decodes_large_frames_small_for_the_model(server_factory: Callable[..., MjpegServer]) -> None:
    srv = server_factory(shape=(720, 1280))
    cam = Camera(cam_cfg(srv.url))
    cam.decode_target = (640, 640)
    cam.start()
    try:
        frame = cam.read(5.0)
        assert frame is not None
        assert frame.image.shape == (360, 640, 3) and frame.full_size == (1280, 720)
        assert frame.full_scale() == (2.0, 2.0)
    finally:
        cam.stop()


def test_the_agent_runs_on_an_mjpeg_stream(
    server_factory: Callable[..., MjpegServer], tmp_path: Path
) -> None:
    from support.models import make_bright_detector
    from support.world import offline_config

    from edge_agent.app.agent.agent import Agent

    srv = server_factory(auth=("cam", "pw"))
    cred = tmp_path / "cred"
    cred.write_text("cam:pw\n")
    cfg = offline_config(
        tmp_path, srv.url, make_bright_detector(tmp_path / "det.onnx"), camera=f'credentials_file = "{cred}"'
    )
    got: list[dict[str, object]] = []
    assert Agent(cfg, max_frames=5, on_result=got.append).run() == 0
    assert len(got) == 5 and all((r["width"], r["height"]) == (160, 120) for r in got)
    assert all(str(r["image"]).startswith("http://127.0.0.1:") for r in got)


def test_a_read_hands_out_the_newest_part_not_a_stale_one(server_factory: Callable[..., MjpegServer]) -> None:
    """A slow reader finds many parts in one socket read: only the newest is a current picture, so
    reads skip the stale ones. (The first read may only see what arrived with the headers, so a
    later read may be the one that jumps.)"""
    srv = server_factory(fps=1000.0)
    src = MjpegHttpSource(srv.url, 2.0)
    try:
        wait_until(lambda: srv.sent >= 40, 10, "40 parts sent")  # buffered while nobody reads
        nums = []
        for _ in range(3):
            img = src.read()
            assert img is not None
            nums.append(jpeg_number(img))
        # stale parts skipped: the first read is already a recent part, or a later read jumps
        # (a reader handing out every part in order would give 0, 1, 2)
        assert nums == sorted(nums) and (nums[0] >= 5 or any(b - a > 1 for a, b in zip(nums, nums[1:]))), nums
    finally:
        src.close()


def test_the_configured_pixel_cap_is_the_one_applied(server_factory: Callable[..., MjpegServer]) -> None:
    """``camera.max_pixels`` reaches the stream's decoder: a part over it is refused before libjpeg."""
    srv = server_factory()
    small = MjpegHttpSource(srv.url, 2.0, max_pixels=160 * 120 - 1)
    try:
        with pytest.raises(ImageError, match=r"160x120 pixels .* exceeds the limit"):
            small.read()
    finally:
        small.close()
    exact = MjpegHttpSource(srv.url, 2.0, max_pixels=160 * 120)
    try:
        assert exact.read() is not None  # at the cap: decoded
    finally:
        exact.close()


def test_the_query_string_reaches_the_server(server_factory: Callable[..., MjpegServer]) -> None:
    """mjpg-streamer serves its stream at ``/?action=stream``: a URL's query is part of the request."""
    srv = server_factory()
    src = MjpegHttpSource(f"http://127.0.0.1:{srv.port}/?action=stream", 2.0)
    try:
        assert src.read() is not None
    finally:
        src.close()
    bare = MjpegHttpSource(f"http://127.0.0.1:{srv.port}", 2.0)
    bare.close()
    assert srv.paths == ["/?action=stream", "/"]
