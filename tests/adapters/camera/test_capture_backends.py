"""CvCaptureSource on the backends this machine cannot have: a V4L2 camera (what the source asks
the driver for, how it reads back and reports a grant that differs, a camera that sends a frame
of another size mid-stream) and an OpenCV built with GStreamer (the pipeline goes to it as the
user wrote it). The stand-ins behave as OpenCV's backends do (tests/support/capture.py). The
network branch is checked against the real FFmpeg: what each open is given (timeouts, one
decoder thread, the RTSP transport) for a URL on a closed loopback port."""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Union

import cv2
import numpy as np
import pytest
from support import wait_until
from support.capture import FakeGstCapture, FakeV4l2, RecordingCapture, V4l2Device, fourcc
from support.mjpeg import MjpegServer
from support.rtsp import RtspServer, require_rtsp_server

from edge_agent.adapters.camera import backends as camera_sources
from edge_agent.adapters.camera.backends import CvCaptureSource, build_source_factory
from edge_agent.adapters.camera.capture import Camera
from edge_agent.core.camera.source_spec import Frame, SourceKind
from edge_agent.core.config.schema import CameraConfig
from edge_agent.errors import CameraError, ImageError

MJPG = fourcc("MJPG")
# a typical UVC camera: full rate at HD only compressed, YUYV at a fraction of it
UVC = {
    "YUYV": {(640, 480): [30, 15], (1280, 720): [10, 5]},
    "MJPG": {(640, 480): [30, 15], (1280, 720): [30, 15], (320, 240): [30]},
}


def jpeg(w: int, h: int, value: int = 90) -> bytes:
    ok, buf = cv2.imencode(".jpg", np.full((h, w, 3), value, np.uint8))
    assert ok
    return buf.tobytes()


def v4l2(
    monkeypatch: pytest.MonkeyPatch,
    modes: dict[str, dict[tuple[int, int], list[float]]],
    path: str = "/dev/video0",
) -> tuple[FakeV4l2, V4l2Device]:
    device = V4l2Device(modes)
    fake = FakeV4l2({path: device})
    monkeypatch.setattr(camera_sources.cv2, "VideoCapture", fake)
    return fake, device


def grant_lines(caplog: pytest.LogCaptureFixture) -> list[tuple[int, str]]:
    return [
        (r.levelno, r.getMessage())
        for r in caplog.records
        if r.name == camera_sources.log.name and "driver granted" in r.getMessage()
    ]


@pytest.mark.parametrize(
    ("source", "target", "name"),
    [(0, 0, "0"), ("2", 2, "2"), ("/dev/video2", "/dev/video2", "/dev/video2")],
)
def test_a_v4l2_camera_is_asked_for_mjpg_the_configured_mode_and_one_buffer(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    source: Union[int, str],
    target: Union[int, str],
    name: str,
) -> None:
    """MJPG first (a UVC camera reaches 30 fps at 1280x720 only compressed), then the size, the
    rate, and one buffer (the newest frame, not one four frames old)."""
    caplog.set_level(logging.INFO, logger="edge_agent")
    path = target if isinstance(target, str) else f"/dev/video{target}"
    fake, _ = v4l2(monkeypatch, UVC, path)
    factory, kind = build_source_factory(CameraConfig(source=source, width=1280, height=720, fps=30.0))
    assert kind is (SourceKind.V4L2_DEVICE if isinstance(target, str) else SourceKind.DEVICE_INDEX)
    src = factory()
    [cap] = fake.opened
    assert (cap.target, cap.api) == (target, cv2.CAP_V4L2)
    assert cap.asked() == [
        ("fourcc", MJPG),
        ("width", 1280),
        ("height", 720),
        ("fps", 30.0),
        ("buffersize", 1),
    ]
    assert all(ok for _, _, ok in cap.calls)
    assert (cap.palette, cap.size, cap.fps, cap.buffers) == ("MJPG", (1280, 720), 30, 1)
    assert isinstance(src, CvCaptureSource) and src.name == name and not src.finite
    assert src.granted == {"fourcc": "MJPG", "width": 1280, "height": 720, "fps": 30.0}
    assert grant_lines(caplog) == [(logging.INFO, f"camera {name}: driver granted MJPG 1280x720 @ 30.0 fps")]
    src.close()
    assert cap.released


