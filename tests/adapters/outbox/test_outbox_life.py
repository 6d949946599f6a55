"""The outbox's run in process (adapters/outbox/outbox.py): a crash and the starts after it, the
background flusher's retries and maintenance, what a close does when the file takes no write
(issue 19, mutation survivors; the kill -9 side is in tests/adapters/outbox/test_loss_visible.py)."""

from __future__ import annotations

import contextlib
import json
import logging
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from support import wait_until
from support.outbox import TOPIC, FullOnDelete, big_limits, crash, meta_rows

from edge_agent.adapters.outbox import flusher as flusher_mod
from edge_agent.adapters.outbox.marks import read_marks
from edge_agent.adapters.outbox.outbox import Outbox
from edge_agent.errors import QueueFullError

FIGURES = ("seq", "boot", "pending", "crashes", "seq_skipped", "lost", "dropped", "rejected")


class _Failing:
    """The writer connection of a file that takes no write (an I/O error, not a full disk) while
    ``broken`` holds: every statement fails with ``error``."""

    def __init__(self, conn: sqlite3.Connection, error: Exception) -> None:
        self._conn = conn
        self.error = error
        self.broken = True
        self.failures = 0

    def _fail(self) -> None:
        if self.broken:
            self.failures += 1
            raise self.error

    def execute(self, *args: Any) -> Any:
        self._fail()
        return self._conn.execute(*args)

    def executemany(self, *args: Any) -> Any:
        self._fail()
        return self._conn.executemany(*args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


def _figures(ob: Outbox) -> dict[str, int]:
    s = ob.stats()
    return {k: s[k] for k in FIGURES}


def _seqs(ob: Outbox) -> list[int]:
    got = ob.claim(10_000)
    ob.release()
    return [int(json.loads(m.payload)["seq"]) for m in got]


def test_one_crash_is_counted_once_also_after_a_drain_that_sends_nothing_new(tmp_path: Path) -> None:
    """kill -9 with 3 results unflushed: the next start counts one crash and the reserved window as
    skipped; a drain (open, close) closes clean, so the start after it counts nothing again."""
    path = tmp_path / "q.db"
    ob = Outbox(path, big_limits(), flush_interval_s=60, flush_batch=100)
    for i in range(5):
        ob.put(TOPIC, {"n": i})
    ob.flush()
    for i in range(3):
        ob.put(TOPIC, {"n": i})
    crash(ob)
    with Outbox(path, big_limits(), flush_interval_s=60) as ob:
        # seq 1..5 stored; 6..21 were reserved (16 ahead of the commit of 5): the crash window
        assert _figures(ob) == {
            "seq": 21, "boot": 2, "pending": 5, "crashes": 1, "seq_skipped": 16, "lost": 0, "dropped": 0,
            "rejected": 0,
        }  # fmt: skip
        assert _seqs(ob) == [1, 2, 3, 4, 5]
    kept = read_marks(path)
    assert kept is not None and (kept.seq, kept.boot, kept.clean, kept.skipped_to) == (21, 2, True, 21)
    with Outbox(path, big_limits(), flush_interval_s=60) as ob:
        assert _figures(ob) == {
            "seq": 21, "boot": 3, "pending": 5, "crashes": 1, "seq_skipped": 16, "lost": 0, "dropped": 0,
            "rejected": 0,
        }  # fmt: skip
        ob.put(TOPIC, {"n": 9})
        assert _seqs(ob)[-1] == 22


def test_numbers_refused_past_the_reservation_are_never_reused_after_a_crash(tmp_path: Path) -> None:
    """reject_new at its cap: every refused result takes a number; past the reservation on disk the
    refusals reserve more in the marks, so a crash then cannot make the next boot reuse one, and
    the refusals counted before the crash stay counted."""
    path = tmp_path / "q.db"
    ob = Outbox(path, big_limits(max_messages=2, policy="reject_new"), flush_interval_s=60, flush_batch=100)
    ob.put(TOPIC, {"n": 0})  # seq 1: committed at once, reserving up to 17
    ob.put(TOPIC, {"n": 1})  # seq 2: unflushed, lost in the crash
    for i in range(30):  # seq 3..32 refused
        with pytest.raises(QueueFullError):
            ob.put(TOPIC, {"n": 2 + i})
    kept = read_marks(path)
    assert kept is not None and kept.seq >= 32 and not kept.clean
    crash(ob)
    with Outbox(path, big_limits(), flush_interval_s=60) as ob:
        f = _figures(ob)
        assert (f["seq"], f["crashes"], f["pending"]) == (34, 1, 1)
        # seq 3..18 refused before the reservation was extended; 2..34 are past what was stored
        assert (f["rejected"], f["seq_skipped"]) == (16, 33)
        ob.put(TOPIC, {"n": 99})
        assert _seqs(ob) == [1, 35]


def test_a_background_flush_that_fails_is_one_error_line_and_is_retried(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The flusher thread meets an I/O error: it logs it once, keeps every row in memory and stores
    them, in order, once the file takes writes again -- without anyone calling flush()."""
    path = tmp_path / "q.db"
    with Outbox(path, big_limits(), flush_interval_s=0.05, flush_batch=100) as ob:
        ob.put(TOPIC, {"n": 0})  # committed inside put (the first reservation)
        failing = _Failing(ob.db.w, sqlite3.OperationalError("disk I/O error"))
        ob.db.w = failing  # type: ignore[assignment]
        with caplog.at_level(logging.ERROR, logger="edge_agent.outbox"):
            for i in range(1, 4):
                ob.put(TOPIC, {"n": i})
            wait_until(lambda: failing.failures >= 2, 10, "two failed background flushes")
        assert [r.getMessage() for r in caplog.records] == [
            f"outbox {path}: background flush failed (will retry): {path}: cannot write the queue: disk I/O error"
        ]
        assert ob.stats()["unflushed"] == 3 and ob.stats()["pending"] == 4
        failing.broken = False
        wait_until(lambda: ob.stats()["unflushed"] == 0, 10, "the rows stored by the flusher")
        assert [int(json.loads(m.payload)["n"]) for m in ob.claim(10)] == [0, 1, 2, 3]


def test_the_flusher_survives_an_unexpected_error(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "q.db"
    with Outbox(path, big_limits(), flush_interval_s=0.05, flush_batch=100) as ob:
        ob.put(TOPIC, {"n": 0})
        failing = _Failing(ob.db.w, RuntimeError("boom"))
        ob.db.w = failing  # type: ignore[assignment]
        with caplog.at_level(logging.ERROR, logger="edge_agent.outbox"):
            ob.put(TOPIC, {"n": 1})
            wait_until(lambda: failing.failures >= 1, 10, "a failed background flush")
            wait_until(lambda: caplog.records, 5, "the error line")
        assert caplog.records[0].getMessage() == (
            f"outbox {path}: background flush failed (will retry): unexpected RuntimeError: boom"
        )
        failing.broken = False
        wait_until(lambda: ob.stats()["unflushed"] == 0, 10, "the row stored by the flusher")
        assert ob.stats()["pending"] == 2


def test_the_flusher_expires_old_rows_and_retries_deferred_deletes_on_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Maintenance runs from the flusher thread (every 30 s; 0.2 s here): rows past max_age go
    without a call from outside, and acked rows whose DELETE met a full disk are deleted."""
    monkeypatch.setattr(flusher_mod, "MAINTENANCE_S", 0.2)
    path = tmp_path / "q.db"
    with Outbox(path, big_limits(max_age_s=3600), flush_interval_s=0.05) as ob:
        for i in range(3):
            ob.put(TOPIC, {"n": i})
        ob.flush()
        ob.db.r = FullOnDelete(ob.db.r, 3)  # type: ignore[assignment]
        got = ob.claim(3)
        ob.ack([m.rowid for m in got])  # acked; the deletes wait for the next ack
        assert (meta_rows(path), ob.stats()["pending"]) == (3, 0)
        wait_until(lambda: meta_rows(path) == 0, 10, "the deferred deletes done by maintenance")
    ob = Outbox(path, big_limits(max_age_s=3600), flush_interval_s=0.05)
    try:
        for i in range(2):
            ob.put(TOPIC, {"n": i})
        ob.flush()
        later = time.time() + 7200
        monkeypatch.setattr(time, "time", lambda: later)
        wait_until(lambda: ob.stats()["expired"] == 2, 10, "the old rows expired by maintenance")
        assert ob.stats()["pending"] == 0
    finally:
        ob.close()


def test_a_close_on_a_file_that_takes_no_write_counts_the_unflushed_results_as_lost(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The final flush meets an I/O error: the results only in memory cannot be stored. They are
    counted (kept in the marks file) and logged, so the consumers' gap is explained; before, the
    close wrote the last number as exact and clean and the next start counted nothing."""
    path = tmp_path / "q.db"
    ob = Outbox(path, big_limits(), flush_interval_s=60, flush_batch=100)
    for i in range(5):
        ob.put(TOPIC, {"n": i})
    ob.flush()
    for i in range(3):
        ob.put(TOPIC, {"n": 5 + i})
    ob.db.w = _Failing(ob.db.w, sqlite3.OperationalError("disk I/O error"))  # type: ignore[assignment]
    with caplog.at_level(logging.WARNING, logger="edge_agent.outbox"):
        ob.close()
    err = f"{path}: cannot write the queue: disk I/O error"
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
        (logging.ERROR, f"outbox {path}: final flush failed: {err}"),
        (logging.ERROR, f"outbox {path}: counters not written at close: {err}"),
        (logging.ERROR, f"outbox {path}: 3 unflushed messages lost at close (counted in lost)"),
        (logging.WARNING, f"outbox {path}: disk full at close: counters kept in {path}.marks"),
    ]
    with Outbox(path, big_limits()) as again:
        assert _figures(again) == {
            "seq": 8, "boot": 2, "pending": 5, "crashes": 0, "seq_skipped": 0, "lost": 3, "dropped": 0,
            "rejected": 0,
        }  # fmt: skip
    ob = Outbox(path, big_limits(), flush_interval_s=60, flush_batch=100)
    for i in range(3):  # the first is stored (the reservation), two stay in memory
        ob.put(TOPIC, {"n": 8 + i})
    ob.db.w = _Failing(ob.db.w, sqlite3.OperationalError("disk I/O error"))  # type: ignore[assignment]
    ob.close()
    with Outbox(path, big_limits()) as again:  # on top of the 3 before
        assert (_figures(again)["lost"], _figures(again)["pending"]) == (5, 6)


def test_a_drain_that_only_acks_writes_the_row_count_at_close(tmp_path: Path) -> None:
    """A run that only sends (acks, no put) changes the row count the marks keep; close writes it,
    so losing the file afterwards counts no loss for rows that were delivered."""
    path = tmp_path / "q.db"
    with Outbox(path, big_limits()) as ob:
        for i in range(4):
            ob.put(TOPIC, {"n": i})
    with Outbox(path, big_limits()) as ob:
        ob.ack([m.rowid for m in ob.claim(10)])
    kept = read_marks(path)
    assert kept is not None and (kept.rows, kept.clean, kept.seq) == (0, True, 4)
    for f in tmp_path.glob("q.db*"):
        if not f.name.endswith((".marks", ".lock")):
            f.unlink()
    with Outbox(path, big_limits()) as ob:
        assert _figures(ob) == {
            "seq": 4, "boot": 3, "pending": 0, "crashes": 0, "seq_skipped": 0, "lost": 0, "dropped": 0,
            "rejected": 0,
        }  # fmt: skip


def test_rows_past_max_age_are_dropped_when_the_queue_opens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A device off for longer than max_age: its old results go at the start, before any is sent."""
    path = tmp_path / "q.db"
    then = time.time() - 7200
    with monkeypatch.context() as m:
        m.setattr(time, "time", lambda: then)
        with Outbox(path, big_limits(), flush_interval_s=60) as ob:
            for i in range(3):
                ob.put(TOPIC, {"n": i})
    with Outbox(path, big_limits(max_age_s=3600), flush_interval_s=60) as ob:
        s = ob.stats()
        assert (s["pending"], s["expired"], s["dropped"]) == (0, 3, 3)
        assert ob.claim(10) == []
    # the expiry wrote a reservation; the close wrote the clean mark over it: no crash counted
    with Outbox(path, big_limits(max_age_s=3600), flush_interval_s=60) as ob:
        s = ob.stats()
        assert (s["expired"], s["crashes"], s["seq_skipped"], s["seq"]) == (3, 0, 0, 3)


def test_a_lone_result_is_stored_after_the_interval_not_after_the_flusher_s_idle_sleep(
    tmp_path: Path,
) -> None:
    """An idle flusher sleeps until its next maintenance (30 s); the first result of a batch wakes
    it, so even one result alone is on disk after about flush_interval_s."""
    path = tmp_path / "q.db"
    with Outbox(path, big_limits(), flush_interval_s=0.1, flush_batch=100) as ob:
        ob.put(TOPIC, {"n": 0})  # the reservation's commit
        time.sleep(0.3)  # the scenario: the flusher gone back to its idle sleep
        ob.put(TOPIC, {"n": 1})
        wait_until(lambda: ob.stats()["unflushed"] == 0, 10, "the lone result stored by the interval")


def test_the_counters_survive_the_loss_of_the_marks_file(tmp_path: Path) -> None:
    """The counters live in the queue file too: without the marks file beside it (a restore of the
    file alone) what was refused and dropped is still counted."""
    path = tmp_path / "q.db"
    with Outbox(path, big_limits(max_messages=2, policy="reject_new"), flush_interval_s=60) as ob:
        for i in range(4):
            with contextlib.suppress(QueueFullError):
                ob.put(TOPIC, {"n": i})
    (tmp_path / "q.db.marks").unlink()
    with Outbox(path, big_limits()) as ob:
        assert _figures(ob) == {
            "seq": 4, "boot": 2, "pending": 2, "crashes": 0, "seq_skipped": 0, "lost": 0, "dropped": 0,
            "rejected": 2,
        }  # fmt: skip


def test_each_salvage_adds_to_the_counts_of_the_ones_before(tmp_path: Path) -> None:
    """Two damaged headers in two runs: each salvage's rows and file are counted on top of the
    earlier ones, and the counts are written, so a clean start after them shows the sum."""
    path = tmp_path / "q.db"
    with Outbox(path, big_limits()) as ob:
        for i in range(10):
            ob.put(TOPIC, {"n": i})
    for run, more in ((1, 5), (2, 0)):
        with path.open("r+b") as f:
            f.write(b"\xa5" * 100)  # the header overwritten
        with Outbox(path, big_limits()) as ob:
            s = ob.stats()
            assert (s["corrupt_files"], s["lost"], s["pending"]) == (run, 0, 10 + 5 * (run - 1))
            assert s["salvaged"] == (10 if run == 1 else 25)
            for i in range(more):
                ob.put(TOPIC, {"n": 10 + i})
    with Outbox(path, big_limits()) as ob:
        s = ob.stats()
        assert (s["corrupt_files"], s["salvaged"], s["lost"], s["crashes"]) == (2, 25, 0, 0)


def test_a_maintenance_that_fails_is_one_line_naming_the_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(flusher_mod, "MAINTENANCE_S", 0.2)
    path = tmp_path / "q.db"
    with Outbox(path, big_limits(), flush_interval_s=0.05) as ob:
        real = ob.db.w

        class FreelistFails:
            def execute(self, sql: str, *args: Any) -> Any:
                if sql == "PRAGMA freelist_count":
                    raise sqlite3.OperationalError("disk I/O error")
                return real.execute(sql, *args)

            def __getattr__(self, name: str) -> Any:
                return getattr(real, name)

        with caplog.at_level(logging.ERROR, logger="edge_agent.outbox"):
            ob.db.w = FreelistFails()  # type: ignore[assignment]
            wait_until(lambda: caplog.records, 10, "the failed maintenance's line")
            ob.db.w = real
        assert caplog.records[0].getMessage() == (
            f"outbox {path}: background flush failed (will retry): {path}: cannot maintain the queue: disk I/O error"
        )
        ob.put(TOPIC, {"n": 1})
        wait_until(lambda: ob.stats()["unflushed"] == 0, 10, "the flusher still at work")


def test_a_process_that_never_closes_its_queue_still_exits(tmp_path: Path) -> None:
    """A command that fails before its close must not hang at exit on the flusher thread."""
    code = (
        "import sys\n"
        "from edge_agent.adapters.outbox.outbox import Outbox\n"
        "from edge_agent.core.queue.policy import Limits\n"
        "Outbox(sys.argv[1], Limits(10, 10**6, 1e9)).put('t', {'n': 1})\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "q.db")], timeout=30, capture_output=True
    )
    assert proc.returncode == 0, proc.stderr.decode()
