"""Camera over real files/folders (cv2.imwrite / cv2.VideoWriter) and the FakeDevice live camera."""

from __future__ import annotations

import logging
import shutil
import time
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
from support import wait_until
from support.camera import FakeDevice, fake_frame_number

from edge_agent.adapters.camera.backends import gstreamer_available
from edge_agent.adapters.camera.capture import Camera, LatestFrame
from edge_agent.core.camera.source_spec import Frame
from edge_agent.core.config.schema import CameraConfig
from edge_agent.errors import CameraError


def write_images(folder: Path, n: int, start: int = 0) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(start, start + n):
        img = np.full((24, 32, 3), i * 10, dtype=np.uint8)
        assert cv2.imwrite(str(folder / f"img{i:03d}.png"), img)


def read_all(cam: Camera, limit: int = 1000) -> list[Frame]:
    out: list[Frame] = []
    while len(out) < limit:
        f = cam.read(
            10.0
        )  # generous: 2 s timed out on a loaded CI machine (a finished camera returns at once)
        if f is None:
            assert cam.finished, f"read timed out while {cam.stats()}"
            break
        out.append(f)
    return out


def fast_cfg(source: Any, **kw: Any) -> CameraConfig:
    return CameraConfig(source=source, stall_timeout_s=0.3, reconnect_max_s=0.2, **kw)


def test_folder_replay_in_name_order_skips_corrupt(tmp_path: Path) -> None:
    write_images(tmp_path, 4)
    (tmp_path / "img001b.jpg").write_bytes(b"\xff\xd8 not really a jpeg")
    (tmp_path / "notes.txt").write_text("ignored: not an image suffix")
    cam = Camera(fast_cfg(str(tmp_path)))
    assert cam.kind.value == "image_folder" and not cam.drop_stale
    with cam:
        frames = read_all(cam)
    assert [f.name for f in frames] == ["img000.png", "img001.png", "img002.png", "img003.png"]
    assert [int(f.image[0, 0, 0]) for f in frames] == [0, 10, 20, 30]
    assert [f.seq for f in frames] == [1, 2, 3, 4]
    st = cam.stats()
    assert st["state"] == "ended" and st["skipped"] == 1 and st["dropped"] == 0
    assert "img001b.jpg" in st["last_error"]
    assert frames[0].image.shape == (24, 32, 3) and frames[1].ts_mono >= frames[0].ts_mono


def test_folder_loop_wraps(tmp_path: Path) -> None:
    write_images(tmp_path, 3)
    with Camera(fast_cfg(str(tmp_path), loop=True)) as cam:
        names = [f.name for f in (cam.read(2.0) for _ in range(7)) if f is not None]
    assert names == ["img000.png", "img001.png", "img002.png"] * 2 + ["img000.png"]


def test_video_file_read_back_and_loop(tmp_path: Path) -> None:
    path = tmp_path / "clip.avi"
    w = cv2.VideoWriter(str(path), cv2.VideoWriter.fourcc(*"MJPG"), 10.0, (64, 48))
    assert w.isOpened()
    for i in range(10):
        w.write(np.full((48, 64, 3), i * 20, dtype=np.uint8))
    w.release()
    with Camera(fast_cfg(str(path))) as cam:
        frames = read_all(cam)
    assert len(frames) == 10 and cam.state == "ended"
    # MJPG is lossy, but a flat grey survives within a couple of levels
    assert [round(float(f.image.mean()) / 20) for f in frames] == list(range(10))
    with Camera(fast_cfg(str(path), loop=True)) as cam:
        looped = read_all(cam, limit=25)
    assert len(looped) == 25 and cam.state == "streaming"
    assert round(float(looped[10].image.mean()) / 20) == 0  # frame 11 is the first one again


def test_folder_removed_and_restored_reconnects(tmp_path: Path) -> None:
    folder = tmp_path / "frames"
    write_images(folder, 5)
    cam = Camera(fast_cfg(str(folder), loop=True), reconnect_min_s=0.05)
    cam.start()
    try:
        assert cam.read(2.0) is not None
        wait_until(lambda: cam.state == "streaming", what="streaming")
        shutil.move(str(folder), str(tmp_path / "away"))

        def drained_state(want: str) -> bool:
            cam.read(0.01)  # keep consuming, as the loop would
            return cam.state == want

        wait_until(lambda: drained_state("reconnecting"), what="reconnecting after the folder vanished")
        wait_until(lambda: cam.stats()["open_failures"] >= 2, what="reopen attempts while gone")
        st = cam.stats()
        assert st["reconnects"] == 1 and "frames" in st["last_error"]
        frames_before = st["frames"]
        shutil.move(str(tmp_path / "away"), str(folder))
        wait_until(lambda: drained_state("streaming"), what="streaming again after restore")
        wait_until(
            lambda: cam.read(0.5) is not None and cam.stats()["frames"] > frames_before + 2, what="frames"
        )
        assert cam.stats()["reconnects"] == 1
    finally:
        cam.stop()


