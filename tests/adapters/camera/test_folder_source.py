"""The folder frame source read directly (no camera thread): name order, where a reopen resumes,
looping, the bound on a folder of broken files, the pixel cap and the replay rate of the config,
and what build_source_factory refuses up front."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import cv2
import numpy as np
import pytest

from edge_agent.adapters.camera import backends as camera_sources
from edge_agent.adapters.camera.backends import CvCaptureSource, FolderSourceFactory, build_source_factory
from edge_agent.core.camera.source_spec import SourceKind
from edge_agent.core.config.schema import CameraConfig
from edge_agent.errors import CameraError, ImageError


def write(d: Path, name: str, value: int, size: tuple[int, int] = (8, 6)) -> None:
    img = np.full((size[1], size[0], 3), value, np.uint8)
    assert cv2.imwrite(str(d / name), img)


def folder(tmp_path: Path, names: list[str]) -> Path:
    d = tmp_path / "frames"
    d.mkdir()
    for i, n in enumerate(names):
        write(d, n, 10 * (i + 1))
    return d


def value(img: object) -> int:
    assert isinstance(img, np.ndarray)
    return int(img[0, 0, 0])


def test_a_reopened_folder_resumes_after_the_last_file_handed_out(tmp_path: Path) -> None:
    d = folder(tmp_path, ["01.png", "02.png", "03.png", "04.png"])
    f = FolderSourceFactory(str(d))
    s = f()
    assert [value(s.read()), value(s.read())] == [10, 20]
    assert s.current_name == "02.png" and f.last_name == "02.png"
    s.close()
    again = f()  # after the folder went away and came back, say
    assert value(again.read()) == 30 and again.current_name == "03.png"
    assert value(again.read()) == 40 and again.read() is None and again.read() is None


def test_a_reopen_resumes_after_a_last_file_that_is_gone(tmp_path: Path) -> None:
    d = folder(tmp_path, ["01.png", "02.png", "03.png"])
    f = FolderSourceFactory(str(d))
    s = f()
    s.read()
    s.read()
    (d / "02.png").unlink()
    assert value(f().read()) == 30


def test_a_looping_folder_is_listed_again_at_each_pass(tmp_path: Path) -> None:
    d = folder(tmp_path, ["a.png", "b.png"])
    s = FolderSourceFactory(str(d), loop=True)()
    assert [value(s.read()), value(s.read())] == [10, 20]
    write(d, "c.png", 99)
    assert [value(s.read()) for _ in range(3)] == [10, 20, 99]
    for n in ("a.png", "b.png", "c.png"):
        (d / n).unlink()
    with pytest.raises(CameraError, match="has no images to loop over"):
        s.read()


def test_a_looping_folder_of_only_broken_files_ends_after_one_full_pass(tmp_path: Path) -> None:
    d = tmp_path / "bad"
    d.mkdir()
    for n in ("1.png", "2.jpg", "3.png"):
        (d / n).write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 40 if n.endswith(".png") else b"\xff\xd8junk")
    s = FolderSourceFactory(str(d), loop=True)()
    skipped = 0
    with pytest.raises(CameraError, match="no readable image in a full pass"):
        for _ in range(20):
            try:
                s.read()
            except ImageError:
                skipped += 1
    assert skipped == 4  # a full pass and one more: never an endless spin


def test_one_good_image_among_broken_ones_keeps_a_loop_going(tmp_path: Path) -> None:
    d = tmp_path / "mixed"
    d.mkdir()
    (d / "1.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 40)  # refused from its header
    write(d, "2.png", 50)
    _ok, buf = cv2.imencode(".png", np.zeros((8, 8, 3), np.uint8))
    (d / "2b.png").write_bytes(buf.tobytes()[:40] + b"\x00" * 200)  # a header, then garbage
    (d / "3.jpg").write_bytes(b"\xff\xd8junk")
    (d / "4.jpg").write_bytes(b"\xff\xd8junk")
    s = FolderSourceFactory(str(d), loop=True)()
    good = bad = 0
    for _ in range(50):  # 10 passes
        try:
            good += value(s.read()) == 50
        except ImageError:
            bad += 1
    assert (good, bad) == (10, 40)


def test_the_pixel_cap_and_the_replay_rate_of_the_config_reach_the_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    d = folder(tmp_path, ["1.png", "2.png", "3.png"])
    factory, kind = build_source_factory(CameraConfig(source=str(d), max_pixels=47, fps=4.0, loop=True))
    assert kind is SourceKind.IMAGE_FOLDER
    with pytest.raises(ImageError, match=r"8x6 pixels .* exceeds the limit"):
        factory().read()

    clock = {"now": 100.0, "slept": []}

    class FakeTime:
        @staticmethod
        def monotonic() -> float:
            return float(clock["now"])  # type: ignore[arg-type]

        @staticmethod
        def sleep(s: float) -> None:
            clock["slept"].append(round(s, 6))  # type: ignore[union-attr]
            clock["now"] += s  # type: ignore[operator]

    monkeypatch.setattr(camera_sources, "time", FakeTime)
    factory, _ = build_source_factory(CameraConfig(source=str(d), fps=4.0, loop=True))
    s = factory()
    vals = [value(s.read()) for _ in range(5)]
    assert vals == [10, 20, 30, 10, 20]  # loop = true reached the folder too
    assert clock["slept"] == [0.25, 0.25, 0.25, 0.25]  # 4 fps: one frame every 0.25 s, the first at once


def test_without_fps_a_folder_is_read_as_fast_as_frames_are_taken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    d = folder(tmp_path, ["1.png", "2.png"])
    slept: list[float] = []
    monkeypatch.setattr(camera_sources.time, "sleep", slept.append)
    factory, _ = build_source_factory(CameraConfig(source=str(d)))
    s = factory()
    assert [value(s.read()), value(s.read()), s.read()] == [10, 20, None]
    assert slept == []


def test_a_folder_that_disappears_is_a_camera_error(tmp_path: Path) -> None:
    d = folder(tmp_path, ["1.png", "2.png"])
    s = FolderSourceFactory(str(d))()
    s.read()
    shutil.rmtree(d)
    with pytest.raises(CameraError, match="disappeared"):
        s.read()
    with pytest.raises(CameraError, match=r"camera.source folder .*frames"):
        FolderSourceFactory(str(d))()


def test_what_build_source_factory_refuses_up_front(tmp_path: Path) -> None:
    with pytest.raises(CameraError) as e:
        build_source_factory(CameraConfig(source=str(tmp_path / "gone") + "/"))
    assert str(e.value) == f"camera.source = {str(tmp_path / 'gone') + '/'!r}: folder not found"
    with pytest.raises(CameraError) as e:
        build_source_factory(CameraConfig(source=str(tmp_path / "clip.mp4")))
    assert str(e.value) == f"camera.source = {str(tmp_path / 'clip.mp4')!r}: no such video file (or folder)"
    with pytest.raises(Exception) as e2:
        build_source_factory(
            CameraConfig(source="http://127.0.0.1:1/stream", credentials_file=str(tmp_path / "no-creds"))
        )
    assert "no-creds" in str(e2.value)


def clip(tmp_path: Path, fourcc: str = "MJPG", size: tuple[int, int] = (64, 48), n: int = 3) -> Path:
    path = tmp_path / "clip.avi"
    w = cv2.VideoWriter(str(path), cv2.VideoWriter.fourcc(*fourcc), 12.5, size)
    assert w.isOpened()
    for i in range(n):
        w.write(np.full((size[1], size[0], 3), 40 * i, np.uint8))
    w.release()
    return path


def test_the_grant_read_back_from_the_capture_is_logged_and_kept(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """What a V4L2 driver granted is read back with the same calls a video file answers (no camera
    here): fourcc, size and rate; what differs from the config is a warning naming each key."""
    caplog.set_level(logging.INFO, logger="edge_agent")
    cap = cv2.VideoCapture(str(clip(tmp_path)))
    try:
        src = CvCaptureSource.__new__(CvCaptureSource)
        src.name = "/dev/video9"
        src._report_grant(cap, CameraConfig(source="/dev/video9", width=64, height=48, fps=12.0))
        assert src.granted == {"fourcc": "MJPG", "width": 64, "height": 48, "fps": 12.5}
        src._report_grant(cap, CameraConfig(source="/dev/video9", width=1280, fps=30.0))
    finally:
        cap.release()
    lines = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == camera_sources.log.name]
    assert lines == [
        (logging.INFO, "camera /dev/video9: driver granted MJPG 64x48 @ 12.5 fps"),
        (
            logging.WARNING,
            "camera /dev/video9: driver granted MJPG 64x48 @ 12.5 fps (asked: width 1280 -> 64, fps 30.0 -> 12.5)",
        ),
    ]


def test_a_video_file_ends_or_loops_and_its_size_is_checked_at_open(tmp_path: Path) -> None:
    path = clip(tmp_path, n=3)
    factory, kind = build_source_factory(CameraConfig(source=str(path)))
    assert kind is SourceKind.VIDEO_FILE
    s = factory()
    assert s.finite and s.name == str(path)
    got = [s.read() for _ in range(4)]
    assert [round(float(g.mean()) / 40) for g in got[:3] if g is not None] == [0, 1, 2] and got[3] is None
    s.close()
    looping, _ = build_source_factory(CameraConfig(source=str(path), loop=True))
    s = looping()
    assert [round(float(s.read().mean()) / 40) for _ in range(5)] == [0, 1, 2, 0, 1]
    s.close()
    capped, _ = build_source_factory(CameraConfig(source=str(path), max_pixels=64 * 48 - 1))
    with pytest.raises(CameraError) as e:
        capped()
    assert str(e.value).startswith(f"camera {str(path)!r}: frames of 64x48 pixels (")
    assert str(e.value).endswith("(camera.max_pixels); not opened")


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("    GStreamer:                   YES (1.22.0)", True),
        ("    GStreamer:                   yes", True),
        ("    GStreamer:                   NO", False),
        ("    Video I/O: GStreamer: YES", False),  # not the GStreamer line itself
        ("    FFMPEG:                      YES", False),
    ],
)
def test_gstreamer_support_is_read_from_opencvs_build_information(
    monkeypatch: pytest.MonkeyPatch, line: str, expected: bool
) -> None:
    """The pip wheels say "GStreamer: NO", Debian's python3-opencv "YES (1.22.0)": the same report
    cv2.getBuildInformation() prints, given here as the text of other builds."""
    text = (
        f"General configuration for OpenCV 4.x\n  Video I/O:\n    DC1394:                      NO\n{line}\n"
    )
    monkeypatch.setattr(camera_sources.cv2, "getBuildInformation", lambda: text)
    assert camera_sources.gstreamer_available() is expected


def test_an_http_source_that_is_not_multipart_is_read_through_ffmpeg(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An MP4/AVI over HTTP (no multipart MJPEG): our reader says so and FFmpeg takes the URL."""
    import functools
    import http.server
    import threading

    path = clip(tmp_path, n=3)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    caplog.set_level(logging.INFO, logger="edge_agent")
    try:
        url = f"http://127.0.0.1:{srv.server_address[1]}/{path.name}"
        factory, kind = build_source_factory(CameraConfig(source=url, stall_timeout_s=10))
        assert kind is SourceKind.NETWORK
        s = factory()
        assert isinstance(s, CvCaptureSource) and not s.finite
        frames = [s.read() for _ in range(3)]
        assert [round(float(f.mean()) / 40) for f in frames if f is not None] == [0, 1, 2]
        s.close()
        assert (
            f"camera {url!r}: Content-Type 'video/x-msvideo' is not multipart MJPEG; opening it with FFmpeg"
        ) in [r.getMessage() for r in caplog.records]
    finally:
        srv.shutdown()
        srv.server_close()
        t.join(5)


