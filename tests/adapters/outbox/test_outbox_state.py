"""What the outbox's parts share (adapters/outbox/state.py), seen from the outbox: a failed commit
puts its rows back in front, in order and with their bytes; a repeated warning is one line per 10 s
per kind; the first refusal of a streak is logged; a WAL checkpoint gives the bytes back and its
failure never fails a commit that landed; a closed queue names its file (issue 19, mutation
survivors)."""

from __future__ import annotations

import json
import logging
import re
import sqlite3
import types
from pathlib import Path
from typing import Any

import pytest
from support.outbox import TOPIC, big_limits

from edge_agent.adapters.outbox import state as outbox_state
from edge_agent.adapters.outbox.outbox import Outbox
from edge_agent.adapters.outbox.state import QueueState
from edge_agent.adapters.outbox.views import read_stats
from edge_agent.errors import QueueError, QueueFullError


def test_a_failed_commit_keeps_every_result_in_order_with_its_bytes(tmp_path: Path) -> None:
    """The commit fails (an I/O error, not a full disk) while the loop goes on putting: the failed
    rows go back in front of the new ones, nothing is lost or doubled, the figures stay exact."""
    path = tmp_path / "q.db"
    with Outbox(path, big_limits(), flush_interval_s=60, flush_batch=10**6) as ob:
        for i in range(20):
            ob.put(TOPIC, {"n": i})
        ob.flush()
        for i in range(20, 23):
            ob.put(TOPIC, {"n": i, "pad": "x" * (10 * i)})
        before = ob.stats()["bytes"]
        real = ob.writer.commit

        def failing(part: Any) -> int:
            for i in (23, 24):  # results arriving while the commit runs
                ob.put(TOPIC, {"n": i, "pad": "y" * (10 * i)})
            raise sqlite3.OperationalError("disk I/O error")

        ob.writer.commit = failing  # type: ignore[method-assign]
        with pytest.raises(QueueError, match="disk I/O error"):
            ob.flush()
        ob.writer.commit = real  # type: ignore[method-assign]
        s = ob.stats()
        assert (s["pending"], s["unflushed"]) == (25, 5)
        held = s["bytes"]
        assert held > before
        assert ob.flush() == 5
        assert ob.stats()["bytes"] == held == read_stats(path)["bytes"]
        assert [json.loads(m.payload)["n"] for m in ob.claim(100)] == list(range(25))


def test_a_closed_queue_names_its_file(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    ob = Outbox(path, big_limits(), flush_interval_s=60)
    ob.close()
    with pytest.raises(QueueError, match=f"^{re.escape(str(path))}: queue is closed$"):
        ob.put(TOPIC, {"n": 1})


def test_a_repeated_warning_is_one_line_per_ten_seconds_per_kind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """What a background flush failing every half second logs: the first line at once, the same
    kind again only 10 s later (to the tick), another kind not held back, each line as given."""
    clock = [5000.0]
    monkeypatch.setattr(outbox_state, "time", types.SimpleNamespace(monotonic=lambda: clock[0]))
    s = QueueState(tmp_path / "q.db", {})
    caplog.set_level(logging.INFO, "edge_agent.outbox")
    for t, key in [
        (0.0, "flush"),
        (0.5, "flush"),
        (9.9, "flush"),
        (9.9, "cap"),
        (10.0, "flush"),
        (19.9, "flush"),
    ]:
        clock[0] = 5000.0 + t
        s.warn(key, f"100% {key} at {t}", logging.ERROR if key == "flush" else logging.WARNING)
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
        (logging.ERROR, "100% flush at 0.0"),
        (logging.WARNING, "100% cap at 9.9"),
        (logging.ERROR, "100% flush at 10.0"),
    ]
    caplog.clear()
    for t, text in [(20.0, "held"), (69.9, "held"), (70.0, "again"), (129.9, "held"), (130.0, "now")]:
        clock[0] = 5000.0 + t
        s.warn("flush", text, period=60.0)  # a longer period counts from the last line too
    assert [r.getMessage() for r in caplog.records] == ["again", "now"]


def test_the_first_refusal_of_a_streak_is_logged_once_also_right_after_a_restart(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A queue at its cap under reject_new: the first put of the run is already refused, and that
    refusal is the one logged (not only refusals after an accepted put)."""
    path = tmp_path / "q.db"
    limits = big_limits(max_messages=2, policy="reject_new")
    caplog.set_level(logging.WARNING, "edge_agent.outbox")
    with Outbox(path, limits, flush_interval_s=60) as ob:
        ob.put(TOPIC, {"n": 0})
        ob.put(TOPIC, {"n": 1})
    assert caplog.records == []
    with Outbox(path, limits, flush_interval_s=60) as ob:
        for i in range(3):
            with pytest.raises(QueueFullError):
                ob.put(TOPIC, {"n": 2 + i})
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1
    assert lines[0].startswith(f"outbox {path}: rejecting new messages: ")
    assert lines[0].endswith("(policy reject_new)")


class _FailingCheckpoints:
    """The writer connection, but every WAL checkpoint fails (a busy or failing disk)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self.tried = 0

    def execute(self, sql: str, *args: Any) -> Any:
        if "wal_checkpoint" in sql.lower():
            self.tried += 1
            raise sqlite3.OperationalError("disk I/O error")
        return self._conn.execute(sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


def test_on_a_full_disk_each_commit_gives_the_wal_back_and_a_failed_checkpoint_fails_nothing(
    tmp_path: Path,
) -> None:
    """Capped (full disk imitated with ``max_pages``): after every commit the WAL is truncated, its
    bytes back on the filesystem. A checkpoint is best effort: when it fails, the commit before it
    still counts, once (an error there would put committed rows back and store them twice)."""
    path = tmp_path / "q.db"
    wal = Path(f"{path}-wal")
    with Outbox(path, big_limits(), flush_interval_s=60, flush_batch=10**6, max_pages=64) as ob:
        for i in range(300):
            ob.put(TOPIC, {"n": i, "pad": "p" * 1000})
        ob.flush()
        assert ob.stats()["disk_full"]
        ob.ack([m.rowid for m in ob.claim(50)])  # room inside the capped file
        ob.put(TOPIC, {"n": 300})
        assert ob.flush() == 1
        assert wal.stat().st_size == 0
        pending = ob.stats()["pending"]
        failing = _FailingCheckpoints(ob.db.w)
        ob.db.w = failing  # type: ignore[assignment]
        try:
            ob.put(TOPIC, {"n": 301})
            assert ob.flush() == 1
        finally:
            ob.db.w = failing._conn
        assert failing.tried >= 1
        s = ob.stats()
        assert (s["pending"], s["unflushed"]) == (pending + 1, 0)
        ns = [json.loads(m.payload)["n"] for m in ob.claim(1000)]
        assert ns.count(301) == 1 and ns[-2:] == [300, 301]
