"""A file source's own frame times (Frame.ts_media), which objects mode measures dwell on so that
``run`` counts a clip as ``infer --track`` does (tests/app/agent/test_objects_frame_time.py): a
video's frame index / its rate, a folder's index / camera.fps (10 unset), a skipped image keeping
its slot, the time going on across a loop and a reopen."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from edge_agent.adapters.camera.backends import FolderSourceFactory, build_source_factory
from edge_agent.adapters.camera.capture import Camera
from edge_agent.core.camera.source_spec import VIDEO_FPS, video_rate
from edge_agent.core.config.schema import CameraConfig
from edge_agent.errors import ImageError


def frames(d: Path, n: int, broken: tuple[int, ...] = ()) -> Path:
    d.mkdir()
    for i in range(n):
        if i in broken:
            (d / f"{i:02d}.png").write_bytes(b"not a png")
        else:
            cv2.imwrite(str(d / f"{i:02d}.png"), np.full((6, 8, 3), 10 * i, np.uint8))
    return d


def times(source: object, n: int) -> list[object]:
    out: list[object] = []
    for _ in range(n):
        try:
            img = source.read()  # type: ignore[attr-defined]
        except ImageError:
            out.append("skipped")
            continue
        out.append(None if img is None else source.media_ts)  # type: ignore[attr-defined]
    return out


def test_a_folder_frame_is_at_its_index_over_camera_fps_or_10(tmp_path: Path) -> None:
    d = frames(tmp_path / "f", 4, broken=(1,))
    assert times(FolderSourceFactory(str(d))(), 5) == [0.0, "skipped", 0.2, 0.3, None]
    paced = FolderSourceFactory(str(d), fps=50.0)
    assert times(paced(), 2) == [0.0, "skipped"]
    assert times(paced(), 2) == [0.04, 0.06]  # a reopen goes on from where the replay was
    looping = FolderSourceFactory(str(d), loop=True, fps=4.0)()
    assert times(looping, 6) == [0.0, "skipped", 0.5, 0.75, 1.0, "skipped"]  # and across a loop


def test_a_video_frame_is_at_its_index_over_the_files_rate_across_a_loop(tmp_path: Path) -> None:
    path = tmp_path / "clip.avi"
    w = cv2.VideoWriter(str(path), cv2.VideoWriter.fourcc(*"MJPG"), 12.5, (64, 48))
    assert w.isOpened()
    for i in range(3):
        w.write(np.full((48, 64, 3), 40 * i, np.uint8))
    w.release()
    factory, _ = build_source_factory(CameraConfig(source=str(path), loop=True))
    assert times(factory(), 5) == [0.0, 0.08, 0.16, 0.24, 0.32]
    assert [video_rate(r) for r in (12.5, 1000.0, 0.0, -1.0, 1001.0, float("nan"))] == [
        12.5,
        1000.0,
        VIDEO_FPS,
        VIDEO_FPS,
        VIDEO_FPS,
        VIDEO_FPS,
    ]


@pytest.mark.parametrize("fps", [None, 20.0])
def test_the_camera_hands_the_folders_times_on_with_each_frame(tmp_path: Path, fps: float) -> None:
    d = frames(tmp_path / "f", 3)
    cam = Camera(CameraConfig(source=str(d), fps=fps))
    cam.start()
    try:
        got = [cam.read(5.0) for _ in range(3)]
    finally:
        cam.stop()
    rate = fps or 10.0
    assert [f.ts_media if f else None for f in got] == [0.0, 1 / rate, 2 / rate]


def _clip(path: Path, n: int) -> Path:
    w = cv2.VideoWriter(str(path), cv2.VideoWriter.fourcc(*"MJPG"), 10.0, (64, 48))
    assert w.isOpened()
    for i in range(n):
        w.write(np.full((48, 64, 3), 40 * i, np.uint8))
    w.release()
    return path


def _frame_no(img: np.ndarray) -> int:
    return round(float(img.mean()) / 40)


@pytest.mark.parametrize(("loop", "first", "then"), [(False, 3, [3, 4, None]), (True, 5, [0, 1, 2])])
def test_a_reopened_video_goes_on_after_its_last_frame_and_time(
    tmp_path: Path, loop: bool, first: int, then: list[object]
) -> None:
    """A camera stopped and started on a file must not replay it from frame 0 (every object on it
    counted twice, its times going back)."""
    factory, _ = build_source_factory(CameraConfig(source=str(_clip(tmp_path / "c.avi", 5)), loop=loop))
    src = factory()
    assert [_frame_no(src.read()) for _ in range(first)] == [i % 5 for i in range(first)]  # type: ignore[arg-type]
    src.close()
    again = factory()
    got: list[object] = []
    for _ in then:
        img = again.read()
        got.append(None if img is None else _frame_no(img))
    assert got == then
    assert again.media_ts == pytest.approx((first + len([t for t in then if t is not None]) - 1) / 10.0)  # type: ignore[attr-defined]
    fresh, _ = build_source_factory(CameraConfig(source=str(tmp_path / "c.avi")))
    assert _frame_no(fresh().read()) == 0  # type: ignore[arg-type]  # another camera starts at 0


def test_the_camera_restarted_on_a_video_hands_on_later_frame_times(tmp_path: Path) -> None:
    cam = Camera(CameraConfig(source=str(_clip(tmp_path / "c.avi", 6))))
    cam.start()
    try:
        before = [cam.read(5.0) for _ in range(2)]
    finally:
        cam.stop()
    cam.start()
    try:
        after = cam.read(5.0)
    finally:
        cam.stop()
    assert [f.ts_media for f in before if f] == [0.0, 0.1]
    assert after is not None and after.ts_media is not None and after.ts_media >= 0.2
    assert _frame_no(after.image) == round(after.ts_media * 10)
