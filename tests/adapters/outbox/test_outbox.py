"""The outbox's own module (adapters/outbox/outbox.py) in process: every ``[queue]`` key reaches it, the
figures ``queue stats`` and the status show, a closed queue (issue 19, mutation survivors)."""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from pathlib import Path
from typing import Callable

import pytest
from support.outbox import TOPIC, FullOnDelete, big_limits, crash, meta_rows

from edge_agent.adapters.outbox.outbox import Outbox
from edge_agent.core.config.schema import QueueConfig
from edge_agent.errors import QueueError, QueueFullError


def test_every_queue_key_reaches_the_outbox(tmp_path: Path) -> None:
    cfg = QueueConfig(
        path=str(tmp_path / "sub" / "q.db"),
        max_messages=7,
        max_bytes=123_456,
        max_age_days=2.5,
        policy="reject_new",
        flush_interval_s=0.0,
        flush_batch=9,
        reserve_bytes=2 << 20,
    )
    with Outbox.from_config(cfg) as ob:
        assert ob.path == tmp_path / "sub" / "q.db"
        assert (ob.limits.max_messages, ob.limits.max_bytes, ob.limits.policy) == (7, 123_456, "reject_new")
        assert ob.limits.max_age_s == 2.5 * 86400
        assert (ob.flush_interval_s, ob.flush_batch) == (0.0, 9)
        assert (tmp_path / "sub" / "q.db.reserve").stat().st_size == 2 << 20
        ob.put(TOPIC, {"n": 1})
        assert ob.stats()["unflushed"] == 0  # interval 0: committed inside put


def test_the_figures_count_unflushed_and_in_flight_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Outbox(tmp_path / "q.db", big_limits(), flush_interval_s=60, flush_batch=10**6) as ob:
        empty = ob.stats()
        assert (empty["pending"], empty["bytes"], empty["oldest"], empty["seq"]) == (0, 0, None, 0)
        ob.put(TOPIC, {"n": 0})  # the first number: reserved and committed at once
        ob.ack([m.rowid for m in ob.claim(1)])
        monkeypatch.setattr(time, "time", lambda: 1_700_000_000.0)
        ob.put(TOPIC, {"n": 1})
        monkeypatch.undo()
        s = ob.stats()
        # nothing stored: the oldest is the unflushed one
        assert (s["pending"], s["unflushed"], s["inflight"]) == (1, 1, 0)
        assert s["oldest"] == "2023-11-14T22:13:20Z"
        assert s["bytes"] > 0 and s["seq"] == 2 and s["boot"] == 1 and s["disk_full"] is False
        one = s["bytes"]
        ob.flush()
        ob.put(TOPIC, {"n": 2})
        s = ob.stats()
        assert (s["pending"], s["unflushed"], s["bytes"]) == (2, 1, 2 * one)
        assert s["oldest"] == "2023-11-14T22:13:20Z"  # the stored one now
        got = ob.claim(5)
        s = ob.stats()
        assert (s["pending"], s["inflight"], s["unflushed"]) == (2, 1, 1)
        ob.ack([m.rowid for m in got])
        s = ob.stats()
        assert (s["pending"], s["inflight"], s["bytes"]) == (1, 0, one)
        assert s["path"] == str(tmp_path / "q.db")


def test_a_closed_queue_answers_queue_errors(tmp_path: Path) -> None:
    ob = Outbox(tmp_path / "q.db", big_limits(), flush_interval_s=60)
    ob.put(TOPIC, {"n": 1})
    ob.close()
    ob.close()  # idempotent
    for call in (lambda: ob.put(TOPIC, {"n": 2}), ob.stats, lambda: ob.claim(1), lambda: ob.ack([1])):
        with pytest.raises(QueueError, match=f"^{tmp_path / 'q.db'}: queue is closed$"):
            call()
    with Outbox(tmp_path / "q.db", big_limits()) as again:  # the batch was flushed at close
        assert again.stats()["pending"] == 1


