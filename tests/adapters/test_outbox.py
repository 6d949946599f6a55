"""The outbox's own module (adapters/outbox.py) in process: every ``[queue]`` key reaches it, the
figures ``queue stats`` and the status show, a closed queue (issue 19, mutation survivors)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from support.outbox import TOPIC, big_limits

from edge_agent.adapters.outbox import Outbox
from edge_agent.core.config import QueueConfig
from edge_agent.errors import QueueError


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
        with pytest.raises(QueueError, match="queue is closed"):
            call()
    with Outbox(tmp_path / "q.db", big_limits()) as again:  # the batch was flushed at close
        assert again.stats()["pending"] == 1
