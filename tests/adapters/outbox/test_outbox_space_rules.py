"""The full-disk rules of adapters/outbox/space.py as a user meets them, on a file capped with
``max_pages`` (SQLite answers SQLITE_FULL exactly as on a full disk) or a real full tmpfs: a held
batch keeps its order, drops start at the batch and double, a drop that meets the full disk itself
gives the batch up at once and says so, what a drop made room for is counted with it, the streak
line, what ``flush`` and ``vacuum`` return (issue 19, mutation survivors)."""

from __future__ import annotations

import contextlib
import json
import logging
import re
import sqlite3
import time
import types
from pathlib import Path
from typing import Any, Callable

import pytest
from support.outbox import TOPIC, FailingDeletes, FullOnDelete, big_limits, crash, meta_rows
from support.outbox import freelist as _freelist

from edge_agent.adapters.outbox import state as outbox_state
from edge_agent.adapters.outbox.outbox import Outbox
from edge_agent.adapters.outbox.views import read_stats
from edge_agent.errors import QueueError, QueueFullError


def _fill(ob: Outbox, pad: int = 1000, per_flush: int = 50) -> int:
    """Put rows until the capped file is full (the first SQLITE_FULL); returns the next n."""
    i = 0
    while not ob.stats()["disk_full"]:
        for _ in range(per_flush):
            with contextlib.suppress(QueueFullError):
                ob.put(TOPIC, {"n": i, "pad": "p" * pad})
            i += 1
        with contextlib.suppress(QueueFullError):
            ob.flush()
    return i


def _ns(ob: Outbox) -> list[int]:
    return [json.loads(m.payload)["n"] for m in ob.claim(100_000)]


def _count_commits(ob: Outbox, fail: Callable[[int], bool] = lambda k: False) -> list[int]:
    """Record each commit's row count; ``fail(k)``: the k-th (0-based) raises an I/O error."""
    seen: list[int] = []
    real = ob.writer.commit

    def commit(part: Any) -> int:
        seen.append(len(part))
        if fail(len(seen) - 1):
            raise sqlite3.OperationalError("disk I/O error")
        return real(part)

    ob.writer.commit = commit  # type: ignore[method-assign]
    return seen


def test_a_held_batch_of_several_slices_comes_back_whole_and_in_order(tmp_path: Path) -> None:
    """reject_new on a full disk: a batch larger than one commit slice (128 KiB with the default
    reserve) is held whole, the refusal names how many, and once there is room it is stored in the
    order it was put (the rows were put back slice by slice, the later slices in front)."""
    path = tmp_path / "q.db"
    with Outbox(
        path, big_limits(policy="reject_new"), flush_interval_s=60, flush_batch=10**6, max_pages=128
    ) as ob:
        _fill(ob, per_flush=30)
        ob.ack([m.rowid for m in ob.claim(100_000)])  # the sync drains: room again
        ob.flush()  # the rows held meanwhile land; the refusals end
        for _ in range(30):  # a commit of 30 reserves the numbers of the next 60 puts
            ob.put(TOPIC, {"n": -1})
        ob.flush()
        ob.ack([m.rowid for m in ob.claim(100_000)])
        stored = ob.stats()["pending"]
        # now 30 results of 30 KB (900 KB, 8 slices of 4) on the file capped at 512 KiB
        base = 1000
        for i in range(30):
            ob.put(TOPIC, {"n": base + i, "pad": "q" * 30_000})
        with pytest.raises(
            QueueFullError, match=r": disk full \(SQLITE_FULL\); (\d+) messages held$"
        ) as info:
            ob.flush()
        n_held = int(re.findall(r"(\d+) messages held", str(info.value))[0])
        s = ob.stats()
        assert 8 < n_held < 30  # some went in before the file was full again; more than a slice held
        assert (s["unflushed"], s["pending"]) == (n_held, stored + 30)
        ob.ack([m.rowid for m in ob.claim(100_000)])
        assert ob.flush() == n_held
        ns = _ns(ob)
        assert ns == list(range(base + 30 - n_held, base + 30))


