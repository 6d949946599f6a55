"""The marks file beside the queue (adapters/outbox_marks.py) in process: what the next start reads
after a COMMIT that failed and after a close that could write nothing but the marks (issue 19,
mutation survivors; the kill -9 side is in tests/outbox/test_loss_visible.py)."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import pytest
from support.outbox import TOPIC, big_limits, crash

from edge_agent.adapters.outbox import Outbox
from edge_agent.adapters.outbox_marks import MarksFile, read_marks
from edge_agent.core.queue_policy import Marks
from edge_agent.errors import QueueFullError


class _Unwritable:
    """The writer connection of a disk that takes no more writes (every statement fails)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def execute(self, *args: object) -> object:
        raise sqlite3.OperationalError("disk I/O error")

    def executemany(self, *args: object) -> object:
        raise sqlite3.OperationalError("disk I/O error")

    def __getattr__(self, name: str) -> object:
        return getattr(self._conn, name)


def test_a_close_that_can_write_only_the_marks_keeps_the_counters_and_reports_no_crash(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The queue file takes no write at close: the counters (a rejection here) and the exact last
    number go to the marks file; the next start has them, counts no crash and no gap, and numbers
    on from the last one handed out."""
    path = tmp_path / "q.db"
    ob = Outbox(path, big_limits(max_messages=3, policy="reject_new"), flush_interval_s=60, flush_batch=100)
    for i in range(3):
        ob.put(TOPIC, {"n": i})
    ob.flush()
    with pytest.raises(QueueFullError):
        ob.put(TOPIC, {"n": 3})  # seq 4, rejected
    ob.db.w = _Unwritable(ob.db.w)  # type: ignore[assignment]
    with caplog.at_level(logging.WARNING, logger="edge_agent.outbox"):
        ob.close()
    assert f"counters kept in {path}.marks" in caplog.text
    kept = read_marks(path)
    assert kept is not None
    assert (kept.seq, kept.committed, kept.clean, kept.skipped_to) == (4, 3, True, 4)
    assert kept.counters[2] == 1  # rejected
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="edge_agent.outbox"), Outbox(path, big_limits()) as again:
        s = again.stats()
        assert (s["rejected"], s["crashes"], s["seq_skipped"], s["lost"], s["pending"]) == (1, 0, 0, 0, 3)
        again.put(TOPIC, {"n": 4})
        assert again.stats()["seq"] == 5
    assert "without a clean close" not in caplog.text


def test_marks_that_cannot_be_written_at_close_are_one_error_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "q.db"
    ob = Outbox(path, big_limits(), flush_interval_s=60)
    ob.put(TOPIC, {"n": 1})
    ob.flush()
    before = read_marks(path)
    ob.ledger.marks.close()  # its descriptor gone: the write fails with EBADF
    with caplog.at_level(logging.WARNING, logger="edge_agent.outbox"):
        ob.ledger.counters_to_marks()
    assert [r.levelno for r in caplog.records] == [logging.ERROR]
    assert caplog.records[0].getMessage() == (
        f"outbox {path}: counters not written at close: Bad file descriptor"
    )
    assert read_marks(path) == before
    crash(ob)


def test_undo_puts_the_marks_of_the_last_commit_back(tmp_path: Path) -> None:
    """A COMMIT that failed after its marks were written: the next start must read the marks of
    the commit that is in the file, not those of the one that is not."""
    db = tmp_path / "q.db"
    marks = MarksFile(db)
    try:
        landed = Marks(seq=20, committed=4, boot=1, rows=4, clean=False, skipped_to=0, counters=(1,) * 8)
        failed = Marks(seq=40, committed=24, boot=1, rows=24, clean=False, skipped_to=0, counters=(2,) * 8)
        marks.write(landed)
        marks.write(failed)
        assert read_marks(db) == failed
        marks.undo()
        assert read_marks(db) == landed and marks.last == landed
    finally:
        marks.close()


def test_undo_with_nothing_written_before_changes_nothing(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    marks = MarksFile(db)
    try:
        marks.undo()  # nothing written at all
        assert read_marks(db) is None
        first = Marks(seq=20, committed=4, boot=1, rows=4, clean=False, counters=(0,) * 8)
        marks.write(first)
        marks.undo()  # the first write has no predecessor to restore
        assert read_marks(db) == first
    finally:
        marks.close()


def test_an_undo_that_cannot_write_is_one_warning_naming_the_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "q.db"
    marks = MarksFile(db)
    landed = Marks(seq=20, committed=4, boot=1, rows=4, clean=False, counters=(0,) * 8)
    marks.write(landed)
    marks.write(Marks(seq=40, committed=24, boot=1, rows=24, clean=False, counters=(0,) * 8))
    marks.close()
    with caplog.at_level(logging.WARNING, logger="edge_agent.outbox"):
        marks.undo()  # best effort: logged, not raised
    assert [r.getMessage() for r in caplog.records] == [
        f"outbox: cannot restore {db}.marks: Bad file descriptor"
    ]