class _Broken:
    """A connection whose every statement fails as a damaged file does."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def execute(self, *args: object) -> object:
        raise sqlite3.DatabaseError("database disk image is malformed")

    executemany = execute
    executescript = execute

    def __getattr__(self, name: str) -> object:
        return getattr(self._conn, name)


def test_each_failing_call_names_the_file_and_what_it_was_doing(tmp_path: Path) -> None:
    """The one line an operator reads says which step failed, not only that SQLite did."""
    path = tmp_path / "q.db"
    why = "database disk image is malformed"
    with Outbox(path, big_limits(), flush_interval_s=60, flush_batch=10**6) as ob:
        ob.put(TOPIC, {"n": 1})
        ob.flush()
        real_r, real_w = ob.db.r, ob.db.w
        ob.db.r = _Broken(real_r)  # type: ignore[assignment]
        reads: list[tuple[str, Callable[[], object]]] = [
            ("read the queue", lambda: ob.claim(5)),
            ("delete acknowledged messages", lambda: ob.ack([1])),
            ("acknowledge and claim messages", lambda: ob.ack_and_claim([1], 5)),
            ("read the queue", ob.stats),
        ]
        for doing, call in reads:
            with pytest.raises(QueueError) as err:
                call()
            assert str(err.value) == f"{path}: cannot {doing}: {why}"
        ob.db.r = real_r
        ob.put(TOPIC, {"n": 2})
        ob.db.w = _Broken(real_w)  # type: ignore[assignment]
        writes: list[tuple[str, Callable[[], object]]] = [
            ("purge the queue", ob.purge),
            ("expire old messages", ob.expire),
            ("vacuum the queue", ob.vacuum),
            ("write the queue", ob.flush),
        ]
        for doing, call in writes:
            with pytest.raises(QueueError) as err:
                call()
            assert str(err.value) == f"{path}: cannot {doing}: {why}"
        ob.db.w = real_w


def test_the_figures_read_during_a_commit_count_its_rows_once(tmp_path: Path) -> None:
    """A status read while the flusher's commit runs (rows out of the batch, not yet in the file)
    shows them once, and acked rows whose delete waits for room are no longer pending."""
    path = tmp_path / "q.db"
    with Outbox(path, big_limits(), flush_interval_s=60, flush_batch=10**6) as ob:
        ob.put(TOPIC, {"n": 0})
        for i in range(1, 4):
            ob.put(TOPIC, {"n": i})
        seen: list[dict[str, object]] = []
        real = ob.db.w

        class Spy:
            def executemany(self, sql: str, rows: object) -> object:
                if sql.startswith("INSERT INTO messages"):
                    seen.append(ob.stats())
                return real.executemany(sql, rows)

            def __getattr__(self, name: str) -> object:
                return getattr(real, name)

        ob.db.w = Spy()  # type: ignore[assignment]
        assert ob.flush() == 3
        ob.db.w = real
        assert [(s["pending"], s["unflushed"]) for s in seen] == [(4, 3)]
        assert seen[0]["bytes"] == ob.stats()["bytes"]
        ob.db.r = FullOnDelete(ob.db.r, 3)  # type: ignore[assignment]
        ob.ack([m.rowid for m in ob.claim(2)])  # the deletes wait for the next ack
        assert (ob.stats()["pending"], meta_rows(path)) == (2, 4)


def test_a_rejection_is_stored_with_the_next_flush_and_logged_once_per_streak(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The refusals are counted on disk by the next periodic flush even with nothing new to store,
    so a crash right after it keeps them; the warning comes once per streak of refusals."""
    path = tmp_path / "q.db"
    ob = Outbox(path, big_limits(max_messages=2, policy="reject_new"), flush_interval_s=60)
    with caplog.at_level(logging.WARNING, logger="edge_agent.outbox"):
        ob.put(TOPIC, {"n": 0})
        ob.put(TOPIC, {"n": 1})
        ob.flush()
        for _ in range(3):
            with pytest.raises(QueueFullError):
                ob.put(TOPIC, {"n": 2})
        ob.ack([m.rowid for m in ob.claim(1)])
        ob.put(TOPIC, {"n": 3})  # accepted: the streak ends
        with pytest.raises(QueueFullError):
            ob.put(TOPIC, {"n": 4})
    line = f"outbox {path}: rejecting new messages: queue holds 2 messages (queue.max_messages=2) (policy reject_new)"
    assert [r.getMessage() for r in caplog.records] == [line, line]
    ob.flush()
    crash(ob)
    with Outbox(path, big_limits()) as again:
        assert again.stats()["rejected"] == 4


