"""The marks file's torn write and its failed commits (issue 36), with real failures: a slot torn
mid-write (a new record's first bytes over the old one) is refused by its CRC and the other slot
read; a write the device refuses (``/dev/full`` behind the descriptor: ENOSPC) is not believed, so
the same marks are written again next time; a COMMIT that really fails (a reader's lock, a deferred
foreign key) takes its marks back; a reservation the marks file refused is not counted as made."""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from edge_agent.adapters.outbox.db import STATS_COUNTERS
from edge_agent.adapters.outbox.marks import _RECORD, SLOT, Ledger, MarksFile, marks_path, read_marks
from edge_agent.adapters.outbox.state import QueueState
from edge_agent.core.queue.policy import Marks

LANDED = Marks(seq=20, committed=4, boot=1, rows=4, clean=False, skipped_to=0, counters=(1,) * 8)
NEXT = Marks(seq=40, committed=24, boot=1, rows=24, clean=False, skipped_to=0, counters=(2,) * 8)


@contextmanager
def device_full(mf: MarksFile) -> Iterator[None]:
    """Every write through the handle's descriptor meets ENOSPC (the real /dev/full) until the end."""
    saved = os.dup(mf._fd)
    full = os.open("/dev/full", os.O_WRONLY)
    try:
        os.dup2(full, mf._fd)
        yield
    finally:
        os.dup2(saved, mf._fd)
        os.close(saved)
        os.close(full)


@pytest.mark.parametrize("torn_at", [12, 20, 44, _RECORD.size - 1, _RECORD.size + 2])
def test_a_slot_torn_mid_write_is_refused_and_the_other_slot_read(tmp_path: Path, torn_at: int) -> None:
    db = tmp_path / "q.db"
    mf = MarksFile(db)
    mf.write(LANDED)  # generation 1: slot 1
    mf.write(NEXT)  # generation 2: slot 0
    raw = marks_path(db).read_bytes()
    mf.write(Marks(seq=99, committed=77, boot=1, rows=77, clean=False, counters=(3,) * 8))  # gen 3: slot 1
    new = marks_path(db).read_bytes()
    mf.close()
    # the write of generation 3 stopped after torn_at bytes: its head over generation 1's tail
    torn = raw[:SLOT] + new[SLOT : SLOT + torn_at] + raw[SLOT + torn_at :]
    assert torn != raw and torn != new
    marks_path(db).write_bytes(torn)
    assert read_marks(db) == NEXT
    again = MarksFile(db)  # a new handle writes above generation 2, into the torn slot
    try:
        again.write(LANDED)
        assert read_marks(db) == LANDED
    finally:
        again.close()


def test_a_write_the_device_refuses_is_not_believed_and_is_written_again(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    mf = MarksFile(db)
    try:
        mf.write(LANDED)
        with device_full(mf), pytest.raises(OSError) as err:
            mf.write(NEXT)
        assert err.value.errno == 28
        assert mf.last == LANDED and read_marks(db) == LANDED
        mf.write(NEXT)  # the same marks again: written now, not skipped as "already there"
        assert read_marks(db) == NEXT and mf.last == NEXT
    finally:
        mf.close()


def _queue(db: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(str(db), isolation_level=None, timeout=0)
    conn.execute("PRAGMA journal_mode = DELETE")  # the COMMIT needs an exclusive lock: a reader blocks it
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("CREATE TABLE IF NOT EXISTS p (id INTEGER PRIMARY KEY)")
    conn.execute(
        "CREATE TABLE IF NOT EXISTS c (id INTEGER PRIMARY KEY, "
        "p INTEGER REFERENCES p(id) DEFERRABLE INITIALLY DEFERRED)"
    )
    return conn


@pytest.mark.parametrize("why", ["locked", "constraint"])
def test_a_commit_that_fails_takes_its_marks_back(tmp_path: Path, why: str) -> None:
    db = tmp_path / "q.db"
    conn = _queue(db)
    reader = sqlite3.connect(str(db), isolation_level=None, timeout=0)
    mf = MarksFile(db)
    ledger = Ledger(db, mf, QueueState(db, {k: 0 for k in STATS_COUNTERS}))
    try:
        mf.write(LANDED)
        conn.execute("BEGIN")
        if why == "locked":
            conn.execute("INSERT INTO p VALUES (1)")
            reader.execute("BEGIN")
            reader.execute("SELECT COUNT(*) FROM p").fetchall()  # a shared lock held to the end
        else:
            conn.execute("INSERT INTO c VALUES (1, 42)")  # no parent: the COMMIT refuses it
        mf.write(NEXT)  # what save() writes before the COMMIT
        with pytest.raises(sqlite3.OperationalError if why == "locked" else sqlite3.IntegrityError):
            ledger.commit(conn)
        assert read_marks(db) == LANDED and mf.last == LANDED
    finally:
        if reader.in_transaction:
            reader.execute("ROLLBACK")
        reader.close()
        conn.close()
        mf.close()


def test_a_reservation_the_marks_file_refuses_is_not_counted_as_made(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "q.db"
    mf = MarksFile(db)
    state = QueueState(db, {k: 0 for k in STATS_COUNTERS})
    ledger = Ledger(db, mf, state)
    try:
        mf.write(LANDED)
        state.seq, state.ahead, state.seq_reserved = 30, 16, 20
        with device_full(mf), caplog.at_level(logging.ERROR, logger="edge_agent.outbox"):
            ledger.reserve_seq()
        assert state.seq_reserved == 20 and read_marks(db) == LANDED
        assert [r.getMessage() for r in caplog.records] == [
            f"outbox {db}: cannot reserve seq numbers in {db}.marks: No space left on device"
        ]
        ledger.reserve_seq()  # the device takes writes again: reserved now
        assert state.seq_reserved == 46 and read_marks(db).seq == 46  # type: ignore[union-attr]
    finally:
        mf.close()
