"""The gate's frame ring: one frame per interval at most, the newest ``ring_frames`` kept (the
oldest pruned from disk), none older than the age bound, private files."""

from __future__ import annotations

import stat
from pathlib import Path

import numpy as np

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
