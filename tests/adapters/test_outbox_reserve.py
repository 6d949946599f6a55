"""The disk reserve beside the queue (adapters/outbox_reserve.py) on a real small tmpfs: it holds
real bytes, is only made when there is clearly room, shrinks to what is kept and grows back with
what the disk still has (issue 19, mutation survivors)."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.tmpfs import fill, free, tmpfs

from edge_agent.adapters.outbox_reserve import Reserve, free_bytes

MIB = 1 << 20


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    with tmpfs(tmp_path / "fs", size="8m") as where:
        yield where


def test_the_reserve_holds_real_bytes_and_is_released_to_what_is_kept(disk: Path) -> None:
    r = Reserve(disk / "q.db", MIB)
    assert r.path == disk / "q.db.reserve" and not r.held
    before = free(disk)
    assert r.ensure() and r.held
    assert r.path.stat().st_size == MIB
    assert before - free(disk) >= MIB  # written, not a sparse file: the disk really gave it
    assert r.ensure()  # already held: nothing to do
    assert r.release(keep=MIB // 4)
    assert r.path.stat().st_size == MIB // 4 and not r.held
    assert not r.release(keep=MIB // 4)  # nothing more to give back at that size
    assert not r.release(keep=MIB)  # nor when asked to keep more than there is
    assert r.path.stat().st_size == MIB // 4
    assert r.release()  # all of it: the file goes
    assert not r.path.exists()
    assert not r.release()  # nothing left


def test_the_reserve_is_made_only_with_twice_its_size_free(disk: Path) -> None:
    r = Reserve(disk / "q.db", 3 * MIB)
    filler = disk / "filler"
    with open(filler, "wb") as f:
        f.write(b"\0" * (free(disk) - 6 * MIB + 4096))  # just under twice the reserve left
    assert free_bytes(disk) < 6 * MIB
    assert not r.ensure() and not r.path.exists()
    os.truncate(filler, filler.stat().st_size - 8192)
    assert free_bytes(disk) >= 6 * MIB
    assert r.ensure() and r.path.stat().st_size == 3 * MIB


def test_no_reserve_is_always_held(disk: Path) -> None:
    r = Reserve(disk / "q.db", 0)
    assert r.ensure() and not r.path.exists()
    assert Reserve(disk / "q.db", -5).size == 0


def test_top_up_grows_with_what_the_disk_still_has(disk: Path) -> None:
    r = Reserve(disk / "q.db", MIB)
    assert r.top_up(100_000) == 100_000 and r.path.stat().st_size == 100_000
    assert r.top_up(50_000) == 100_000  # never shrinks
    fill(disk)
    r.release(keep=40_000)  # 60 kB free again
    got = r.top_up(MIB)
    assert 90_000 <= got < MIB and r.path.stat().st_size == got


def test_free_bytes_of_a_missing_folder_is_zero(tmp_path: Path) -> None:
    assert free_bytes(tmp_path / "nowhere") == 0
    assert free_bytes(tmp_path) > 0


def test_a_reserve_that_cannot_be_created_is_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    r = Reserve(tmp_path / "q.db", MIB)
    r.path.mkdir()  # something else is in its place
    with caplog.at_level(logging.WARNING, logger="edge_agent.outbox"):
        assert not r.ensure()
        assert r.top_up(MIB) == 0
    assert [m.getMessage() for m in caplog.records] == [
        f"outbox: cannot create the disk reserve {r.path}: Is a directory"
    ]
