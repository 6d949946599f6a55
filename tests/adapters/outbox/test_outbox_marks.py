"""The marks file beside the queue (adapters/outbox/marks.py) in process: what the next start reads
after a COMMIT that failed and after a close that could write nothing but the marks (issue 19,
mutation survivors; the kill -9 side is in tests/adapters/outbox/test_loss_visible.py)."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import sqlite3
import zlib
from pathlib import Path

import pytest
from support.outbox import TOPIC, big_limits, crash

from edge_agent.adapters.outbox.marks import _RECORD, MAGIC, SLOT, MarksFile, marks_path, read_marks
from edge_agent.adapters.outbox.outbox import Outbox
from edge_agent.core.queue.policy import Marks
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


def _figures(ob: Outbox) -> tuple[int, ...]:
    s = ob.stats()
    return tuple(s[k] for k in ("seq", "crashes", "seq_skipped", "rejected", "lost", "pending"))


def test_a_crash_window_counted_once_is_not_counted_again_without_the_marks_file(tmp_path: Path) -> None:
    """Two crashes, the second before anything new was stored; then the marks file is gone too.
    The file's own meta says up to where gaps were counted, so the first window is not counted a
    second time."""
    path = tmp_path / "q.db"
    ob = Outbox(path, big_limits(), flush_interval_s=60, flush_batch=100)
    for i in range(8):
        ob.put(TOPIC, {"n": i})
        if i == 4:
            ob.flush()  # 1..5 stored, 6..21 reserved; 6..8 lost in the crash
    crash(ob)
    ob = Outbox(path, big_limits(), flush_interval_s=60, flush_batch=100)
    assert _figures(ob) == (21, 1, 16, 0, 0, 5)
    ob.flush()  # stores the counters (and a new reservation, 22..37), nothing else
    crash(ob)
    marks_path(path).unlink()
    with Outbox(path, big_limits()) as ob:
        assert _figures(ob) == (37, 2, 32, 0, 0, 5)


def test_refusals_after_a_crash_reserve_above_the_counted_window(tmp_path: Path) -> None:
    """A full reject_new queue after a crash: the first put is refused before anything is stored,
    and its number is reserved in the marks file only. A second crash then counts the numbers
    above the first window, not the first window again."""
    path = tmp_path / "q.db"
    limits = big_limits(max_messages=2, policy="reject_new")
    ob = Outbox(path, limits, flush_interval_s=60, flush_batch=100)
    ob.put(TOPIC, {"n": 0})
    ob.put(TOPIC, {"n": 1})
    ob.flush()  # 1, 2 stored; reserved up to 18
    crash(ob)
    ob = Outbox(path, limits, flush_interval_s=60, flush_batch=100)
    assert _figures(ob) == (18, 1, 16, 0, 0, 2)
    with pytest.raises(QueueFullError):
        ob.put(TOPIC, {"n": 2})  # seq 19: past the reservation, reserved in the marks (to 35)
    crash(ob)
    with Outbox(path, limits) as ob:
        # 3..18 counted by the first start, 19..35 by this one (19 is also the refusal)
        assert _figures(ob) == (35, 2, 33, 1, 0, 2)


def test_a_reservation_the_marks_file_refuses_is_one_error_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "q.db"
    ob = Outbox(path, big_limits(max_messages=1, policy="reject_new"), flush_interval_s=60, flush_batch=100)
    ob.put(TOPIC, {"n": 0})  # stored; reserved up to 17
    for i in range(16):  # 2..17: within the reservation
        with pytest.raises(QueueFullError):
            ob.put(TOPIC, {"n": i})
    ob.ledger.marks.close()
    caplog.clear()
    with caplog.at_level(logging.ERROR, logger="edge_agent.outbox"), pytest.raises(QueueFullError):
        ob.put(TOPIC, {"n": 17})  # 18: past it
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR] == [
        f"outbox {path}: cannot reserve seq numbers in {path}.marks: Bad file descriptor"
    ]
    crash(ob)


def test_every_commit_syncs_its_marks_to_disk_before_the_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The marks are worth something after a power cut only if they reached the disk before the
    COMMIT they cover: each commit's marks write is followed by a data sync of the marks file,
    and that comes before the COMMIT statement."""
    path = tmp_path / "q.db"
    events: list[str] = []
    real_sync = os.fdatasync

    def sync(fd: int) -> None:
        events.append("sync marks" if os.readlink(f"/proc/self/fd/{fd}").endswith(".marks") else "sync")
        real_sync(fd)

    monkeypatch.setattr(os, "fdatasync", sync)
    with Outbox(path, big_limits(), flush_interval_s=60, flush_batch=100) as ob:
        real = ob.db.w

        class Spy:
            def execute(self, sql: str, *args: object) -> object:
                if sql == "COMMIT":
                    events.append("COMMIT")
                return real.execute(sql, *args)

            def __getattr__(self, name: str) -> object:
                return getattr(real, name)

        ob.db.w = Spy()  # type: ignore[assignment]
        ob.put(TOPIC, {"n": 0})  # commits at once
        for i in range(1, 20):  # past the reservation of 16: a second commit inside put
            ob.put(TOPIC, {"n": i})
        ob.flush()
    # the first put, the spent reservation at seq 17, the flush of 18..20, the clean mark at close
    assert events == ["sync marks", "COMMIT"] * 4