def test_the_sync_side_calls_pass_their_arguments_through(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    with Outbox(path, big_limits(), flush_interval_s=60) as ob:
        for i in range(5):
            ob.put(TOPIC, {"n": i})
        ob.flush()
        newest = ob.claim(2, newest_first=True)
        assert [json.loads(m.payload)["n"] for m in newest] == [4, 3]
        assert ob.release([newest[0].rowid]) == 1
        assert ob.stats()["inflight"] == 1
        n, got = ob.ack_and_claim([newest[1].rowid], 2)
        assert n == 1 and [json.loads(m.payload)["n"] for m in got] == [0, 1]
        n, got = ob.ack_and_claim([m.rowid for m in got], 1, newest_first=True)
        assert n == 2 and [json.loads(m.payload)["n"] for m in got] == [4]
        assert ob.release() == 1 and ob.stats()["pending"] == 2


def test_the_byte_cap_counts_the_results_not_yet_stored(tmp_path: Path) -> None:
    """reject_new at max_bytes: results still in the batch take their room too, so the cap holds
    between commits and the figures add them up."""
    path = tmp_path / "q.db"
    with Outbox(path, big_limits(max_bytes=10**6), flush_interval_s=60) as probe:
        probe.put(TOPIC, {"pad": "x" * 200})
        one = probe.stats()["bytes"]
    for f in tmp_path.glob("q.db*"):
        f.unlink()
    limits = big_limits(max_bytes=3 * one + one // 2, policy="reject_new")
    with Outbox(path, limits, flush_interval_s=60, flush_batch=100) as ob:
        for _ in range(3):  # the first is stored (the reservation), two wait in the batch
            ob.put(TOPIC, {"pad": "x" * 200})
        s = ob.stats()
        assert (s["pending"], s["unflushed"], s["bytes"]) == (3, 2, 3 * one)
        with pytest.raises(QueueFullError, match=r"max_bytes"):
            ob.put(TOPIC, {"pad": "x" * 200})
        assert ob.stats()["rejected"] == 1


def test_flush_returns_every_row_it_stored_across_its_transactions(tmp_path: Path) -> None:
    """A batch over 256 KiB is committed in several transactions; flush() counts them all."""
    with Outbox(tmp_path / "q.db", big_limits(), flush_interval_s=60, flush_batch=1000) as ob:
        ob.put(TOPIC, {"n": -1})  # the reservation's commit
        for i in range(15):
            ob.put(TOPIC, {"n": i, "pad": "x" * 40_000})
        assert ob.flush() == 15
        assert ob.stats()["pending"] == 16


def test_a_refusal_alone_is_stored_by_the_next_flush(tmp_path: Path) -> None:
    """Nothing new to store, only a refusal to count: the periodic flush still writes it, so a
    crash right after keeps it (the number itself is inside the reservation)."""
    path = tmp_path / "q.db"
    ob = Outbox(path, big_limits(max_messages=1, policy="reject_new"), flush_interval_s=60)
    ob.put(TOPIC, {"n": 0})
    with pytest.raises(QueueFullError):
        ob.put(TOPIC, {"n": 1})
    ob.flush()
    crash(ob)
    with Outbox(path, big_limits()) as again:
        assert (again.stats()["rejected"], again.stats()["crashes"]) == (1, 1)
