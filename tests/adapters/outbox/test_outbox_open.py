"""Opening the outbox's files (adapters/outbox/opening.py) in process: a failed open is one line and
leaves nothing held, so the agent's next try (or another process) can open the queue (issue 19,
mutation survivors; the full-disk open is in tests/adapters/outbox/test_full_disk.py)."""

from __future__ import annotations

import json
import logging
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.outbox import TOPIC, big_limits
from support.tmpfs import fill, tmpfs

from edge_agent.adapters.outbox.outbox import Outbox
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


def _queue_of(path: Path, n: int) -> None:
    """A closed queue of ``n`` results of ~200 bytes (the marks file beside it says n rows)."""
    with Outbox(path, big_limits(), flush_interval_s=60, flush_batch=10**6) as ob:
        for i in range(n):
            ob.put(TOPIC, {"n": i, "pad": "z" * 150})


def _damage_meta_and_a_row_page(path: Path, n: int) -> None:
    """Zero the page of the ``meta`` table (the row count, seq and counters the file kept) and the
    leaf page holding result ``n``: the file alone no longer says how many rows it held."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        root = int(conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'meta'").fetchone()[0])
    finally:
        conn.close()
    data = bytearray(path.read_bytes())
    at = data.find(b'"n":%d,' % n) // 4096 * 4096
    assert at > 0 and at != (root - 1) * 4096
    for page_at in ((root - 1) * 4096, at):
        data[page_at : page_at + 4096] = bytes(4096)
    path.write_bytes(bytes(data))


def _check_salvage_counted_from_the_marks(ob: Outbox, n: int, lines: list[str]) -> None:
    s = ob.stats()
    kept = sorted(json.loads(m.payload)["n"] for m in ob.claim(n))
    gone = sorted(set(range(n)) - set(kept))
    # every result is salvaged or counted: the loss is the damaged page's rows, not "2 pages"
    assert 5 <= len(gone) < 50 and 100 in gone and gone == list(range(gone[0], gone[-1] + 1))
    assert (s["salvaged"], s["lost"], s["corrupt_files"]) == (len(kept), len(gone), 1)
    salvage = [line for line in lines if "failed its integrity check" in line]
    assert len(salvage) == 1 and salvage[0].endswith(f"salvaged {len(kept)} messages, lost {len(gone)}")
    assert s["seq"] == n  # the meta page's seq is gone too: the marks keep numbers from being reused


def test_a_salvage_that_lost_the_meta_page_counts_the_loss_from_the_marks(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The page holding the file's own row count is damaged with a page of rows: the salvage takes
    the count from the marks kept beside the file, so ``salvaged + lost`` is what was there (not
    the number of damaged pages, a lower bound "how many rows they held is unknown")."""
    path = tmp_path / "q.db"
    _queue_of(path, 200)
    _damage_meta_and_a_row_page(path, 100)
    with caplog.at_level(logging.WARNING, logger="edge_agent.outbox"), Outbox(path, big_limits()) as ob:
        _check_salvage_counted_from_the_marks(ob, 200, [r.getMessage() for r in caplog.records])


def test_an_open_on_a_full_disk_gives_back_the_whole_reserve_and_says_so(
    disk: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A queue closed normally, then someone fills the disk to the brim: opening needs room for
    SQLite's ``-shm``, so the reserve kept for this is given back -- all of it -- the open is
    retried and works, and the operator reads one line naming the file, the error and what was
    done (then the capped start's own line)."""
    path = disk / "q.db"
    _queue_of(path, 50)
    reserve = disk / "q.db.reserve"
    assert reserve.stat().st_size == 1 << 20
    fill(disk)
    with caplog.at_level(logging.WARNING, logger="edge_agent.outbox"), Outbox(path, big_limits()) as ob:
        assert (ob.stats()["pending"], ob.stats()["disk_full"]) == (50, True)
        assert not reserve.exists()
        lines = [r.getMessage() for r in caplog.records]
        assert len(lines) == 2
        assert lines[0] == f"outbox {path}: disk full at open (disk I/O error): released the disk reserve"
        assert lines[1].startswith(
            f"outbox {path}: filesystem full (less than twice the reserve is free at open): "
            "no reserve left to release; "
        )
        assert len(ob.claim(100)) == 50  # the backlog can be drained to make room


def test_a_corrupt_queue_on_a_full_disk_is_salvaged_by_the_retried_open(
    disk: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Damaged (its meta page and a page of rows) and on a brim-full disk: the first try moves it
    aside but finds no room for the fresh file (or for the check's ``-shm``); the damaged file is
    put back, the reserve given back, and the retried open salvages it, with the loss counted from
    the marks as on a disk with room. (The file was left aside and the retry started an empty
    queue: all 200 counted lost, the 187 salvageable ones with them.)"""
    path = disk / "q.db"
    _queue_of(path, 200)
    _damage_meta_and_a_row_page(path, 100)
    fill(disk)
    with caplog.at_level(logging.WARNING, logger="edge_agent.outbox"), Outbox(path, big_limits()) as ob:
        lines = [r.getMessage() for r in caplog.records]
        assert lines[0] == f"outbox {path}: disk full at open (disk I/O error): released the disk reserve"
        _check_salvage_counted_from_the_marks(ob, 200, lines)
    assert len([f for f in disk.glob("q.db.corrupt-*") if not f.name.endswith(("-wal", "-shm"))]) == 1
