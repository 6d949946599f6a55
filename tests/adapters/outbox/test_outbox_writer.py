"""The outbox's commit path and shared state (adapters/outbox/writer.py, outbox_state.py) in
process: drops at a cap never take a row in flight, a failed commit keeps every row and every
figure, rate-limited warnings (issue 19, mutation survivors)."""

from __future__ import annotations

import errno
import logging
from pathlib import Path

import pytest
from support.outbox import TOPIC, big_limits
from support.outbox import meta_rows as _meta_rows

from edge_agent.adapters.outbox import state as outbox_state
from edge_agent.adapters.outbox.outbox import Outbox
from edge_agent.adapters.outbox.state import QueueState
from edge_agent.adapters.outbox.views import iter_messages
from edge_agent.core.queue.policy import Marks
from edge_agent.errors import QueueError


def test_a_cap_drops_the_oldest_rows_not_in_flight(tmp_path: Path) -> None:
    """Rows in flight are on their way to the broker: dropping them would count as dropped a
    result that is then delivered (and the ack would find nothing to delete)."""
    path = tmp_path / "q.db"
    with Outbox(path, big_limits(max_messages=10), flush_interval_s=60, flush_batch=1000) as ob:
        for i in range(10):
            ob.put(TOPIC, {"n": i})
        ob.flush()
        sent = ob.claim(3)  # rows 1-3 in flight
        assert [r for r, _ in ob.writer.droppable(5)] == [4, 5, 6, 7, 8]
        for i in range(10, 12):
            ob.put(TOPIC, {"n": i})
        ob.flush()
        assert ob.counters["dropped"] == 2
        assert ob.ack([m.rowid for m in sent]) == 3  # all three were still there
        assert [m["payload"]["n"] for m in iter_messages(path)] == list(range(5, 12))


def test_a_failed_commit_keeps_every_row_and_the_figures_exact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The marks file cannot be written (an I/O error): the commit fails, its rows go back in
    front of a result put meanwhile, the figures count all of them once, and the next flush
    stores them in order."""
    path = tmp_path / "q.db"
    ob = Outbox(path, big_limits(), flush_interval_s=60, flush_batch=1000)
    try:
        for i in range(10):
            ob.put(TOPIC, {"n": i})
        ob.flush()  # reserves numbers ahead: the put below does not flush by itself
        for i in range(10, 15):
            ob.put(TOPIC, {"n": i})
        real = ob.ledger.marks.write
        calls = []

        def fails_once(m: Marks) -> None:
            if not calls:
                calls.append(m)
                ob.put(TOPIC, {"n": 15, "pad": "q" * 50})  # a result arrives during the commit
                raise OSError(errno.EIO, "Input/output error")
            real(m)

        monkeypatch.setattr(ob.ledger.marks, "write", fails_once)
        want_bytes = ob.stats()["bytes"]
        with pytest.raises(QueueError, match="Input/output error"):
            ob.flush()
        s = ob.stats()
        assert s["unflushed"] == 6 and s["pending"] == 16
        assert s["bytes"] > want_bytes  # the result put meanwhile is counted, once
        extra = s["bytes"] - want_bytes
        assert 50 < extra < 200
        assert ob.flush() == 6
        s2 = ob.stats()
        assert (s2["unflushed"], s2["pending"], s2["bytes"]) == (0, 16, s["bytes"])
    finally:
        ob.close()
    assert [m["payload"]["n"] for m in iter_messages(path)] == list(range(16))


def test_a_repeated_warning_is_logged_once_per_period(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    now = [1000.0]
    monkeypatch.setattr(outbox_state.time, "monotonic", lambda: now[0])
    s = QueueState(tmp_path / "q.db", {})
    with caplog.at_level(logging.INFO, logger="edge_agent.outbox"):
        for t in (1000.0, 1009.9, 1010.0, 1015.0, 1019.95, 1020.0):
            now[0] = t
            s.warn("cap", f"at {t}")
        s.warn("other", "another key has its own clock")
        now[0] = 1030.0
        s.warn("fulldrop", "once a minute", logging.ERROR, period=60.0)
        now[0] = 1089.0
        s.warn("fulldrop", "not yet", logging.ERROR, period=60.0)
        now[0] = 1090.0
        s.warn("fulldrop", "a minute later", logging.ERROR, period=60.0)
    got = [(r.levelno, r.getMessage()) for r in caplog.records]
    assert got == [
        (logging.WARNING, "at 1000.0"),
        (logging.WARNING, "at 1010.0"),
        (logging.WARNING, "at 1020.0"),
        (logging.WARNING, "another key has its own clock"),
        (logging.ERROR, "once a minute"),
        (logging.ERROR, "a minute later"),
    ]


@pytest.mark.parametrize(("flush_batch", "puts"), [(100, 5), (100, 60), (10, 9), (1000, 300)])
def test_the_gap_a_crash_leaves_is_twice_the_last_batch_at_least_16_at_most_flush_batch(
    tmp_path: Path, flush_batch: int, puts: int
) -> None:
    """The reservation written ahead at each commit is what a crash skips (docs/queue.md): close to
    the group-commit window, not flush_batch (30 results/s: a gap of <= 16, not 100)."""
    from support.outbox import crash

    path = tmp_path / "q.db"
    ob = Outbox(path, big_limits(), flush_interval_s=60, flush_batch=flush_batch)
    sizes: list[int] = []
    real = ob.writer.commit
    ob.writer.commit = lambda part: sizes.append(len(part)) or real(part)  # type: ignore[method-assign,func-returns-value]
    for i in range(puts):
        ob.put(TOPIC, {"n": i})
    ob.flush()
    last = [n for n in sizes if n][-1]
    crash(ob)
    with Outbox(path, big_limits()) as again:
        s = again.stats()
        assert s["crashes"] == 1
        assert s["seq_skipped"] == min(flush_batch, max(16, 2 * last))
        assert s["seq"] == puts + s["seq_skipped"]


def test_a_cap_drop_of_a_thousand_rows_is_stored_and_counted_with_the_commit(tmp_path: Path) -> None:
    """The drops a cap requires go in the same transaction as the batch, with the counter and the
    meta row count: a crash right after loses neither (1000 rows: more than one DELETE chunk)."""
    from support.outbox import crash

    path = tmp_path / "q.db"
    ob = Outbox(path, big_limits(max_messages=10), flush_interval_s=60, flush_batch=10**6)
    ob.put(TOPIC, {"n": -1})  # the first number: committed at once
    for i in range(1009):
        ob.put(TOPIC, {"n": i})
    assert ob.flush() > 0
    assert ob.counters["dropped"] == 1000
    assert (read := [m["payload"]["n"] for m in iter_messages(path)]) == list(range(999, 1009))
    assert len(read) == ob.stats()["pending"] == _meta_rows(path) == 10
    crash(ob)
    with Outbox(path, big_limits()) as again:
        s = again.stats()
        assert (s["dropped"], s["pending"], s["crashes"]) == (1000, 10, 1)
