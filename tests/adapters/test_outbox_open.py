"""Opening the outbox's files (adapters/outbox_open.py) in process: a failed open is one line and
leaves nothing held, so the agent's next try (or another process) can open the queue (issue 19,
mutation survivors; the full-disk open is in tests/outbox/test_full_disk.py)."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.outbox import TOPIC, big_limits
from support.tmpfs import fill, tmpfs

from edge_agent.adapters.outbox import Outbox
from edge_agent.errors import QueueError


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_a_queue_that_cannot_be_opened_is_one_error_and_holds_nothing(tmp_path: Path) -> None:
    """A directory where the queue file should be: one QueueError naming the file, no descriptor
    left open (the marks, the lock), and once the path is fixed the queue opens at once."""
    path = tmp_path / "q.db"
    path.mkdir()
    before = _fds()
    for _ in range(3):  # the agent retries
        with pytest.raises(QueueError) as err:
            Outbox(path, big_limits())
        assert str(err.value) == f"{path}: cannot open the queue database: unable to open database file"
    assert _fds() == before
    path.rmdir()
    with Outbox(path, big_limits()) as ob:
        ob.put(TOPIC, {"n": 1})
        assert (ob.boot, ob.stats()["pending"]) == (1, 1)
    assert _fds() == before


def test_an_open_that_fails_with_room_on_the_disk_keeps_the_reserve(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Only a full disk gives back the reserve kept for the next start: any other failed open
    (here the file replaced by a folder) leaves it whole and logs no full-disk line."""
    path = tmp_path / "q.db"
    with Outbox(path, big_limits()) as ob:
        ob.put(TOPIC, {"n": 1})
    reserve = tmp_path / "q.db.reserve"
    size = reserve.stat().st_size
    assert size == 1 << 20
    for f in tmp_path.glob("q.db*"):
        if f.name in ("q.db", "q.db-wal", "q.db-shm"):
            f.unlink()
    path.mkdir()
    with caplog.at_level(logging.WARNING, logger="edge_agent.outbox"), pytest.raises(QueueError):
        Outbox(path, big_limits())
    assert reserve.stat().st_size == size
    assert caplog.records == []


def test_the_writer_syncs_every_commit_and_the_sync_side_does_not_wait_for_fsync(tmp_path: Path) -> None:
    """synchronous=FULL on the connection that commits results (a commit is on disk when it
    returns); NORMAL on the one that deletes acked rows (a lost delete only redelivers)."""
    with Outbox(tmp_path / "q.db", big_limits()) as ob:
        assert ob.db.w.execute("PRAGMA synchronous").fetchone()[0] == 2
        assert ob.db.r.execute("PRAGMA synchronous").fetchone()[0] == 1


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    with tmpfs(tmp_path / "fs", size="8m") as where:
        yield where


def test_an_open_with_no_room_for_the_reserve_starts_capped_and_says_why(
    disk: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Less than twice the reserve free at open (the reserve lost, the disk filled meanwhile): the
    queue starts as on a full disk -- capped, reported in its figures -- with one line saying why."""
    path = disk / "q.db"
    with Outbox(path, big_limits()) as ob:
        ob.put(TOPIC, {"n": 1})
    (disk / "q.db.reserve").unlink()
    filler = disk / "filler"
    size = fill(disk)
    os.truncate(filler, size - (1 << 20))  # 1 MiB free: less than twice the 1 MiB reserve
    with caplog.at_level(logging.WARNING, logger="edge_agent.outbox"), Outbox(path, big_limits()) as ob:
        assert ob.stats()["disk_full"] is True
        lines = [r.getMessage() for r in caplog.records]
        assert len(lines) == 1 and lines[0].startswith(
            f"outbox {path}: filesystem full (less than twice the reserve is free at open): "
            "no reserve left to release; the file stays at "
        )
        ob.put(TOPIC, {"n": 2})
        ob.flush()
        assert ob.stats()["pending"] == 2  # capped: new rows still fit in the pages it has


def test_a_new_queue_on_a_full_disk_is_one_error_line(disk: Path) -> None:
    """Not even the marks file's two slots fit: one QueueError naming the file, nothing held."""
    fill(disk)
    before = _fds()
    with pytest.raises(QueueError) as err:
        Outbox(disk / "q.db", big_limits())
    assert (
        str(err.value)
        == f"{disk / 'q.db'}: cannot open the queue database: [Errno 28] No space left on device"
    )
    assert _fds() == before