def test_drops_start_at_the_batch_size_and_double_per_try(tmp_path: Path) -> None:
    """drop_oldest on a full file of small rows, a batch of 20 rows of 2 KB: each try drops twice
    what the one before did, starting at the batch (not at 8 rows), so the room is won in a few
    fsyncs; the batch is stored whole."""
    path = tmp_path / "q.db"
    with Outbox(path, big_limits(), flush_interval_s=60, flush_batch=10**6, max_pages=64) as ob:
        _fill(ob, pad=60, per_flush=100)
        before = ob.counters["dropped"]
        seen = _count_commits(ob)
        for k in range(20):
            ob.put(TOPIC, {"n": 10_000 + k, "pad": "B" * 2000})
        assert ob.flush() == 20
        dropped = ob.counters["dropped"] - before
        drops = len(seen) - 2  # the first commit and the last (that worked) between the drops
        assert drops >= 2
        assert dropped == 20 * (2**drops - 1)
        assert _ns(ob)[-20:] == [10_000 + k for k in range(20)]


def test_a_drop_that_meets_the_full_disk_gives_the_batch_up_at_once_and_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Deleting the oldest rows needs room in the WAL too: when that delete meets SQLITE_FULL the
    new batch is dropped (counted, one error line), the stored rows stay, nothing is written; the
    count reaches the file with the next commit, even an empty one, before any crash."""
    path = tmp_path / "q.db"
    ob = Outbox(path, big_limits(), flush_interval_s=60, flush_batch=10**6, max_pages=64)
    _fill(ob)
    stored = ob.stats()["pending"]
    dropped = ob.counters["dropped"]
    real = ob.db.w
    ob.db.w = FullOnDelete(real, times=1)  # type: ignore[assignment]
    for k in range(5):  # 100 KB: more than the room the last drops left
        ob.put(TOPIC, {"n": 5000 + k, "pad": "z" * 20_000})
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="edge_agent.outbox"):
        assert ob.flush() == 0  # nothing written
    ob.db.w = real
    s = ob.stats()
    assert (s["pending"], s["unflushed"], s["dropped"]) == (stored, 0, dropped + 5)
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
        (
            logging.ERROR,
            f"outbox {path}: disk full and nothing left to drop: 5 new messages dropped "
            f"(dropped so far: {dropped + 5})",
        )
    ]
    assert ob.flush() == 0  # an empty commit: only the counters
    crash(ob)
    with Outbox(path, big_limits()) as again:
        s = again.stats()
        assert (s["pending"], s["dropped"]) == (stored, dropped + 5)


def test_an_io_error_while_retrying_on_a_full_disk_keeps_the_batch(tmp_path: Path) -> None:
    """The retry after the first SQLITE_FULL, or the delete that makes room, fails with another
    error: the flush fails as a QueueError and the batch is kept, in order, for the next flush."""
    path = tmp_path / "q.db"
    with Outbox(path, big_limits(), flush_interval_s=60, flush_batch=10**6, max_pages=64) as ob:
        nxt = _fill(ob)
        stored = ob.stats()["pending"]
        for bad in ("commit", "delete"):
            for k in range(5):  # 100 KB: more than the room the last drops left
                ob.put(TOPIC, {"n": nxt + k, "pad": "z" * 20_000})
            if bad == "commit":  # the normal commit meets SQLITE_FULL, the retry an I/O error
                seen = _count_commits(ob, fail=lambda k: k == 1)
            else:
                real = ob.db.w
                ob.db.w = FailingDeletes(real)  # type: ignore[assignment]
            with pytest.raises(QueueError, match="disk I/O error"):
                ob.flush()
            if bad == "commit":
                del ob.writer.commit
                assert seen[:2] == [5, 5]
            else:
                ob.db.w = real
            s = ob.stats()
            assert (s["pending"], s["unflushed"]) == (stored + 5, 5)
            assert ob.flush() == 5
            stored = ob.stats()["pending"]
            assert _ns(ob)[-5:] == [nxt + k for k in range(5)]
            ob.release()
            nxt += 5


def test_a_crash_after_a_drop_made_room_keeps_its_count_and_the_row_count(tmp_path: Path) -> None:
    """The drop that makes room is its own transaction, with its counter and the meta row count:
    a kill -9 before the batch lands (here: its commit fails, then the crash) forgets neither."""
    path = tmp_path / "q.db"
    ob = Outbox(path, big_limits(), flush_interval_s=60, flush_batch=10**6, max_pages=64)
    _fill(ob)
    before = ob.counters["dropped"]
    assert before > 0  # earlier drops: the counter written with the next drop must add to them
    for k in range(10):
        ob.put(TOPIC, {"n": 9000 + k, "pad": "z" * 1000})
    _count_commits(ob, fail=lambda k: k == 2)  # full, drop, then the retry dies
    with pytest.raises(QueueError):
        ob.flush()
    dropped = ob.counters["dropped"]
    assert dropped > before
    pending = ob.stats()["pending"] - ob.stats()["unflushed"]
    assert meta_rows(path) == pending == read_stats(path)["pending"]
    crash(ob)
    with Outbox(path, big_limits()) as again:
        s = again.stats()
        assert (s["dropped"], s["pending"]) == (dropped, pending)


def test_flush_returns_what_it_stored_across_the_slices_of_a_full_disk(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    with Outbox(path, big_limits(), flush_interval_s=60, flush_batch=10**6, max_pages=256) as ob:
        _fill(ob, pad=60, per_flush=100)
        seen = _count_commits(ob)
        for k in range(30):
            ob.put(TOPIC, {"n": 10_000 + k, "pad": "B" * 8000})  # 240 KB: two 128 KiB slices
        assert ob.flush() == 30
        assert len([n for n in seen if n]) >= 3 and seen[0] == 30 and max(seen[1:]) < 30
        assert _ns(ob)[-30:] == [10_000 + k for k in range(30)]


def test_the_full_drop_line_counts_each_streak_from_zero_once_a_minute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A real full tmpfs: the drops of a streak are one line a minute (not one per commit) with the
    streak's count; when the disk has room again the streak ends, and the next one counts anew."""
    from support.tmpfs import fill, tmpfs

    clock = [1000.0]
    monkeypatch.setattr(outbox_state, "time", types.SimpleNamespace(monotonic=lambda: clock[0]))
    pat = re.compile(r"\((\d+) in this full-disk streak, dropped so far: (\d+)\)")

    def lines() -> list[tuple[int, int]]:
        got = [pat.search(r.getMessage()) for r in caplog.records if "to make room" in r.getMessage()]
        caplog.clear()
        return [(int(m.group(1)), int(m.group(2))) for m in got if m]

    def put_flush(start: int, n: int) -> None:
        for i in range(n):
            ob.put(TOPIC, {"n": start + i, "pad": "p" * 1000})
            if i % 50 == 49:
                ob.flush()
        ob.flush()

    with tmpfs(tmp_path / "fs") as disk:
        path = disk / "q.db"
        caplog.set_level(logging.WARNING, "edge_agent.outbox")
        with Outbox(path, big_limits(), flush_interval_s=60, flush_batch=10**6) as ob:
            put_flush(0, 2000)  # 2 MB stored: room to win back by dropping
            fill(disk)
            put_flush(2000, 600)
            first = lines()
            assert len(first) == 1 and first[0][0] == first[0][1] > 0
            clock[0] += 59.0
            put_flush(2600, 300)
            assert lines() == []  # within the minute: no new line
            clock[0] += 1.0
            put_flush(2900, 300)
            (streak, so_far), *more = lines()
            assert more == [] and streak == so_far > first[0][1]
            (disk / "filler").unlink()
            ob.space.maintain()  # room again: the streak ends
            assert not ob.stats()["disk_full"]
            put_flush(3200, 2000)
            start = ob.counters["dropped"]
            fill(disk)
            clock[0] += 60.0
            put_flush(5200, 600)
            (streak2, so_far2), *more = lines()
            assert more == [] and 0 < streak2 == so_far2 - start