def _lose_the_wal_since(path: Path, snapshot: Path) -> None:
    """What a lost ``-wal`` leaves: the file as of its last checkpoint (``snapshot``), no WAL."""
    shutil.copy(snapshot, path)
    for f in path.parent.glob(path.name + "-*"):
        f.unlink()


def test_a_lost_wal_counts_its_rows_each_time_and_says_so_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Commits that were only in the WAL are gone: the marks saw them, so they are counted as lost
    (and logged with the numbers), on top of what an earlier loss counted; the start after a clean
    close counts nothing again."""
    path, snap = tmp_path / "q.db", tmp_path / "snapshot"
    ob = Outbox(path, big_limits(), flush_interval_s=60, flush_batch=100)
    for i in range(8):
        ob.put(TOPIC, {"n": i})
        if i == 4:
            ob.flush()
            ob.db.checkpoint()
            shutil.copy(path, snap)  # 1..5 in the file itself; 6..8 go to the WAL
    ob.flush()
    crash(ob)
    _lose_the_wal_since(path, snap)
    with caplog.at_level(logging.WARNING, logger="edge_agent.outbox"):
        ob = Outbox(path, big_limits(), flush_interval_s=60, flush_batch=100)
    assert _figures(ob) == (24, 1, 16, 0, 3, 5)
    assert [r.getMessage() for r in caplog.records] == [
        f"outbox {path}: the file holds no row after seq 5 but seq 8 was committed (its WAL or the file "
        "itself was lost): 3 messages lost (at most 8 were stored; acknowledged ones among them may come "
        "back and be sent again with the same id)",
        f"outbox {path}: the previous run ended without a clean close: seq 9..24 skipped (at most 16 "
        "results lost in the group-commit window)",
    ]
    ob.put(TOPIC, {"n": 8})  # seq 25: committed at once (past the reservation)
    ob.db.checkpoint()
    shutil.copy(path, snap)
    ob.put(TOPIC, {"n": 9})
    ob.flush()  # seq 26: in the WAL only
    crash(ob)
    _lose_the_wal_since(path, snap)
    with Outbox(path, big_limits()) as ob:
        # 26 lost (one more), 27..42 the second crash's window
        assert _figures(ob) == (42, 2, 32, 0, 4, 6)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="edge_agent.outbox"), Outbox(path, big_limits()) as ob:
        assert _figures(ob) == (42, 2, 32, 0, 4, 6)
    assert caplog.records == []


def test_without_the_marks_file_a_refusal_reserves_from_the_file_s_own_figures(tmp_path: Path) -> None:
    """The marks file is gone (a restore of the queue file alone) and the queue is full under
    reject_new: the first refusal writes a new marks file from the figures the file holds, so a
    crash then counts no loss, the next boot follows, and no number is used twice."""
    path = tmp_path / "q.db"
    limits = big_limits(max_messages=3, policy="reject_new")
    with Outbox(path, limits) as ob:
        for i in range(3):
            ob.put(TOPIC, {"n": i})
    marks_path(path).unlink()
    ob = Outbox(path, limits, flush_interval_s=60, flush_batch=100)
    assert (ob.boot, _figures(ob)) == (2, (3, 0, 0, 0, 0, 3))
    with pytest.raises(QueueFullError):
        ob.put(TOPIC, {"n": 3})  # seq 4: past the reservation (none yet), reserved up to 20
    kept = read_marks(path)
    assert kept is not None
    assert (kept.seq, kept.committed, kept.boot, kept.rows, kept.clean, kept.skipped_to) == (
        20,
        3,
        1,
        3,
        False,
        3,
    )
    crash(ob)
    with Outbox(path, limits) as ob:
        assert (ob.boot, _figures(ob)) == (2, (20, 1, 17, 1, 0, 3))


def test_a_new_queue_s_marks_file_is_two_private_slots_allocated_at_open(tmp_path: Path) -> None:
    """Both slots exist before the first write (so a write never needs a free block: a full disk
    cannot refuse it) and the file is private like the queue."""
    path = tmp_path / "q.db"
    with Outbox(path, big_limits()):
        st = marks_path(path).stat()
        assert (st.st_size, st.st_mode & 0o777) == (2 * SLOT, 0o600)
        assert read_marks(path) is None  # nothing written yet: zeros


def test_opening_and_closing_an_existing_queue_leaves_its_marks_file_untouched(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    with Outbox(path, big_limits()) as ob:
        for i in range(5):
            ob.put(TOPIC, {"n": i})
    before = marks_path(path).read_bytes()
    mtime = marks_path(path).stat().st_mtime_ns
    with Outbox(path, big_limits()) as ob:
        assert ob.stats()["pending"] == 5
    assert marks_path(path).read_bytes() == before
    assert marks_path(path).stat().st_mtime_ns == mtime


def test_a_new_handle_writes_above_the_generations_on_disk(tmp_path: Path) -> None:
    """The next start's first write must read as the newest, whichever slot the last one used."""
    db = tmp_path / "q.db"
    for n in (2, 3):  # the last write of the first handle in slot 0, then in slot 1
        first = MarksFile(db)
        for i in range(n):
            first.write(Marks(seq=10 + i, boot=1))
        first.close()
        second = MarksFile(db)
        second.write(Marks(seq=50 + n, boot=2))
        second.close()
        assert read_marks(db) == Marks(seq=50 + n, boot=2, counters=(0,) * 8)
        marks_path(db).unlink()


