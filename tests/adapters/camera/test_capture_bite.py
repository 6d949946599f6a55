"""The capture thread's bookkeeping as the status page and the loop read it (issue 36): each
counter, each ``last_error`` line, each state, the frame's fields, the rate, and the log lines
that say a camera was lost, is back or was given up on. Sources here play a script of reads."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from typing import Any, Optional, Union

import cv2
import numpy as np
import pytest
from support import wait_until

from edge_agent.adapters.camera.capture import Camera, LatestFrame
from edge_agent.core.camera.source_spec import Frame
from edge_agent.core.config.schema import CameraConfig
from edge_agent.errors import CameraError, ImageError

Step = Union[np.ndarray, None, BaseException]
LIVE = "rtsp://127.0.0.1:9/cam"


def image(n: int) -> np.ndarray:
    img = np.zeros((8, 8, 3), np.uint8)
    img[0, 0, 0] = n
    return img


class Script:
    """Reads play ``steps`` (an image, None, or an exception raised); then None, or for a live
    source each later read waits a little and returns None (no frame), or with ``endless`` a new
    frame (a camera streaming on)."""

    def __init__(
        self,
        steps: list[Step],
        finite: bool,
        close_error: Optional[Exception] = None,
        endless: bool = False,
        **attrs: Any,
    ) -> None:
        self.steps, self.finite, self.name, self.endless = list(steps), finite, "script", endless
        self.close_error = close_error
        self.closed = threading.Event()
        self.reads = 0
        for k, v in attrs.items():
            setattr(self, k, v)

    def read(self) -> Optional[np.ndarray]:
        self.reads += 1
        if not self.steps:
            if not self.finite:
                self.closed.wait(0.01)
            if self.endless:
                img = image(0)
                img[1, 1] = (self.reads % 256, self.reads // 256 % 256, 7)
                return img
            return None
        step = self.steps.pop(0)
        if isinstance(step, BaseException):
            raise step
        return step

    def close(self) -> None:
        self.closed.set()
        if self.close_error is not None:
            raise self.close_error


def factory_of(*sources: Union[Script, Exception]) -> Any:
    left = list(sources)
    opened: list[Script] = []

    def open_next() -> Script:
        nxt = left.pop(0) if len(left) > 1 else left[0]
        if isinstance(nxt, Exception):
            raise nxt
        opened.append(nxt)
        return nxt

    open_next.opened = opened  # type: ignore[attr-defined]
    return open_next


def cfg(source: Any = LIVE, **kw: Any) -> CameraConfig:
    return CameraConfig(source=source, **{"stall_timeout_s": 0.3, "reconnect_max_s": 0.05, **kw})


@pytest.fixture
def cams() -> Iterator[list[Camera]]:
    made: list[Camera] = []
    yield made
    for c in made:
        c.stop()


def test_a_replay_hands_out_every_frame_with_the_sources_fields_then_ends(
    cams: list[Camera], caplog: pytest.LogCaptureFixture
) -> None:
    src = Script(
        [image(1), image(2), image(3)],
        finite=True,
        current_name="a.jpg",
        full_size=(640, 480),
        media_ts=1.5,
        granted={"width": 8},
    )
    cam = Camera(cfg("/data/imgs/"), source_factory=factory_of(src))
    cams.append(cam)
    before = cam.stats()
    assert before == {
        "source": "/data/imgs/", "kind": "image_folder", "state": "starting", "frames": 0, "dropped": 0,
        "reconnects": 0, "open_failures": 0, "errors": 0, "skipped": 0, "last_error": None,
        "last_frame_age_s": None, "fps": 0.0,
    }  # fmt: skip
    assert not cam.drop_stale and not cam.has_frame and cam.fps_in == 0.0
    caplog.set_level(logging.INFO, "edge_agent.adapters.camera.capture")
    with cam:
        frames = [cam.read(5.0) for _ in range(3)]
        wait_until(lambda: cam.finished, what="the replay ended")
    assert [f.seq for f in frames if f] == [1, 2, 3]
    assert [int(f.image[0, 0, 0]) for f in frames if f] == [1, 2, 3]
    f = frames[0]
    assert f is not None and (f.name, f.full_size, f.ts_media, f.source) == (
        "a.jpg",
        (640, 480),
        1.5,
        "/data/imgs/",
    )
    last = frames[-1]
    assert last is not None
    since = time.monotonic() - last.ts_mono
    st = cam.stats()
    until = time.monotonic() - last.ts_mono
    assert st["state"] == "ended" and st["frames"] == 3 and st["dropped"] == 0 and st["errors"] == 0
    assert st["granted"] == {"width": 8} and isinstance(st["last_frame_age_s"], float)
    # the age of the newest frame as of the call (3 decimals), not a clock's reading
    assert round(since, 3) <= st["last_frame_age_s"] <= round(until, 3) and st["last_error"] is None
    assert "camera /data/imgs/: end of stream after 3 frames" in caplog.messages
    assert cam.read(0.01) is None and cam.finished


def test_refused_frames_are_skipped_counted_and_the_first_is_logged(
    cams: list[Camera], caplog: pytest.LogCaptureFixture
) -> None:
    bad = [ImageError(f"bad part {i}") for i in range(3)]
    src = Script([bad[0], image(1), bad[1], bad[2], image(2)], finite=True)
    cam = Camera(cfg("/imgs/"), source_factory=factory_of(src))
    cams.append(cam)
    with cam:
        got = [cam.read(5.0), cam.read(5.0)]
        wait_until(lambda: cam.finished, what="the end")
    assert [int(g.image[0, 0, 0]) for g in got if g is not None] == [1, 2]
    st = cam.stats()
    assert (st["skipped"], st["errors"], st["last_error"], st["state"]) == (3, 3, "bad part 2", "ended")
    assert [m for m in caplog.messages if "bad part" in m] == ["camera /imgs/: bad part 0"]


@pytest.mark.parametrize(
    "exc",
    [CameraError("device gone"), OSError("device gone"), cv2.error("device gone")],
    ids=["camera", "os", "cv2"],
)
def test_a_failed_read_of_a_live_camera_reconnects_and_says_so(
    cams: list[Camera], caplog: pytest.LogCaptureFixture, exc: Exception
) -> None:
    caplog.set_level(logging.INFO, "edge_agent.adapters.camera.capture")
    first = Script([image(1), exc], finite=False)
    second = Script([image(2), image(3)], finite=False, endless=True)
    cam = Camera(cfg(), source_factory=factory_of(first, second), reconnect_min_s=0.01)
    cams.append(cam)
    assert cam.drop_stale and cam.reconnect_min_s == 0.01
    cam.start()
    wait_until(lambda: cam.frames >= 3, what="frames after the reopen")
    st = cam.stats()
    assert st["reconnects"] == 1 and st["open_failures"] == 0 and st["state"] == "streaming"
    assert str(st["last_error"]).startswith("read failed: ") and "device gone" in str(st["last_error"])
    assert first.closed.is_set()
    text = "\n".join(caplog.messages)
    assert f"camera {LIVE}: read failed: " in text and "; reconnecting" in text
    assert "reopened after" in text and "(1 attempts)" in text
    assert f"camera {LIVE}: recovered, streaming again" in caplog.messages


def test_a_live_camera_that_gives_no_frame_counts_each_empty_read(cams: list[Camera]) -> None:
    src = Script([image(1)], finite=False)
    cam = Camera(cfg(), source_factory=factory_of(src, Script([], finite=False)), reconnect_min_s=0.01)
    cams.append(cam)
    cam.start()
    wait_until(lambda: cam.reconnects >= 1, what="a stall")
    wait_until(
        lambda: cam.stats()["last_error"] == "read returned no frame", what="the next source's empty reads"
    )
    assert cam.stats()["errors"] >= 2 and cam.state in ("reconnecting", "streaming")


def test_a_stall_line_names_the_time_without_a_frame(
    cams: list[Camera], caplog: pytest.LogCaptureFixture
) -> None:
    cam = Camera(cfg(stall_timeout_s=0.2), source_factory=factory_of(Script([image(1)], finite=False)))
    cams.append(cam)
    cam.start()
    wait_until(lambda: cam.reconnects >= 1, what="a stall")
    lost = [m for m in caplog.messages if "; reconnecting" in m]
    assert lost and lost[0].startswith(f"camera {LIVE}: no new frame for 0.")


def test_a_live_camera_absent_at_start_retries_then_gives_up_with_the_count(
    cams: list[Camera], caplog: pytest.LogCaptureFixture
) -> None:
    cam = Camera(
        cfg(),
        source_factory=factory_of(CameraError("no such device")),
        reconnect_min_s=0.01,
        max_reconnects=2,
    )
    cams.append(cam)
    cam.start()  # live: not raised, retried in the background
    wait_until(lambda: cam.state == "failed", what="given up")
    st = cam.stats()
    assert (st["open_failures"], st["errors"], st["last_error"]) == (3, 3, "no such device")
    assert f"camera {LIVE}: giving up after 2 reconnect attempts" in caplog.messages
    warned = [m for m in caplog.messages if "not available yet" in m]
    assert warned == [f"camera {LIVE} not available yet (no such device); retrying in the background"]
    retry = f"camera {LIVE}: reopen failed (no such device), next try in 0.0s"  # 0.02 s, 0.04 s
    assert caplog.messages.count(retry) == 2, caplog.messages
    wait_until(lambda: cam.finished, what="finished")


def test_a_live_camera_back_after_failed_reopens_counts_them(
    cams: list[Camera], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "edge_agent.adapters.camera.capture")
    gone = OSError("enumerating")
    back = Script([image(1), image(2)], finite=False)
    cam = Camera(cfg(), source_factory=factory_of(gone, gone, back), reconnect_min_s=0.01)
    cams.append(cam)
    started = time.monotonic()
    cam.start()
    wait_until(lambda: cam.frames >= 1, what="the camera came up")
    assert cam.open_failures == 2 and cam.reconnects == 0
    back_line = next(m for m in caplog.messages if m.startswith(f"camera {LIVE}: reopened after "))
    after = float(back_line.removeprefix(f"camera {LIVE}: reopened after ").removesuffix("s (2 attempts)"))
    assert 0.0 <= after <= time.monotonic() - started + 0.05, back_line  # the outage, as "%.1f"


@pytest.mark.parametrize(
    "exc", [CameraError("no file"), OSError("no file"), cv2.error("no file")], ids=["cam", "os", "cv2"]
)
def test_a_replay_that_cannot_open_fails_at_once_naming_the_camera(exc: Exception) -> None:
    cam = Camera(cfg("/imgs/"), source_factory=factory_of(exc))
    with pytest.raises(CameraError) as ei:
        cam.start()
    assert str(ei.value).startswith("camera '/imgs/': ") and "no file" in str(ei.value)
    assert cam.state == "failed" and "no file" in str(cam.last_error)


def test_a_second_start_is_refused_naming_the_camera(cams: list[Camera]) -> None:
    cam = Camera(cfg(), source_factory=factory_of(Script([image(1)], finite=False)))
    cams.append(cam)
    cam.start()
    with pytest.raises(CameraError, match=rf"^camera '{LIVE}': already started$"):
        cam.start()


def test_a_close_that_fails_is_logged_and_the_camera_goes_on(
    cams: list[Camera], caplog: pytest.LogCaptureFixture
) -> None:
    first = Script([image(1), CameraError("lost")], finite=False, close_error=RuntimeError("close boom"))
    second = Script([image(2)], finite=False)
    cam = Camera(cfg(), source_factory=factory_of(first, second), reconnect_min_s=0.01)
    cams.append(cam)
    cam.start()
    wait_until(lambda: cam.frames >= 2, what="the second source's frame")
    assert f"camera {LIVE}: close failed: close boom" in caplog.messages


def test_an_unexpected_error_in_a_replay_fails_it_with_the_reason(
    cams: list[Camera], caplog: pytest.LogCaptureFixture
) -> None:
    cam = Camera(cfg("/imgs/"), source_factory=factory_of(Script([image(1), KeyError("k")], finite=True)))
    cams.append(cam)
    cam.start()
    assert cam.read(5.0) is not None
    wait_until(lambda: any("giving up" in m for m in caplog.messages), what="failed")
    assert cam.state == "failed" and cam.last_error == "unexpected KeyError while reading: 'k'"
    assert cam.errors == 1 and cam.reconnects == 0
    assert (
        "camera /imgs/: unexpected KeyError while reading: 'k'; giving up on this source" in caplog.messages
    )


def _deliver(cam: Camera, now: float) -> None:
    cam._deliver(image(0), Script([], finite=False), now)


def test_the_rate_is_of_the_mean_interval_and_unread_frames_are_dropped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "edge_agent.adapters.camera.capture")
    cam = Camera(cfg(), source_factory=factory_of(Script([], finite=False)))
    _deliver(cam, 10.0)
    assert cam.fps_in == 0.0 and cam.state == "streaming" and cam.has_frame
    _deliver(cam, 10.1)
    assert cam.fps_in == pytest.approx(10.0)
    _deliver(cam, 10.3)  # mean interval 0.9 * 0.1 + 0.1 * 0.2 = 0.11 s
    assert cam.fps_in == pytest.approx(1 / 0.11)
    _deliver(cam, 10.3)  # no time between two frames: the rate stays
    assert cam.fps_in == pytest.approx(1 / 0.11)
    st = cam.stats()
    assert (st["fps"], st["frames"], st["dropped"]) == (9.09, 4, 3)
    assert not any("recovered" in m for m in caplog.messages)  # starting -> streaming is no recovery
    cam._set_state("reconnecting", "lost")
    _deliver(cam, 10.4)
    assert cam.state == "streaming" and cam.last_error == "lost"
    assert f"camera {LIVE}: recovered, streaming again" in caplog.messages
    frame = cam.read(0)
    assert frame is not None and frame.seq == 5 and frame.ts_mono == 10.4


def test_the_first_reconnect_delay_is_never_above_the_configured_cap() -> None:
    cam = Camera(
        cfg(reconnect_max_s=0.2), source_factory=factory_of(Script([], finite=False)), reconnect_min_s=5.0
    )
    assert cam.reconnect_min_s == 0.2
    assert Camera(
        cfg("/imgs/"), source_factory=factory_of(Script([], finite=True)), drop_stale=True
    ).drop_stale
    assert not Camera(cfg(), source_factory=factory_of(Script([], finite=False)), drop_stale=False).drop_stale


def test_a_blocking_put_waits_for_the_reader_and_gives_up_on_close() -> None:
    slot = LatestFrame()
    frames = [Frame(image(i), float(i), 0.0, i, "t") for i in range(3)]
    assert slot.empty and slot.put(frames[0])
    assert not slot.empty
    done: list[bool] = []
    t = threading.Thread(target=lambda: done.append(slot.put(frames[1], block=True)))
    t.start()
    t.join(0.2)
    assert t.is_alive() and not done  # the slot is full: the replay waits, nothing dropped
    assert slot.get(1.0) is frames[0]
    t.join(5)
    assert done == [True] and slot.dropped == 0 and slot.get(1.0) is frames[1]
    slot.put(frames[2])
    t = threading.Thread(target=lambda: done.append(slot.put(frames[0], block=True)))
    t.start()
    t.join(0.2)
    slot.close()
    t.join(5)
    assert done == [True, False] and slot.get(0) is frames[2]


def test_new_frames_never_freeze_and_a_frozen_count_is_the_identical_frames_read(cams: list[Camera]) -> None:
    moving = Script([], finite=False, endless=True)  # a new picture at every read
    cam = Camera(
        cfg(stall_timeout_s=60.0), source_factory=factory_of(moving), repeat_limit=3, max_reconnects=0
    )
    cams.append(cam)
    cam.start()
    wait_until(lambda: cam.frames >= 30, 10.0, "thirty new frames")
    assert cam.reconnects == 0 and cam.last_error is None and cam.state == "streaming", cam.stats()
    same = Script([image(1)] * 6, finite=False)
    cam = Camera(cfg(stall_timeout_s=60.0), source_factory=factory_of(same), repeat_limit=3, max_reconnects=0)
    cams.append(cam)
    cam.start()
    wait_until(lambda: cam.state == "failed", 10.0, "a frozen stream given up (no reconnects allowed)")
    assert cam.last_error == "stream frozen: the same frame 4 times"
    assert (same.reads, cam.frames) == (4, 3)  # the 4th read was the same: not handed out


def test_a_read_on_a_live_camera_without_frames_waits_its_timeout_then_gives_none(cams: list[Camera]) -> None:
    cam = Camera(cfg(stall_timeout_s=60.0), source_factory=factory_of(Script([], finite=False)))
    cams.append(cam)
    cam.start()
    assert cam.read(0.05) is None and not cam.finished and cam.state != "failed"


def test_a_read_stuck_in_a_driver_is_abandoned_at_stop_and_said(caplog: pytest.LogCaptureFixture) -> None:
    reading, release = threading.Event(), threading.Event()

    class Stuck(Script):
        def read(self) -> Optional[np.ndarray]:
            reading.set()
            release.wait(10)  # a V4L2 read that never returns
            return None

    cam = Camera(cfg(), source_factory=factory_of(Stuck([], finite=False)))
    cam.start()
    try:
        assert reading.wait(10)
        cam.stop(0.1)
        assert f"camera {LIVE}: capture thread did not stop within 0.1s" in caplog.messages
    finally:
        release.set()
        cam.stop()