def test_vacuum_on_a_full_disk_stops_quietly_and_an_io_error_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    with Outbox(path, big_limits(), flush_interval_s=60, flush_batch=10**6) as ob:
        for i in range(600):
            ob.put(TOPIC, {"n": i, "pad": "p" * 1000})
        ob.flush()
        ob.ack([m.rowid for m in ob.claim(600)])
        ob.db.checkpoint()
        free = _freelist(path)
        assert free > 100
        real = ob.db.w
        for error, raises in (("database or disk is full", False), ("disk I/O error", True)):
            ob.db.w = _FailingVacuum(real, error)  # type: ignore[assignment]
            try:
                if raises:
                    with pytest.raises(
                        QueueError, match=f"^{re.escape(str(path))}: cannot vacuum the queue: {error}$"
                    ):
                        ob.vacuum()
                else:
                    assert ob.vacuum() == 0  # nothing given back, no error: the next maintenance tries again
            finally:
                ob.db.w = real
        assert _freelist(path) == free
        assert ob.vacuum() == free


class _FailingVacuum:
    def __init__(self, conn: sqlite3.Connection, error: str) -> None:
        self._conn = conn
        self._error = error

    def executescript(self, sql: str) -> Any:
        if "incremental_vacuum" in sql:
            raise sqlite3.OperationalError(self._error)
        return self._conn.executescript(sql)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