def test_a_looping_folder_whose_images_all_fail_to_decode_ends_after_one_pass(tmp_path: Path) -> None:
    d = tmp_path / "garbled"
    d.mkdir()
    _ok, buf = cv2.imencode(".png", np.zeros((8, 8, 3), np.uint8))
    for n in ("1.png", "2.png"):
        (d / n).write_bytes(buf.tobytes()[:40] + b"\x00" * 200)  # sizes readable, pixels garbage
    s = FolderSourceFactory(str(d), loop=True)()
    messages = []
    with pytest.raises(CameraError, match="no readable image in a full pass"):
        for _ in range(20):
            try:
                s.read()
            except ImageError as e:
                messages.append(str(e))
    assert messages == [f"{d / n}: unreadable or corrupt image, skipped" for n in ("1.png", "2.png", "1.png")]


def test_a_folder_jpeg_is_decoded_down_to_the_model_size_and_its_full_size_kept(tmp_path: Path) -> None:
    d = tmp_path / "big"
    d.mkdir()
    assert cv2.imwrite(str(d / "a.jpg"), np.full((480, 640, 3), 90, np.uint8))
    assert cv2.imwrite(str(d / "b.png"), np.full((480, 640, 3), 90, np.uint8))
    s = FolderSourceFactory(str(d), target=lambda: (64, 64))()
    img = s.read()
    assert img is not None and img.shape[1] < 640 and s.full_size == (640, 480)
    img = s.read()  # PNG: no reduced decode
    assert img is not None and img.shape == (480, 640, 3) and s.full_size is None
    s.close()
    assert s.read() is None  # closed: the end, not an error


