"""The outbox's disk space (adapters/outbox/space.py) in process: a full disk imitated with
``max_pages`` (SQLite answers SQLITE_FULL exactly as on a full disk; the real full tmpfs is in
tests/adapters/outbox/test_full_disk.py). What survives a crash right after a full-disk drop or a purge,
the figures after them, vacuum's count (issue 19, mutation survivors)."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest
from support.outbox import TOPIC, big_limits, crash
from support.outbox import FullOnDelete as _FullOnDelete
from support.outbox import freelist as _freelist

from edge_agent.adapters.outbox.outbox import Outbox
from edge_agent.adapters.outbox.views import read_stats


def _pad(i: int) -> dict[str, object]:
    return {"n": i, "pad": "p" * 1000}


def test_full_disk_drops_are_counted_with_them_and_the_figures_match_the_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "q.db"
    ob = Outbox(path, big_limits(), flush_interval_s=60, flush_batch=10**6, max_pages=64)
    with caplog.at_level(logging.WARNING, logger="edge_agent.outbox"):
        for i in range(300):
            ob.put(TOPIC, _pad(i))
            if i % 50 == 49:
                ob.flush()
        ob.flush()
    s = ob.stats()
    assert s["dropped"] > 100 and s["pending"] + s["dropped"] == 300
    on_disk = read_stats(path)
    assert (s["pending"], s["bytes"]) == (on_disk["pending"], on_disk["bytes"])
    assert on_disk["dropped"] == s["dropped"]  # the counter went in with the drops
    made_room = [r.getMessage() for r in caplog.records if "to make room" in r.getMessage()]
    assert len(made_room) == 1  # once a minute while the streak lasts
    streak, so_far = map(
        int, re.findall(r"\((\d+) in this full-disk streak, dropped so far: (\d+)\)", made_room[0])[0]
    )
    assert streak == so_far > 0
    crash(ob)  # right after the drops: no close writes the counters for them
    with Outbox(path, big_limits()) as again:
        assert (again.stats()["dropped"], again.stats()["pending"]) == (s["dropped"], s["pending"])


def test_a_full_disk_with_nothing_to_drop_gives_up_after_one_empty_drop(tmp_path: Path) -> None:
    """One result larger than the whole capped file: the first drop finds nothing to delete, so the
    result is dropped (counted) at once, not after 16 fsync'd tries."""
    path = tmp_path / "q.db"
    ob = Outbox(path, big_limits(), flush_interval_s=60, flush_batch=10**6, max_pages=64)
    tries: list[int] = []
    real = ob.writer.commit
    ob.writer.commit = lambda part: tries.append(len(part)) or real(part)  # type: ignore[method-assign,func-returns-value]
    ob.put(TOPIC, {"n": 0, "pad": "p" * 400_000})
    ob.flush()
    assert len([t for t in tries if t]) == 3  # the commit, its retry after the empty drop, no more
    ob.put(TOPIC, {"n": 1, "pad": "p" * 400_000})
    ob.flush()
    s = ob.stats()
    assert (s["dropped"], s["pending"], s["unflushed"], s["bytes"]) == (2, 0, 0, 0)
    ob.close()
    with Outbox(path, big_limits()) as again:
        assert again.stats()["dropped"] == 2