@pytest.mark.parametrize(("free_pages", "vacuumed"), [(256, False), (257, True)])
def test_maintenance_vacuums_only_above_256_free_pages(
    tmp_path: Path, free_pages: int, vacuumed: bool
) -> None:
    path = tmp_path / "q.db"
    with Outbox(path, big_limits(), flush_interval_s=60, flush_batch=10**6) as ob:
        for i in range(1200):
            ob.put(TOPIC, {"n": i, "pad": "p" * 1000})
        ob.flush()
        ob.ack([m.rowid for m in ob.claim(1200)])
        ob.db.checkpoint()
        extra = _freelist(path) - free_pages
        assert extra > 0
        ob.db.w.executescript(f"PRAGMA incremental_vacuum({extra});")
        ob.db.checkpoint()
        assert _freelist(path) == free_pages
        ob.space.maintain()
        ob.db.checkpoint()
        assert _freelist(path) == (0 if vacuumed else free_pages)


def test_the_max_pages_cap_holds_when_the_disk_has_room(tmp_path: Path) -> None:
    """``max_pages`` (what the imitated full disk of these tests rests on) is not lifted by the
    maintenance that lifts the full-disk cap: the file stays within it."""
    path = tmp_path / "q.db"
    with Outbox(path, big_limits(), flush_interval_s=60, flush_batch=10**6, max_pages=64) as ob:
        _fill(ob)
        ob.space.maintain()  # the real disk has room: the full-disk state ends
        assert not ob.stats()["disk_full"]
        for i in range(300):
            ob.put(TOPIC, {"n": 10_000 + i, "pad": "p" * 1000})
        ob.flush()
        assert ob.db.w.execute("PRAGMA page_count").fetchone()[0] <= 64


