"""The gate's frame ring: one frame per interval at most, the newest ``ring_frames`` kept (the
oldest pruned from disk), none older than the age bound, private files."""

from __future__ import annotations

import logging
import stat
import time
from pathlib import Path

import cv2
import numpy as np
import pytest

from edge_agent.adapters.updates.frame_ring import FrameRing

T0 = 1796000000.0
IMG = np.full((32, 48, 3), 127, np.uint8)


def test_one_frame_per_interval_at_most(tmp_path: Path) -> None:
    ring = FrameRing(tmp_path / "ring", max_frames=10, interval_s=60.0, max_age_h=24.0)
    assert ring.offer(IMG, T0)
    assert not ring.offer(IMG, T0 + 59.9)
    assert ring.offer(IMG, T0 + 60.0)
    assert len(ring.files(T0 + 60.0)) == 2


def test_the_newest_frames_are_kept_and_the_oldest_pruned(tmp_path: Path) -> None:
    ring = FrameRing(tmp_path / "ring", max_frames=3, interval_s=1.0, max_age_h=24.0)
    for i in range(5):
        assert ring.offer(IMG, T0 + 10 * i)
    now = T0 + 40
    kept = [int(p.stem) / 1000.0 for p in ring.files(now)]
    assert kept == [T0 + 20, T0 + 30, T0 + 40]
    assert sorted(p.name for p in (tmp_path / "ring").iterdir()) == [p.name for p in ring.files(now)]
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in ring.files(now))
    assert stat.S_IMODE((tmp_path / "ring").stat().st_mode) == 0o700


def test_frames_older_than_the_bound_are_not_offered_to_the_gate(tmp_path: Path) -> None:
    ring = FrameRing(tmp_path / "ring", max_frames=10, interval_s=1.0, max_age_h=1.0)
    ring.offer(IMG, T0)
    ring.offer(IMG, T0 + 1800)
    assert len(ring.files(T0 + 3600)) == 2  # the first is exactly one hour old: still in
    assert [int(p.stem) / 1000.0 for p in ring.files(T0 + 3600.5)] == [T0 + 1800]


def test_off_by_default_keeps_nothing(tmp_path: Path) -> None:
    ring = FrameRing(tmp_path / "ring", max_frames=0, interval_s=1.0, max_age_h=1.0)
    assert not ring.enabled and not ring.offer(IMG, T0)
    assert not (tmp_path / "ring").exists() and ring.files(T0) == []


def test_a_ring_that_cannot_be_written_warns_once_and_the_loop_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # a full disk or a file where the folder should be: the frame loop calls offer() for every frame
    (tmp_path / "ring").write_text("not a folder")
    ring = FrameRing(tmp_path / "ring", max_frames=10, interval_s=1.0, max_age_h=1.0)
    with caplog.at_level(logging.WARNING, logger="edge_agent.adapters.updates.frame_ring"):
        assert [ring.offer(IMG, T0 + i) for i in range(3)] == [False, False, False]
    (record,) = caplog.records
    assert record.getMessage().startswith(f"frame ring {tmp_path / 'ring'}: [Errno 20] Not a directory")
    assert ring.files(T0 + 3) == []


def test_a_file_not_named_by_the_ring_is_skipped_not_the_end_of_the_list(tmp_path: Path) -> None:
    ring = FrameRing(tmp_path / "ring", max_frames=10, interval_s=1.0, max_age_h=1.0)
    assert ring.offer(IMG, T0)
    (tmp_path / "ring" / "-copy.jpg").write_bytes(b"x")  # sorts before the digits
    assert [p.stem for p in ring.files(T0)] == [f"{int(T0 * 1000):015d}"]


def test_the_kept_frame_is_the_picture_and_the_clock_is_the_wall_clock(tmp_path: Path) -> None:
    ring = FrameRing(tmp_path / "ring", max_frames=10, interval_s=0.0, max_age_h=1.0)
    before = time.time()
    assert ring.offer(IMG)
    (kept,) = ring.files()
    assert before - 0.001 <= int(kept.stem) / 1000.0 <= time.time()  # named in whole ms
    got = cv2.imread(str(kept))
    assert got is not None and got.shape == IMG.shape and int(np.abs(got.astype(int) - 127).max()) <= 2
    assert [p.suffix for p in (tmp_path / "ring").iterdir()] == [".jpg"]  # no temp file left


def test_a_ring_turned_off_offers_none_of_the_frames_left_on_disk(tmp_path: Path) -> None:
    on = FrameRing(tmp_path / "ring", max_frames=3, interval_s=1.0, max_age_h=1.0)
    assert on.offer(IMG, T0) and on.offer(IMG, T0 + 10)
    assert FrameRing(tmp_path / "ring", max_frames=0, interval_s=1.0, max_age_h=1.0).files(T0 + 10) == []
    one = FrameRing(tmp_path / "ring", max_frames=1, interval_s=1.0, max_age_h=1.0)
    assert [int(p.stem) / 1000.0 for p in one.files(T0 + 10)] == [T0 + 10]


def test_a_symlink_in_place_of_the_temp_file_is_not_followed(tmp_path: Path) -> None:
    # the ring is 0700, but a link planted there must not make the agent write a frame elsewhere
    ring = FrameRing(tmp_path / "ring", max_frames=3, interval_s=1.0, max_age_h=1.0)
    assert ring.offer(IMG, T0)
    outside = tmp_path / "outside"
    outside.write_bytes(b"keep")
    (tmp_path / "ring" / f"{int((T0 + 10) * 1000):015d}.tmp").symlink_to(outside)
    assert not ring.offer(IMG, T0 + 10)
    assert outside.read_bytes() == b"keep"
