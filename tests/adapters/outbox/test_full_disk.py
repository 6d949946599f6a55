"""The outbox on a REAL full filesystem (a 16 MB tmpfs mounted by the test; root only)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.outbox import TOPIC, big_limits
from support.tmpfs import fill, free, tmpfs

from edge_agent.adapters.outbox.outbox import Outbox
from edge_agent.adapters.outbox.views import iter_messages, read_stats
from edge_agent.errors import QueueFullError

REPO = Path(__file__).resolve().parents[3]
N = 24_000  # 1 KiB results: ~24 MB, half again what the 16 MB filesystem holds


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    with tmpfs(tmp_path / "fs") as where:
        yield where


def _pad(i: int) -> dict[str, object]:
    return {"n": i, "pad": "p" * 1000}


def _fill_queue(path: Path, policy: str = "drop_oldest", n: int = N) -> tuple[dict[str, object], int]:
    rejected = 0
    with Outbox(path, big_limits(policy=policy), flush_interval_s=0.2, flush_batch=100) as ob:
        for i in range(n):
            try:
                ob.put(TOPIC, _pad(i))
            except QueueFullError:
                rejected += 1
        with contextlib.suppress(QueueFullError):  # reject_new: the batch that met the full disk is held
            ob.flush()
        stats = ob.stats()
    return stats, rejected


def test_drop_oldest_really_drops_the_oldest_and_the_counts_survive_a_restart(
    disk: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "edge_agent.outbox")
    path = disk / "q.db"
    stats, _ = _fill_queue(path)
    assert free(disk) < 2 << 20  # the disk really was full
    assert stats["dropped"] > N // 4
    assert stats["pending"] + stats["dropped"] == N  # every result stored or counted
    ns = [m["payload"]["n"] for m in iter_messages(path)]
    assert ns == list(range(N - len(ns), N))  # the newest survive, contiguous, in order
    assert [m["payload"]["seq"] for m in iter_messages(path)] == [n + 1 for n in ns]
    after = read_stats(path)  # durable, read from the file by another connection
    assert (after["pending"], after["dropped"]) == (stats["pending"], stats["dropped"])
    full_logs = [r for r in caplog.records if "disk full" in r.message or "filesystem full" in r.message]
    assert 1 <= len(full_logs) <= 4  # once per streak, not once per batch
    assert not any("nothing left to drop" in r.message for r in caplog.records)


def test_a_queue_on_a_disk_full_to_the_brim_opens_drains_and_takes_new_results(disk: Path) -> None:
    path = disk / "q.db"
    stats, _ = _fill_queue(path)
    fill(disk)  # someone else takes the last byte
    assert free(disk) == 0
    with Outbox(path, big_limits()) as ob:  # opening must not need a free byte it cannot get
        pending = ob.stats()["pending"]
        assert pending == stats["pending"]
        drained = 0
        while batch := ob.claim(100):  # what the sync thread does: claims and acks must work
            drained += ob.ack([m.rowid for m in batch])
            if drained >= 2000:
                break
        assert drained == 2000
        for i in range(500):  # room made by the drain is used again
            ob.put(TOPIC, _pad(N + i))
        ob.flush()
        now = ob.stats()
        assert now["pending"] + now["dropped"] - stats["dropped"] == pending - drained + 500
    assert read_stats(path)["pending"] == now["pending"]


def test_reject_new_on_a_full_disk_refuses_logs_once_and_closes_cleanly(
    disk: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "edge_agent.outbox")
    path = disk / "q.db"
    stats, rejected = _fill_queue(path, policy="reject_new", n=18_000)  # close() must not raise
    assert rejected > 1000
    assert stats["rejected"] == rejected and stats["dropped"] == 0
    held = stats["unflushed"]  # met the full disk in a batch: refused at close, counted as rejected
    assert read_stats(path)["rejected"] == rejected + held  # durable
    rejected += held
    rejecting = [r for r in caplog.records if "rejecting new messages" in r.message]
    assert len(rejecting) == 1
    assert f"outbox {path}: disk still full at close: {held} held messages rejected" in [
        r.getMessage() for r in caplog.records
    ]
    stored = [m["payload"]["n"] for m in iter_messages(path)]
    assert stored == list(range(len(stored)))  # the oldest are kept under reject_new
    assert len(stored) + rejected == 18_000


def test_a_batch_given_up_on_a_full_disk_is_counted_through_a_kill_9(disk: Path) -> None:
    """A real full tmpfs, a real SIGKILL: 10 rows stored, the disk filled by someone else, then a
    2 MB result no room can be made for (the 10 oldest dropped for it, then it is given up). The
    process is killed before any further commit: the restart still counts all 11 as dropped (the
    give-up went to the marks file, which needs no free byte), not 10 plus a "crash gap"."""
    path = disk / "q.db"
    code = f"""
        import json, sys
        from support.tmpfs import fill
        from edge_agent.adapters.outbox.outbox import Outbox
        from edge_agent.core.queue.policy import Limits
        ob = Outbox({str(path)!r}, Limits(10**6, 10**9, 1e9), flush_interval_s=60, flush_batch=10**6)
        for i in range(10):
            ob.put("t", {{"n": i}})
        ob.flush()
        fill(ob.path.parent)
        ob.put("t", {{"n": 10, "pad": "b" * 2_000_000}})
        ob.flush()
        print(json.dumps(ob.stats()), flush=True)
        sys.stdin.read()  # killed here
    """
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "tests")])}
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
    )
    try:
        assert proc.stdout is not None
        before = json.loads(proc.stdout.readline())
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    assert proc.returncode == -signal.SIGKILL
    assert (before["dropped"], before["pending"], before["unflushed"], before["seq"]) == (11, 0, 0, 11)
    assert free(disk) < 1 << 20  # still full
    with Outbox(path, big_limits()) as ob:
        s = ob.stats()
        assert (s["dropped"], s["pending"], s["crashes"]) == (11, 0, 1)
        # the crash gap is only the reservation above the last number handed out, never seq 11
        assert s["seq_skipped"] == s["seq"] - 11


def test_opening_and_closing_an_existing_queue_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    with Outbox(path, big_limits()) as ob:
        for i in range(50):
            ob.put(TOPIC, {"n": i})
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    mtime = path.stat().st_mtime_ns
    with Outbox(path, big_limits()) as ob:
        assert ob.stats()["pending"] == 50
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before
    assert path.stat().st_mtime_ns == mtime
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert oct(path.with_name("q.db.lock").stat().st_mode & 0o777) == "0o600"


def test_writer_is_wal_with_full_sync(tmp_path: Path) -> None:
    """What durability rests on: a kill -9 cannot tell synchronous=OFF from FULL, a power cut can."""
    import sqlite3

    with Outbox(tmp_path / "q.db", big_limits()) as ob:
        assert ob.db.w.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
        ob.put(TOPIC, {"n": 1})
        ob.flush()
        other = sqlite3.connect(str(tmp_path / "q.db"))
        try:
            assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        finally:
            other.close()