def test_a_drop_that_finds_nothing_does_not_claim_it_made_room(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """One result larger than the whole capped file, nothing stored: the log says the file is full
    and the result dropped, not "dropped the oldest messages to make room (0 ...)"."""
    path = tmp_path / "q.db"
    caplog.set_level(logging.WARNING, "edge_agent.outbox")
    with Outbox(path, big_limits(), flush_interval_s=60, flush_batch=10**6, max_pages=64) as ob:
        ob.put(TOPIC, {"n": 0, "pad": "p" * 400_000})
        assert ob.flush() == 0
        assert ob.counters["dropped"] == 1
    lines = [r.getMessage() for r in caplog.records]
    assert [line.split(": ", 1)[1].split(" (")[0] for line in lines] == [
        "filesystem full",
        "disk full and nothing left to drop: 1 new messages dropped",
    ]


def test_expiry_spares_rows_in_flight_or_acked_and_its_counts_add_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Rows older than ``max_age`` go (counted as dropped and expired, one line naming the age),
    except those the sync holds: in flight, or acknowledged but not deleted yet (a full disk); a
    second expiry adds to the counts, which survive a crash; nothing old: nothing done, 0."""
    from edge_agent.adapters.outbox import outbox as outbox_mod

    path = tmp_path / "q.db"
    ob = Outbox(path, big_limits(max_age_s=4320.0), flush_interval_s=60, flush_batch=10**6)
    real_time = time.time

    def put_old(ns: range) -> None:
        with monkeypatch.context() as m:  # stamped 5000 s ago: past the 4320 s (0.05 days) limit
            m.setattr(
                outbox_mod,
                "time",
                types.SimpleNamespace(time=lambda: real_time() - 5000, monotonic=time.monotonic),
            )
            for i in ns:
                ob.put(TOPIC, {"n": i, "pad": "e" * 100})
            ob.flush()

    try:
        assert ob.expire() == 0  # nothing stored: nothing to do
        put_old(range(20))
        ob.put(TOPIC, {"n": 100})
        ob.flush()
        in_flight = ob.claim(3)  # n 0..2
        acked = ob.claim(2)  # n 3..4: acked, but the delete meets a full disk three times
        real_r = ob.db.r
        ob.db.r = FullOnDelete(real_r, times=3)  # type: ignore[assignment]
        assert ob.ack([m.rowid for m in acked]) == 0
        ob.db.r = real_r
        caplog.set_level(logging.WARNING, "edge_agent.outbox")
        caplog.clear()
        assert ob.expire() == 15
        assert [r.getMessage() for r in caplog.records] == [
            f"outbox {path}: dropped 15 messages older than 0.1 days"
        ]
        s = ob.stats()
        assert (s["expired"], s["dropped"], s["pending"], s["inflight"]) == (15, 15, 4, 3)
        assert s["bytes"] == read_stats(path)["bytes"]
        assert ob.expire() == 0  # nothing old left but what the sync holds
        ob.release([m.rowid for m in in_flight])
        put_old(range(200, 205))
        assert ob.expire() == 8  # the 3 released and the 5 new
        s = ob.stats()
        assert (s["expired"], s["dropped"]) == (23, 23)
        assert s["bytes"] == read_stats(path)["bytes"]
    finally:
        crash(ob)
    with Outbox(path, big_limits()) as again:
        s = again.stats()
        assert (s["expired"], s["dropped"]) == (23, 23)
        assert sorted(json.loads(m.payload)["n"] for m in again.claim(100)) == [3, 4, 100]


def test_a_commit_slice_holds_at_most_its_limit_and_is_filled_to_it() -> None:
    from edge_agent.adapters.outbox.space import slice_batch

    batch = [(str(i), "t", b"x" * (64 * 1024), 0.0, i) for i in range(8)]
    assert [len(p) for p in slice_batch(batch, 256 * 1024)] == [4, 4]  # exactly at the limit: one slice
    assert [len(p) for p in slice_batch(batch, 256 * 1024 - 1)] == [3, 3, 2]
    assert slice_batch([], 100) == [[]]


def test_the_sync_wal_is_kept_small_while_the_disk_is_full(tmp_path: Path) -> None:
    """The sync connection checkpoints its WAL at 1024 pages normally (issue 21) but at 64 (what
    the reserve covers) while the file is capped, from the start with ``max_pages``, and back at
    1024 once the disk has room again."""
    from support.tmpfs import fill, tmpfs

    def autocheckpoint(ob: Outbox) -> int:
        return int(ob.db.r.execute("PRAGMA wal_autocheckpoint").fetchone()[0])

    with Outbox(tmp_path / "m.db", big_limits(), max_pages=64) as ob:
        assert autocheckpoint(ob) == 64
    with (
        tmpfs(tmp_path / "fs") as disk,
        Outbox(disk / "q.db", big_limits(), flush_interval_s=60, flush_batch=10**6) as ob,
    ):
        assert autocheckpoint(ob) == 1024
        for i in range(1000):
            ob.put(TOPIC, {"n": i, "pad": "p" * 1000})
        ob.flush()
        fill(disk)
        for i in range(400):
            ob.put(TOPIC, {"n": i, "pad": "p" * 1000})
        ob.flush()
        assert ob.stats()["disk_full"] and autocheckpoint(ob) == 64
        (disk / "filler").unlink()
        ob.space.maintain()
        assert not ob.stats()["disk_full"] and autocheckpoint(ob) == 1024