def test_a_marks_file_cut_short_keeps_its_record_when_the_queue_opens(tmp_path: Path) -> None:
    """Cut right after the first slot's record (a copy that stopped short): that record is read,
    and opening re-allocates both slots without losing it. One byte shorter, it is not a record."""
    db = tmp_path / "q.db"
    mf = MarksFile(db)
    mf.write(Marks(seq=10, committed=5, boot=1, rows=5, clean=False))
    newest = Marks(seq=30, committed=20, boot=1, rows=20, clean=False, counters=(1, 2, 3, 4, 5, 6, 7, 8))
    mf.write(newest)  # generation 2: slot 0
    mf.close()
    record = marks_path(db).read_bytes()[: _RECORD.size + 4]  # the record and its CRC
    marks_path(db).write_bytes(record[:-1])
    assert read_marks(db) is None
    marks_path(db).write_bytes(record)
    assert read_marks(db) == newest
    mf = MarksFile(db)
    try:
        assert marks_path(db).stat().st_size == 2 * SLOT
        assert read_marks(db) == newest and mf.last == newest
    finally:
        mf.close()


@pytest.mark.parametrize("field", range(14))
def test_a_slot_with_a_good_crc_but_a_foreign_magic_or_a_negative_figure_is_refused(
    tmp_path: Path, field: int
) -> None:
    """The marks are outside data at the next start: a slot from another program (its own magic)
    or with a negative figure (seq, committed, boot, rows, skipped_to, a counter) is not taken,
    even when its CRC is right; the other slot's marks are used instead."""
    db = tmp_path / "q.db"
    mf = MarksFile(db)
    good = Marks(seq=10, committed=5, boot=1, rows=5, clean=False, skipped_to=3, counters=(1,) * 8)
    mf.write(good)  # generation 1: slot 1
    mf.close()
    # generation 2 in slot 0: magic, gen, seq, committed, boot, rows, skipped_to, clean, 8 counters
    values: list[object] = [MAGIC, 2, 20, 15, 1, 15, 13, 0, *([2] * 8)]
    if field == 0:
        values[0] = b"XXXX"
    else:
        at = field + 1 if field < 6 else field + 2  # seq..skipped_to, then the counters (after clean)
        values[at] = -1
    body = _RECORD.pack(*values)
    raw = bytearray(marks_path(db).read_bytes())
    raw[: len(body) + 4] = body + zlib.crc32(body).to_bytes(4, "big")
    marks_path(db).write_bytes(bytes(raw))
    assert read_marks(db) == good


