"""The disk reserve beside the queue (adapters/outbox/reserve.py) on a real small tmpfs: it holds
real bytes, is only made when there is clearly room, shrinks to what is kept and grows back with
what the disk still has (issue 19, mutation survivors)."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.tmpfs import fill, free, tmpfs

from edge_agent.adapters.outbox.reserve import Reserve, free_bytes

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
    os.truncate(filler, filler.stat().st_size - (6 * MIB - free_bytes(disk)))
    assert free_bytes(disk) == 6 * MIB  # exactly twice: enough
    assert r.ensure() and r.path.stat().st_size == 3 * MIB


def test_a_reserve_of_any_size_is_held_whole(disk: Path) -> None:
    """``reserve_bytes`` is at least 1 MiB but any number above: the last odd byte is written too."""
    r = Reserve(disk / "q.db", MIB + 1)
    assert r.ensure() and r.held and r.path.stat().st_size == MIB + 1


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


def test_the_reserve_is_the_owners_alone_however_it_is_made(tmp_path: Path) -> None:
    """0600 like the queue file, whether made while there is room or topped up at close on a full
    disk (a folder shared with other users must not hand them a file of the service's)."""
    old = os.umask(0o022)
    try:
        made = Reserve(tmp_path / "a.db", 64 * 1024)
        assert made.ensure()
        topped = Reserve(tmp_path / "b.db", MIB)
        assert topped.top_up(100_000) == 100_000
    finally:
        os.umask(old)
    for r in (made, topped):
        assert oct(r.path.stat().st_mode & 0o777) == "0o600"


def test_a_reserve_that_cannot_be_filled_is_removed_and_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The disk said there was room, then a write failed (here: the process's file size limit,
    EFBIG): no half reserve is left counting as held, the descriptor is closed, one warning."""
    import resource
    import signal

    r = Reserve(tmp_path / "q.db", MIB)
    fds = len(os.listdir("/proc/self/fd"))
    old_sig = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    old_lim = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (MIB // 2, old_lim[1]))
    try:
        with caplog.at_level(logging.WARNING, logger="edge_agent.outbox"):
            assert not r.ensure()
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, old_lim)
        signal.signal(signal.SIGXFSZ, old_sig)
    assert not r.path.exists() and not r.held
    assert len(os.listdir("/proc/self/fd")) == fds
    assert [m.getMessage() for m in caplog.records] == [
        f"outbox: cannot fill the disk reserve {r.path}: File too large"
    ]


def test_a_reserve_that_cannot_be_released_is_one_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    r = Reserve(tmp_path / "q.db", MIB)
    r.path.mkdir()  # something else is in its place: it cannot be given back
    (r.path / "x").write_bytes(b"\0" * 8192)
    with caplog.at_level(logging.WARNING, logger="edge_agent.outbox"):
        assert not r.release()
    assert r.path.is_dir()
    assert [(m.levelno, m.getMessage()) for m in caplog.records] == [
        (logging.ERROR, f"outbox: cannot release the disk reserve {r.path}: Is a directory")
    ]