def test_a_file_gone_between_listing_and_reading_is_skipped_with_its_name(tmp_path: Path) -> None:
    d = folder(tmp_path, ["1.png", "2.png"])
    s = FolderSourceFactory(str(d))()
    (d / "1.png").unlink()
    with pytest.raises(ImageError) as e:
        s.read()
    assert str(e.value) == f"{d / '1.png'}: cannot read image: No such file or directory"
    assert value(s.read()) == 20


def test_a_missing_folder_and_a_missing_gstreamer_are_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(CameraError) as e:
        FolderSourceFactory(str(tmp_path / "gone"))()
    assert str(e.value) == f"camera.source folder {str(tmp_path / 'gone')!r}: No such file or directory"
    monkeypatch.setattr(camera_sources, "gstreamer_available", lambda: False)
    with pytest.raises(CameraError) as e:
        build_source_factory(CameraConfig(source="videotestsrc ! appsink"))
    assert str(e.value) == (
        "camera.source = 'videotestsrc ! appsink' is a GStreamer pipeline but this OpenCV has no "
        "GStreamer (cv2.getBuildInformation() shows GStreamer: NO); use the distro's python3-opencv "
        "or a V4L2 source"
    )


def test_after_a_good_image_the_bound_on_broken_ones_starts_again(tmp_path: Path) -> None:
    """Both files break after the first was read: the source gives up after the same bound as a
    folder broken from the start (a full pass and one more), counted from the last good image."""
    d = folder(tmp_path, ["1.png", "2.png"])
    s = FolderSourceFactory(str(d), loop=True)()
    assert value(s.read()) == 10
    for n in ("1.png", "2.png"):
        (d / n).write_bytes(b"\xff\xd8junk")
    skipped = []
    with pytest.raises(CameraError, match="no readable image in a full pass"):
        for _ in range(10):
            try:
                s.read()
            except ImageError:
                skipped.append(s.current_name)
    assert skipped == ["2.png", "1.png", "2.png"]


def test_the_models_size_reaches_a_folder_camera_through_the_factory(tmp_path: Path) -> None:
    d = tmp_path / "big"
    d.mkdir()
    assert cv2.imwrite(str(d / "a.jpg"), np.full((480, 640, 3), 90, np.uint8))
    factory, _ = build_source_factory(CameraConfig(source=str(d)), target=lambda: (64, 64))
    s = factory()
    img = s.read()
    assert img is not None and img.shape == (60, 80, 3) and s.full_size == (640, 480)