def test_live_source_keeps_only_the_newest_frame() -> None:
    dev = FakeDevice(fps=200)
    with Camera(fast_cfg(0), source_factory=dev.open) as cam:
        assert cam.drop_stale
        wait_until(lambda: dev.produced >= 40, what="40 frames produced")
        f = cam.read(1.0)
        assert f is not None
        # the frame handed out is (nearly) the newest one; the older ones were dropped, not queued
        assert fake_frame_number(f.image) >= dev.produced - 3
        assert cam.stats()["dropped"] >= 30
        g = cam.read(1.0)
        assert g is not None and fake_frame_number(g.image) > fake_frame_number(f.image) and g.seq > f.seq


def test_stall_is_detected_and_recovered(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="edge_agent.adapters.camera.capture")
    dev = FakeDevice(fps=100, read_timeout_s=0.05)
    with Camera(fast_cfg(0), source_factory=dev.open, reconnect_min_s=0.05) as cam:
        assert cam.read(1.0) is not None
        dev.stall()
        wait_until(lambda: cam.state == "reconnecting", what="stall -> reconnecting")
        assert "no new frame" in cam.stats()["last_error"]
        dev.unstall()
        wait_until(lambda: cam.state == "streaming", what="recovered")
        assert cam.stats()["reconnects"] == 1 and dev.opens >= 2
    messages = [r.getMessage() for r in caplog.records]
    assert any("no new frame" in m and "reconnecting" in m for m in messages)
    assert any("recovered, streaming again" in m for m in messages)


def test_frozen_stream_and_failed_reads_trigger_reconnect() -> None:
    dev = FakeDevice(fps=200)
    with Camera(fast_cfg(0), source_factory=dev.open, repeat_limit=10, reconnect_min_s=0.05) as cam:
        assert cam.read(1.0) is not None
        dev.frozen = True
        wait_until(lambda: cam.stats()["reconnects"] == 1, what="frozen -> reconnect")
        assert "frozen" in cam.stats()["last_error"]
        dev.frozen = False
        wait_until(lambda: cam.state == "streaming", what="recovered from freeze")
        dev.fail_reads = 1000  # every read fails for 5 s at 200 fps
        wait_until(lambda: cam.stats()["reconnects"] == 2, what="failing reads -> reconnect")
        dev.fail_reads = 0
        wait_until(lambda: cam.state == "streaming", what="recovered from failing reads")


def test_unplugged_device_backs_off_then_recovers() -> None:
    dev = FakeDevice(fps=100)
    with Camera(fast_cfg(0), source_factory=dev.open, reconnect_min_s=0.02) as cam:
        assert cam.read(1.0) is not None
        dev.unplug()
        wait_until(lambda: cam.stats()["open_failures"] >= 3, what="failed reopen attempts")
        st = cam.stats()
        assert st["state"] == "reconnecting" and st["reconnects"] == 1
        assert "no such device" in st["last_error"]
        dev.replug()
        wait_until(lambda: cam.state == "streaming", what="streaming after replug")


def test_live_source_absent_at_start_is_retried_then_gives_up_when_capped() -> None:
    dev = FakeDevice()
    dev.unplug()
    cam = Camera(fast_cfg(0), source_factory=dev.open, reconnect_min_s=0.01, max_reconnects=3)
    cam.start()  # no exception: a USB camera may still be enumerating
    try:
        wait_until(lambda: cam.state == "failed", what="failed after max_reconnects")
        assert cam.finished and cam.read(0.01) is None
    finally:
        cam.stop()


def test_permanent_source_errors_are_immediate(tmp_path: Path) -> None:
    with pytest.raises(CameraError, match="no such video file"):
        Camera(fast_cfg(str(tmp_path / "missing.mp4")))
    with pytest.raises(CameraError, match="folder not found"):
        Camera(fast_cfg(str(tmp_path / "missing") + "/"))
    bad = tmp_path / "bad.avi"
    bad.write_bytes(b"not a video")
    cam = Camera(fast_cfg(str(bad)))
    with pytest.raises(CameraError, match="cannot open"):
        cam.start()
    assert cam.state == "failed"


@pytest.mark.skipif(gstreamer_available(), reason="this cv2 has GStreamer; the error path cannot occur")
def test_gstreamer_pipeline_without_gstreamer_is_a_clear_error() -> None:
    with pytest.raises(CameraError, match="GStreamer: NO"):
        Camera(fast_cfg("libcamerasrc ! videoconvert ! appsink"))


def test_latest_frame_slot() -> None:
    slot = LatestFrame()
    img = np.zeros((1, 1, 3), np.uint8)
    frames = [Frame(img, float(i), 0.0, i, "t") for i in range(3)]
    for f in frames:
        slot.put(f)
    assert slot.dropped == 2 and slot.get(0) is frames[2] and slot.get(0) is None
    slot.put(frames[0])
    slot.close()
    assert slot.get(0) is frames[0]  # a frame put before close is still delivered
    t0 = time.monotonic()
    assert slot.get(5) is None and time.monotonic() - t0 < 1  # closed: no waiting
    assert slot.put(frames[1]) is False