def test_a_result_given_up_on_a_full_file_is_counted_through_a_crash_right_after(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A result larger than the whole capped file, given up after an earlier one: the drop is
    counted at once in the marks file (the queue file takes no write), so a crash before any
    further commit keeps ``dropped`` at 2 -- a counter never goes back -- and the restart's crash
    gap starts above the dropped number instead of counting it a second time as skipped."""
    path = tmp_path / "q.db"
    ob = Outbox(path, big_limits(), flush_interval_s=60, flush_batch=10**6, max_pages=64)
    for n in range(2):
        ob.put(TOPIC, {"n": n, "pad": "p" * 400_000})
        assert ob.flush() == 0
    s = ob.stats()
    assert (s["dropped"], s["seq"], s["pending"]) == (2, 2, 0)
    crash(ob)  # no commit after the second drop: only the marks file can have it
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="edge_agent.outbox"), Outbox(path, big_limits()) as again:
        after = again.stats()
        assert (after["dropped"], after["crashes"], after["pending"]) == (2, 1, 0)
        lines = [r.getMessage() for r in caplog.records]
        # seq 1 and 2 were dropped (counted); only the reservation above them is the crash gap
        assert len(lines) == 1 and lines[0].startswith(
            f"outbox {path}: the previous run ended without a clean close: seq 3..{after['seq']} skipped"
        )
        assert after["seq_skipped"] == after["seq"] - 2


def test_purge_counts_what_it_deletes_on_top_of_earlier_drops(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    ob = Outbox(path, big_limits(max_messages=10), flush_interval_s=60, flush_batch=10**6)
    for i in range(14):
        ob.put(TOPIC, {"n": i})
    ob.flush()
    assert ob.counters["dropped"] == 4
    ob.claim(3)  # in flight: purged too (the sync's ack then finds nothing)
    assert ob.purge() == 10
    s = ob.stats()
    assert (s["pending"], s["bytes"], s["inflight"], s["dropped"]) == (0, 0, 0, 14)
    assert read_stats(path)["dropped"] == 14
    crash(ob)
    with Outbox(path, big_limits()) as again:
        assert (again.stats()["dropped"], again.stats()["pending"]) == (14, 0)


def test_vacuum_returns_the_pages_it_gave_back(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    with Outbox(path, big_limits(), flush_interval_s=60, flush_batch=10**6) as ob:
        assert ob.vacuum() == 0  # nothing free: nothing given back
        for i in range(600):
            ob.put(TOPIC, _pad(i))
        ob.flush()
        assert ob.vacuum() == 0
        while batch := ob.claim(200):
            ob.ack([m.rowid for m in batch])
        ob.db.checkpoint()
        free = _freelist(path)
        assert free > 100
        assert ob.vacuum() == free
        ob.db.checkpoint()
        assert _freelist(path) == 0


def test_maintenance_vacuums_a_file_with_many_free_pages_and_re_creates_a_lost_reserve(
    tmp_path: Path,
) -> None:
    path = tmp_path / "q.db"
    reserve = Path(f"{path}.reserve")
    with Outbox(path, big_limits(), flush_interval_s=60, flush_batch=10**6) as ob:
        for i in range(1200):
            ob.put(TOPIC, _pad(i))
        ob.flush()
        ob.ack([m.rowid for m in ob.claim(1200)])
        ob.db.checkpoint()
        assert _freelist(path) > 256
        reserve.unlink()  # someone tidied up the folder
        ob.space.maintain()
        ob.db.checkpoint()
        assert _freelist(path) == 0
        assert reserve.stat().st_size == 1 << 20


def test_a_few_free_pages_are_left_for_reuse(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    with Outbox(path, big_limits(), flush_interval_s=60, flush_batch=10**6) as ob:
        for i in range(100):
            ob.put(TOPIC, _pad(i))
        ob.flush()
        ob.ack([m.rowid for m in ob.claim(100)])
        ob.db.checkpoint()
        free = _freelist(path)
        assert 0 < free <= 256
        ob.space.maintain()
        ob.db.checkpoint()
        assert _freelist(path) == free


def test_when_the_disk_has_room_again_the_cap_is_lifted_and_the_reserve_re_created(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from support.tmpfs import fill, tmpfs

    with tmpfs(tmp_path / "fs") as disk:
        path = disk / "q.db"
        reserve = Path(f"{path}.reserve")
        with Outbox(path, big_limits(), flush_interval_s=60, flush_batch=50) as ob:
            fill(disk)
            for i in range(400):
                ob.put(TOPIC, _pad(i))
            ob.flush()
            assert ob.stats()["disk_full"] and reserve.stat().st_size < 1 << 20
            ob.space.maintain()  # still full: stays capped
            assert ob.stats()["disk_full"]
            (disk / "filler").unlink()
            with caplog.at_level(logging.INFO, logger="edge_agent.outbox"):
                ob.space.maintain()
            assert not ob.stats()["disk_full"] and reserve.stat().st_size == 1 << 20
            assert f"outbox {path}: space available again: reserve re-created, cap lifted" in [
                r.getMessage() for r in caplog.records
            ]
            dropped = ob.counters["dropped"]
            for i in range(2000):  # the file grows again: nothing more dropped
                ob.put(TOPIC, _pad(1000 + i))
            ob.flush()
            assert ob.counters["dropped"] == dropped and ob.stats()["pending"] >= 2000


@pytest.mark.parametrize("reserve_bytes", [0, 1 << 20])
def test_the_full_disk_lines_say_what_was_released(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, reserve_bytes: int
) -> None:
    path = tmp_path / "q.db"
    reserve = Path(f"{path}.reserve")
    ob = Outbox(
        path, big_limits(), flush_interval_s=60, flush_batch=10**6, max_pages=64, reserve_bytes=reserve_bytes
    )
    try:
        with caplog.at_level(logging.WARNING, logger="edge_agent.outbox"):
            for i in range(300):
                ob.put(TOPIC, _pad(i))
            ob.flush()
        pages = ob.db.w.execute("PRAGMA page_count").fetchone()[0]
        what = "released the disk reserve" if reserve_bytes else "no reserve left to release"
        assert caplog.records[0].getMessage() == (
            f"outbox {path}: filesystem full (SQLITE_FULL on commit): {what}; the file stays at {pages} "
            "pages; policy drop_oldest applies"
        )
        assert sum("filesystem full" in r.getMessage() for r in caplog.records) == 1  # once per streak
        if reserve_bytes:
            assert reserve.stat().st_size == reserve_bytes // 4  # the quarter kept for the next start
        caplog.clear()
        got = ob.claim(2)
        real = ob.db.r
        ob.db.r = _FullOnDelete(real, times=2)  # type: ignore[assignment]
        with caplog.at_level(logging.WARNING, logger="edge_agent.outbox"):
            assert ob.ack([m.rowid for m in got]) == 2
        ob.db.r = real
        lines = [r.getMessage() for r in caplog.records]
        if reserve_bytes:  # the ack's second retry gives back the quarter too
            assert lines == [
                f"outbox {path}: still full (SQLITE_FULL on ack): released the rest of the reserve"
            ]
            assert not reserve.exists()
        else:
            assert lines == []
    finally:
        ob.close()