def test_a_camera_without_mjpg_is_reported_with_what_it_gave_instead(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The driver accepts every set() and silently falls back: YUYV, and at 1280x720 only 10 fps.
    The warning names each setting that was not granted; the status keeps the grant."""
    caplog.set_level(logging.INFO, logger="edge_agent")
    fake, _ = v4l2(monkeypatch, {"YUYV": UVC["YUYV"]})
    src = CvCaptureSource(
        CameraConfig(source=0, width=1280, height=720, fps=30.0), SourceKind.DEVICE_INDEX, 2.0
    )
    [cap] = fake.opened
    assert [ok for _, _, ok in cap.calls] == [True] * 5  # set() said yes to all of it
    assert src.granted == {"fourcc": "YUYV", "width": 1280, "height": 720, "fps": 10.0}
    assert grant_lines(caplog) == [
        (
            logging.WARNING,
            "camera 0: driver granted YUYV 1280x720 @ 10.0 fps (asked: fourcc MJPG -> YUYV, fps 30.0 -> 10.0)",
        )
    ]
    src.close()


def test_the_driver_moves_an_unknown_size_and_rate_to_its_nearest_mode(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="edge_agent")
    fake, _ = v4l2(monkeypatch, UVC)
    src = CvCaptureSource(
        CameraConfig(source=0, width=1300, height=700, fps=24.0), SourceKind.DEVICE_INDEX, 2.0
    )
    [cap] = fake.opened
    assert cap.asked()[1:4] == [("width", 1300), ("height", 700), ("fps", 24.0)]
    assert src.granted == {"fourcc": "MJPG", "width": 1280, "height": 720, "fps": 30.0}
    assert grant_lines(caplog) == [
        (
            logging.WARNING,
            "camera 0: driver granted MJPG 1280x720 @ 30.0 fps (asked: width 1300 -> 1280, height 700 -> 720, "
            "fps 24.0 -> 30.0)",
        )
    ]
    src.close()


def test_only_the_configured_settings_are_asked(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """No width/height/fps in the config: the driver keeps its own mode (640x480 at 30 fps after
    MJPG) and that is no mismatch. A width alone is asked, but OpenCV's V4L2 backend applies a
    size only once both were set: the grant says so."""
    caplog.set_level(logging.INFO, logger="edge_agent")
    fake, _ = v4l2(monkeypatch, UVC)
    src = CvCaptureSource(CameraConfig(source=0), SourceKind.DEVICE_INDEX, 2.0)
    assert fake.opened[0].asked() == [("fourcc", MJPG), ("buffersize", 1)]
    assert src.granted == {"fourcc": "MJPG", "width": 640, "height": 480, "fps": 30.0}
    src.close()
    src = CvCaptureSource(CameraConfig(source=0, width=1280), SourceKind.DEVICE_INDEX, 2.0)
    assert fake.opened[1].asked() == [("fourcc", MJPG), ("width", 1280), ("buffersize", 1)]
    src.close()
    src = CvCaptureSource(CameraConfig(source=0, height=240, fps=15.0), SourceKind.DEVICE_INDEX, 2.0)
    assert fake.opened[2].asked() == [("fourcc", MJPG), ("height", 240), ("fps", 15.0), ("buffersize", 1)]
    assert src.granted == {"fourcc": "MJPG", "width": 640, "height": 480, "fps": 15.0}
    src.close()
    assert grant_lines(caplog) == [
        (logging.INFO, "camera 0: driver granted MJPG 640x480 @ 30.0 fps"),
        (logging.WARNING, "camera 0: driver granted MJPG 640x480 @ 30.0 fps (asked: width 1280 -> 640)"),
        (logging.WARNING, "camera 0: driver granted MJPG 640x480 @ 15.0 fps (asked: height 240 -> 480)"),
    ]


def test_a_missing_device_is_one_error_and_nothing_is_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    fake, _ = v4l2(monkeypatch, UVC)
    with pytest.raises(CameraError) as e:
        CvCaptureSource(CameraConfig(source="/dev/video7", width=640), SourceKind.V4L2_DEVICE, 2.0)
    assert str(e.value) == "cannot open camera source '/dev/video7' (v4l2_device)"
    [cap] = fake.opened
    assert cap.calls == [] and cap.released


def test_a_granted_size_over_max_pixels_is_not_opened(monkeypatch: pytest.MonkeyPatch) -> None:
    """The cap is checked against what the driver granted, not what was asked: asked 640x480, the
    camera only has 1920x1080."""
    fake, _ = v4l2(monkeypatch, {"MJPG": {(1920, 1080): [30]}})
    cfg = CameraConfig(source=0, width=640, height=480, max_pixels=1920 * 1080 - 1)
    with pytest.raises(CameraError) as e:
        CvCaptureSource(cfg, SourceKind.DEVICE_INDEX, 2.0)
    assert str(e.value).startswith("camera '0': frames of 1920x1080 pixels (")
    assert str(e.value).endswith("(camera.max_pixels); not opened")
    assert fake.opened[0].released
    cfg = CameraConfig(source=0, width=640, height=480, max_pixels=1920 * 1080)
    src = CvCaptureSource(cfg, SourceKind.DEVICE_INDEX, 2.0)
    assert src.granted is not None and src.granted["width"] == 1920
    src.close()


def test_a_frame_of_another_size_mid_stream_is_skipped_and_the_stream_goes_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The V4L2 backend decodes each MJPG buffer as the JPEG it is: a camera that sends a bigger
    frame than it granted (some switch to a still-capture size) gives a frame of that size. One
    over camera.max_pixels is skipped (ImageError); one of exactly the cap passes; a failed
    dequeue is "no frame" (a live source never seeks back, even with camera.loop)."""
    fake, device = v4l2(monkeypatch, {"MJPG": {(320, 240): [30]}})
    device.frames = [jpeg(320, 240, 10), jpeg(640, 481, 20), None, jpeg(640, 480, 30), jpeg(320, 240, 40)]
    cfg = CameraConfig(source=0, loop=True, max_pixels=640 * 480)
    src = CvCaptureSource(cfg, SourceKind.DEVICE_INDEX, 2.0)
    first = src.read()
    assert first is not None and first.shape == (240, 320, 3)
    with pytest.raises(ImageError) as e:
        src.read()
    assert (
        str(e.value)
        == "frame of 640x481 pixels (0.308 MP) exceeds the limit of 0.307 MP (camera.max_pixels); skipped"
    )
    assert src.read() is None
    at_cap = src.read()
    assert at_cap is not None and at_cap.shape == (480, 640, 3) and abs(int(at_cap[0, 0, 0]) - 30) <= 2
    last = src.read()
    assert last is not None and last.shape == (240, 320, 3)
    assert ("pos_frames", 0) not in fake.opened[0].asked()
    src.close()


def test_the_camera_counts_the_skipped_frame_and_shows_the_grant(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same through Camera, as the agent runs it: the status has the grant and the skip."""
    _, device = v4l2(monkeypatch, UVC)
    device.frames = [jpeg(640, 480, 10), jpeg(1920, 1080, 20), jpeg(640, 480, 30)]
    cam = Camera(CameraConfig(source=0, fps=30.0, max_pixels=640 * 480), max_reconnects=0, drop_stale=False)
    cam.start()
    try:
        got: list[Frame] = []

        def two_frames() -> bool:
            f = cam.read(0.1)
            if f is not None:
                got.append(f)
            return len(got) >= 2

        wait_until(two_frames, 10, "two frames")
        wait_until(lambda: cam.skipped == 1, 10, "the skip counted")
        stats = cam.stats()
    finally:
        cam.stop()
    assert [round(float(f.image.mean()) / 10) for f in got] == [1, 3]
    assert stats["skipped"] == 1
    assert stats["granted"] == {"fourcc": "MJPG", "width": 640, "height": 480, "fps": 30.0}


PIPELINE = (
    "videotestsrc is-live=true ! video/x-raw,format=BGR,width=320,height=240 ! videoconvert ! appsink drop=1"
)


@pytest.fixture
def gst(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[FakeGstCapture]]:
    info = "General configuration for OpenCV\n  Video I/O:\n    GStreamer:                   YES (1.22.0)\n"
    monkeypatch.setattr(camera_sources.cv2, "getBuildInformation", lambda: info)
    made: list[FakeGstCapture] = []

    def open_gst(pipeline: str, api: int) -> FakeGstCapture:
        made.append(FakeGstCapture(pipeline, api))
        return made[-1]

    monkeypatch.setattr(camera_sources.cv2, "VideoCapture", open_gst)
    yield made


def test_a_gstreamer_pipeline_goes_to_opencv_as_written(gst: list[FakeGstCapture]) -> None:
    factory, kind = build_source_factory(CameraConfig(source=PIPELINE))
    assert kind is SourceKind.GSTREAMER
    src = factory()
    [cap] = gst
    assert (cap.pipeline, cap.api) == (PIPELINE, cv2.CAP_GSTREAMER)
    assert src.name == PIPELINE and not src.finite and src.granted is None
    frame = src.read()
    assert frame is not None and frame.shape == (240, 320, 3)
    src.close()
    assert cap.released


def test_a_gstreamer_pipeline_is_checked_like_any_source(gst: list[FakeGstCapture]) -> None:
    """A pipeline OpenCV cannot open (no appsink) and caps over camera.max_pixels are refused at
    open, the capture released."""
    no_sink = PIPELINE.replace(" ! appsink drop=1", " ! autovideosink")
    with pytest.raises(CameraError) as e:
        CvCaptureSource(CameraConfig(source=no_sink), SourceKind.GSTREAMER, 2.0)
    assert str(e.value) == f"cannot open camera source {no_sink!r} (gstreamer)"
    with pytest.raises(CameraError, match=r"frames of 320x240 pixels .*; not opened$"):
        CvCaptureSource(CameraConfig(source=PIPELINE, max_pixels=320 * 240 - 1), SourceKind.GSTREAMER, 2.0)
    assert [c.released for c in gst] == [True, True]


def test_without_gstreamer_the_pipeline_is_not_handed_to_opencv(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pip wheels: "GStreamer: NO". The source says why, before any capture is made (the
    factory refuses it up front too; a reopen after a change of OpenCV meets this one)."""
    info = "General configuration for OpenCV\n  Video I/O:\n    GStreamer:                   NO\n"
    monkeypatch.setattr(camera_sources.cv2, "getBuildInformation", lambda: info)
    made: list[object] = []
    monkeypatch.setattr(camera_sources.cv2, "VideoCapture", lambda *a: made.append(a))
    with pytest.raises(CameraError) as e:
        CvCaptureSource(CameraConfig(source=PIPELINE), SourceKind.GSTREAMER, 2.0)
    assert str(e.value) == (
        "camera.source is a GStreamer pipeline but this OpenCV was built without GStreamer "
        f"(cv2.getBuildInformation(): GStreamer: NO; the pip opencv wheels are): {PIPELINE!r}"
    )
    assert made == []


@pytest.fixture
def closed_port() -> int:
    """A loopback port nothing listens on (bound, never listened: connects are refused)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port: int = s.getsockname()[1]
    s.close()
    return port


def ffmpeg_params(ms: int) -> list[int]:
    return [cv2.CAP_PROP_OPEN_TIMEOUT_MSEC, ms, cv2.CAP_PROP_READ_TIMEOUT_MSEC, ms, cv2.CAP_PROP_N_THREADS, 1]


def test_a_network_stream_opens_with_the_stall_timeout_and_one_decoder_thread(
    monkeypatch: pytest.MonkeyPatch, closed_port: int
) -> None:
    """Real FFmpeg, a URL that refuses: what the open was given, and the one-line error."""
    rec = RecordingCapture()
    monkeypatch.setattr(camera_sources.cv2, "VideoCapture", rec)
    url = f"http://127.0.0.1:{closed_port}/clip.mp4"
    with pytest.raises(CameraError) as e:
        CvCaptureSource(CameraConfig(source=url, stall_timeout_s=2.5), SourceKind.NETWORK, 2.5)
    assert str(e.value) == f"cannot open camera source {url!r} (network)"
    assert rec.opens == [(url, cv2.CAP_FFMPEG, ffmpeg_params(2500), None)]


@pytest.mark.parametrize(
    ("scheme", "transport", "options"),
    [
        ("rtsp", "udp", ["rtsp_transport;udp"]),
        ("RTSP", "udp", ["rtsp_transport;udp"]),
        ("rtsps", "tcp", ["rtsp_transport;tcp"]),
        ("rtsp", "auto", ["rtsp_transport;tcp"]),
    ],
)
def test_an_rtsp_url_opens_over_the_configured_transport(
    monkeypatch: pytest.MonkeyPatch, closed_port: int, scheme: str, transport: str, options: list[str]
) -> None:
    """rtsp:// and rtsps:// (any case) go through camera.rtsp_transport with the same open
    parameters; the timeout given is the camera's. The server is not there: nothing answers 461,
    so there is no second open."""
    rec = RecordingCapture()
    monkeypatch.setattr(camera_sources.cv2, "VideoCapture", rec)
    url = f"{scheme}://admin:pw@127.0.0.1:{closed_port}/s1"
    cfg = CameraConfig(source=url, rtsp_transport=transport, stall_timeout_s=1.5)
    with pytest.raises(CameraError) as e:
        CvCaptureSource(cfg, SourceKind.NETWORK, 1.5)
    assert str(e.value) == f"cannot open camera source '{scheme}://***@127.0.0.1:{closed_port}/s1' (network)"
    assert rec.opens == [(url, cv2.CAP_FFMPEG, ffmpeg_params(1500), o) for o in options]


def test_an_rtsp_camera_that_accepts_and_never_answers_does_not_hang_the_open(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A listener that takes the connection and says nothing (a camera whose RTSP task hung): FFmpeg
    gives up after camera.stall_timeout_s, and so does the transport probe after it."""
    rec = RecordingCapture()
    monkeypatch.setattr(camera_sources.cv2, "VideoCapture", rec)
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(4)
    url = f"rtsp://127.0.0.1:{silent.getsockname()[1]}/s1"
    errors: list[BaseException] = []

    def open_it() -> None:
        try:
            CvCaptureSource(
                CameraConfig(source=url, rtsp_transport="tcp", stall_timeout_s=1.0), SourceKind.NETWORK, 1.0
            )
        except BaseException as exc:  # noqa: BLE001 -- handed to the test thread
            errors.append(exc)

    t = threading.Thread(target=open_it, daemon=True)
    t.start()
    try:
        t.join(60.0)  # a guard against a hang, not a timing: each side waits 1 s
        assert not t.is_alive(), "the open (or the probe after it) hung on a silent server"
    finally:
        silent.close()
    [err] = errors
    assert isinstance(err, CameraError) and str(err) == f"cannot open camera source {url!r} (network)"
    assert rec.opens == [(url, cv2.CAP_FFMPEG, ffmpeg_params(1000), "rtsp_transport;tcp")]


@pytest.mark.slow
def test_an_rtsp_camera_opens_and_the_log_names_it_without_its_password(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    require_rtsp_server()
    srv = RtspServer(fps=15)
    srv.start()
    caplog.set_level(logging.INFO, logger="edge_agent")
    url = srv.url.replace("rtsp://", "rtsp://admin:s3cret@")
    try:
        src = CvCaptureSource(CameraConfig(source=url, stall_timeout_s=5.0), SourceKind.NETWORK, 5.0)
        try:
            frame = src.read()
        finally:
            src.close()
    finally:
        srv.stop()
    assert frame is not None and frame.shape == (240, 320, 3)
    assert src.name == f"rtsp://***@127.0.0.1:{srv.port}/cam" and src.granted is None
    lines = [r.getMessage() for r in caplog.records if "RTSP over" in r.getMessage()]
    assert lines == [
        f"camera rtsp://***@127.0.0.1:{srv.port}/cam: RTSP over TCP (camera.rtsp_transport = auto)"
    ]


def test_an_http_mjpeg_camera_gets_the_configs_login_decode_target_and_pixel_cap(tmp_path: Path) -> None:
    """Through build_source_factory, as the camera opens it: the credentials file logs in, the
    model's size decodes 1280x720 parts at half scale, camera.max_pixels refuses a part over it."""
    srv = MjpegServer(auth=("admin", "s3cret"), shape=(720, 1280))
    cred = tmp_path / "cam.cred"
    cred.write_text("admin:s3cret\n")
    try:
        factory, kind = build_source_factory(
            CameraConfig(
                source=srv.url, credentials_file=str(cred), stall_timeout_s=2.0, max_pixels=1280 * 720
            ),
            target=lambda: (360, 640),
        )
        assert kind is SourceKind.NETWORK
        src = factory()
        try:
            img = src.read()
            assert img is not None and img.shape == (360, 640, 3)
            assert getattr(src, "full_size", None) == (1280, 720)
        finally:
            src.close()
        capped, _ = build_source_factory(
            CameraConfig(
                source=srv.url, credentials_file=str(cred), stall_timeout_s=2.0, max_pixels=1280 * 720 - 1
            )
        )
        src = capped()
        try:
            with pytest.raises(ImageError, match=r"1280x720 pixels .* exceeds the limit"):
                src.read()
        finally:
            src.close()
    finally:
        srv.close()


def test_an_https_url_in_any_case_is_read_by_the_mjpeg_reader(closed_port: int) -> None:
    """https:// (any case) is ours first, like http:// (FFmpeg only when the answer is no multipart):
    the error is the reader's "cannot connect", not FFmpeg's "cannot open"."""
    for scheme in ("https", "HTTPS"):
        url = f"{scheme}://127.0.0.1:{closed_port}/mjpg"
        factory, _ = build_source_factory(CameraConfig(source=url, stall_timeout_s=2.0))
        with pytest.raises(CameraError) as e:
            factory()
        assert str(e.value).startswith(f"camera {url!r}: cannot connect: ")


def test_a_pipeline_that_starts_with_a_url_goes_to_gstreamer(gst: list[FakeGstCapture]) -> None:
    """GStreamer takes a URI in place of a source element (``http://cam/live ! decodebin ! ...``):
    with a "!" the source is a pipeline, not an HTTP camera for the MJPEG reader."""
    pipeline = (
        "http://127.0.0.1:9/live.ts ! decodebin ! videoconvert ! video/x-raw,width=64,height=48 ! appsink"
    )
    factory, kind = build_source_factory(CameraConfig(source=pipeline))
    assert kind is SourceKind.GSTREAMER
    src = factory()
    assert [(c.pipeline, c.api) for c in gst] == [(pipeline, cv2.CAP_GSTREAMER)]
    src.close()


def test_a_film_rate_grant_is_shown_to_two_places(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A capture card at 24000/1001 fps: asked 24, granted 23.976..., within half a frame per
    second of the ask (no warning); the log and the status say 23.98."""
    caplog.set_level(logging.INFO, logger="edge_agent")
    v4l2(monkeypatch, {"UYVY": {(720, 480): [24000 / 1001]}})
    src = CvCaptureSource(CameraConfig(source=0, fps=24.0), SourceKind.DEVICE_INDEX, 2.0)
    assert src.granted == {"fourcc": "UYVY", "width": 720, "height": 480, "fps": 23.98}
    assert grant_lines(caplog) == [
        (logging.WARNING, "camera 0: driver granted UYVY 720x480 @ 23.98 fps (asked: fourcc MJPG -> UYVY)")
    ]
    src.close()


def test_the_operators_ffmpeg_options_are_kept_and_the_transport_is_for_that_open_only(
    monkeypatch: pytest.MonkeyPatch, closed_port: int
) -> None:
    """OPENCV_FFMPEG_CAPTURE_OPTIONS is process-wide: an operator's own options go with the
    transport into the open and are back as they were after it; unset stays unset."""
    import os

    rec = RecordingCapture()
    monkeypatch.setattr(camera_sources.cv2, "VideoCapture", rec)
    url = f"rtsp://127.0.0.1:{closed_port}/s1"
    cfg = CameraConfig(source=url, rtsp_transport="udp", stall_timeout_s=1.0)
    monkeypatch.delenv("OPENCV_FFMPEG_CAPTURE_OPTIONS", raising=False)
    with pytest.raises(CameraError):
        CvCaptureSource(cfg, SourceKind.NETWORK, 1.0)
    assert "OPENCV_FFMPEG_CAPTURE_OPTIONS" not in os.environ
    monkeypatch.setenv("OPENCV_FFMPEG_CAPTURE_OPTIONS", "rtsp_transport;tcp|stimeout;5000000")
    with pytest.raises(CameraError):
        CvCaptureSource(cfg, SourceKind.NETWORK, 1.0)
    assert os.environ["OPENCV_FFMPEG_CAPTURE_OPTIONS"] == "rtsp_transport;tcp|stimeout;5000000"
    assert [o[-1] for o in rec.opens] == ["rtsp_transport;udp", "stimeout;5000000|rtsp_transport;udp"]