class _Exploding:
    """A source whose read raises what no handler names (a decoder bug, a library's own error)."""

    def __init__(self, inner: Any, after: int, finite: bool) -> None:
        self.inner, self.left, self.finite, self.name = inner, after, finite, "exploding"
        self.closed = False

    def read(self) -> Any:
        if self.left == 0:
            raise ValueError("boom in a decoder")
        self.left -= 1
        return self.inner.read()

    def close(self) -> None:
        self.closed = True
        self.inner.close()


def test_an_unexpected_error_in_a_live_source_reconnects_instead_of_ending_the_thread() -> None:
    dev = FakeDevice(fps=200)
    opened: list[_Exploding] = []

    def factory() -> _Exploding:
        src = _Exploding(dev.open(), after=5 if not opened else 10**9, finite=False)
        opened.append(src)
        return src

    with Camera(fast_cfg(0), source_factory=factory, reconnect_min_s=0.02) as cam:
        wait_until(lambda: len(opened) == 2 and cam.state == "streaming", what="reopened after the error")
        st = cam.stats()
        assert st["reconnects"] == 1 and "unexpected ValueError" in st["last_error"]
        assert opened[0].closed, "the source that raised was not closed"
        before = cam.frames
        wait_until(lambda: cam.frames >= before + 5, what="frames flow again")
        assert not cam.finished


def test_an_unexpected_error_in_a_folder_fails_the_camera_so_the_loop_ends(tmp_path: Path) -> None:
    write_images(tmp_path / "f", 8)
    real = Camera(fast_cfg(str(tmp_path / "f") + "/"))
    src = _Exploding(real._factory(), after=3, finite=True)
    cam = Camera(fast_cfg(str(tmp_path / "f") + "/"), source_factory=lambda: src)
    with cam:
        frames = read_all(cam)
    assert len(frames) == 3
    assert cam.state == "failed" and cam.finished and src.closed
    assert "unexpected ValueError" in (cam.stats()["last_error"] or "")


def test_a_frozen_stream_is_the_repeat_limit_or_the_stall_timeout_whichever_comes_first() -> None:
    """The same bytes again and again: a reconnect after exactly ``repeat_limit`` repeats, or,
    for a slow camera that never reaches the count, after ``stall_timeout_s`` of them."""
    dev = FakeDevice(fps=200)
    cfg = CameraConfig(source=0, stall_timeout_s=60.0, reconnect_max_s=0.5)
    with Camera(cfg, source_factory=dev.open, repeat_limit=5, reconnect_min_s=0.05) as cam:
        assert cam.read(1.0) is not None
        dev.frozen = True
        wait_until(lambda: cam.stats()["reconnects"] == 1, what="frozen by count -> reconnect")
        assert cam.stats()["last_error"] == "stream frozen: the same frame 6 times"
    dev = FakeDevice(fps=200)
    cfg = CameraConfig(source=0, stall_timeout_s=0.3, reconnect_max_s=0.5)
    with Camera(cfg, source_factory=dev.open, repeat_limit=10**6, reconnect_min_s=0.05) as cam:
        assert cam.read(1.0) is not None
        dev.frozen = True
        wait_until(lambda: cam.stats()["reconnects"] == 1, 10, "frozen by time -> reconnect")
        assert str(cam.stats()["last_error"]).startswith("stream frozen: the same frame ")


def test_a_healthy_stream_with_an_odd_failed_read_is_not_a_stall() -> None:
    """The stall clock restarts at every new frame: a live camera that misses a read now and then
    (a dropped packet) for longer than ``stall_timeout_s`` in total is still streaming."""
    dev = FakeDevice(fps=100)
    with Camera(fast_cfg(0), source_factory=dev.open, reconnect_min_s=0.05) as cam:
        assert cam.read(1.0) is not None
        end = time.monotonic() + 1.2  # four stall timeouts
        while time.monotonic() < end:
            dev.fail_reads = 1
            cam.read(0.2)
            time.sleep(0.05)
        assert cam.stats()["reconnects"] == 0 and cam.state == "streaming", cam.stats()


def test_a_finished_folder_still_hands_out_its_last_frame(tmp_path: Path) -> None:
    """ "ended" with a frame still in the slot is not finished: the loop would stop one frame early."""
    write_images(tmp_path, 3)
    cam = Camera(fast_cfg(str(tmp_path)))
    cam.start()
    try:
        got = [cam.read(2.0), cam.read(2.0)]
        wait_until(lambda: cam.state == "ended", what="the thread delivered the last frame")
        assert not cam.finished
        last = cam.read(2.0)
        assert last is not None and all(g is not None for g in got)
        assert cam.finished and cam.read(0.1) is None
    finally:
        cam.stop()