def test_a_new_marks_file_is_synced_with_its_directory_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A marks file that exists only in the page cache is gone after a power cut, with the
    numbers it reserved: its slots and the folder's entry for it are synced when it is made."""
    synced: list[str] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    db = tmp_path / "q.db"
    MarksFile(db).close()
    assert synced == [f"{db}.marks", str(tmp_path)]
    synced.clear()
    MarksFile(db).close()  # it exists: nothing to make, nothing synced
    assert synced == []


def test_counters_only_in_the_marks_file_are_written_into_the_queue_at_the_next_start(tmp_path: Path) -> None:
    """A close that could write only the marks (the file refused every write): the next start,
    even one that stores nothing (a `queue stats`), writes the counters into the queue file, so
    the file alone still has them if the marks file goes later."""
    path = tmp_path / "q.db"
    ob = Outbox(path, big_limits(max_messages=1, policy="reject_new"), flush_interval_s=60)
    ob.put(TOPIC, {"n": 0})
    with pytest.raises(QueueFullError):
        ob.put(TOPIC, {"n": 1})
    ob.db.w = _Unwritable(ob.db.w)  # type: ignore[assignment]
    ob.close()
    with Outbox(path, big_limits()) as again:
        assert again.stats()["rejected"] == 1
    marks_path(path).unlink()
    with Outbox(path, big_limits()) as again:
        assert _figures(again) == (2, 0, 0, 1, 0, 1)


def test_the_whole_file_lost_keeps_the_counters_of_the_last_commit(tmp_path: Path) -> None:
    """Every commit writes the counters into the marks file too: the queue file gone, what was
    refused is still counted, with the rows it held as lost."""
    path = tmp_path / "q.db"
    with Outbox(path, big_limits(max_messages=2, policy="reject_new"), flush_interval_s=60) as ob:
        for i in range(5):
            with contextlib.suppress(QueueFullError):
                ob.put(TOPIC, {"n": i})
    for f in tmp_path.glob("q.db*"):
        if not f.name.endswith((".marks", ".lock")):
            f.unlink()
    with Outbox(path, big_limits()) as ob:
        assert _figures(ob) == (5, 0, 0, 3, 2, 0)


def test_a_first_result_too_large_then_a_crash_counts_the_reserved_numbers(tmp_path: Path) -> None:
    """Nothing was ever stored: the refused first result reserved 1..17 in the marks file only; the
    crash after it counts exactly those numbers, and the next result gets 18."""
    path = tmp_path / "q.db"
    ob = Outbox(path, big_limits(max_bytes=100), flush_interval_s=60)
    with pytest.raises(QueueFullError):
        ob.put(TOPIC, {"pad": "x" * 200})
    crash(ob)
    with Outbox(path, big_limits(max_bytes=100)) as ob:
        assert _figures(ob) == (17, 1, 17, 1, 0, 0)
        ob.put(TOPIC, {"n": 1})
        assert ob.stats()["seq"] == 18


def test_a_crash_known_only_from_the_marks_is_written_into_the_file_by_a_start_that_stores_nothing(
    tmp_path: Path,
) -> None:
    """After a clean close, a run that only refused (the queue at its cap) and was killed left its
    reservation and counts in the marks file alone. The next start counts the crash and, even if
    it stores nothing, writes the counts into the queue file, so losing the marks file later does
    not lose them."""
    path = tmp_path / "q.db"
    limits = big_limits(max_messages=1, policy="reject_new")
    with Outbox(path, limits) as ob:
        ob.put(TOPIC, {"n": 0})
    ob = Outbox(path, limits, flush_interval_s=60)
    with pytest.raises(QueueFullError):
        ob.put(TOPIC, {"n": 1})  # seq 2: reserved up to 18 in the marks only
    crash(ob)
    with Outbox(path, limits) as ob:
        assert _figures(ob) == (18, 1, 17, 1, 0, 1)
    marks_path(path).unlink()
    with Outbox(path, limits) as ob:
        assert _figures(ob) == (18, 1, 17, 1, 0, 1)
