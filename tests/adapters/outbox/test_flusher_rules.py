"""The flusher's rules on a real :class:`QueueState` and a real thread, its flush and maintenance
recorded (issue 36: flusher.py had no score): a full batch is committed at once, a short one
``flush_interval_s`` after its first row, maintenance runs every ``MAINTENANCE_S`` even when idle,
a full disk is retried without a busy loop and without an error line, close ends the thread.
Bounds on the clock are lower bounds only (what must not happen before), never speed."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support import wait_until

from edge_agent.adapters.outbox import flusher
from edge_agent.adapters.outbox.state import QueueState
from edge_agent.errors import QueueError, QueueFullError

ROW = ("id", "t", b"{}", 0.0, 1)


class Recorder:
    """The flusher's two callables: each flush commits the whole batch (as the outbox's does)."""

    def __init__(self, s: QueueState, fail: list[Exception] | None = None) -> None:
        self.s = s
        self.fail = fail or []
        self.flushes: list[tuple[float, int]] = []  # (monotonic time, rows committed)
        self.maintained: list[float] = []

    def flush(self) -> int:
        with self.s.lock:
            n = len(self.s.batch)
            self.flushes.append((time.monotonic(), n))
            if self.fail:
                raise self.fail.pop(0)
            self.s.batch.clear()
        return n

    def maintain(self) -> None:
        self.maintained.append(time.monotonic())


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Callable[..., tuple[QueueState, Recorder]]]:
    threads: list[tuple[QueueState, threading.Thread]] = []

    def run(interval: float, batch: int, fail: list[Exception] | None = None) -> tuple[QueueState, Recorder]:
        s = QueueState(tmp_path / "q.db", {})
        rec = Recorder(s, fail)
        t = threading.Thread(
            target=flusher.run_flusher,
            args=(s, s.path, interval, batch, rec.flush, rec.maintain),
            daemon=True,
        )
        t.start()
        threads.append((s, t))
        return s, rec

    yield run
    for s, t in threads:
        with s.lock:
            s.closed = True
            s.cond.notify_all()
        t.join(5)


def put(s: QueueState, n: int) -> None:
    with s.lock:
        if not s.batch:
            s.batch_since = time.monotonic()
        s.batch.extend([ROW] * n)
        s.cond.notify_all()


def test_a_full_batch_is_committed_at_once_a_short_one_waits(
    start: Callable[..., tuple[QueueState, Recorder]],
) -> None:
    s, rec = start(60.0, 3)
    put(s, 2)
    time.sleep(0.3)
    assert rec.flushes == []  # two of three rows, the interval a minute away: nothing yet
    put(s, 1)
    wait_until(lambda: rec.flushes, timeout=5, what="the full batch flushed")
    assert [n for _, n in rec.flushes] == [3] and rec.maintained == []


def test_a_short_batch_is_committed_its_interval_after_the_first_row(
    start: Callable[..., tuple[QueueState, Recorder]],
) -> None:
    s, rec = start(0.3, 1000)
    put(s, 1)
    first = s.batch_since
    put(s, 1)  # a second row does not restart the clock
    wait_until(lambda: rec.flushes, timeout=5, what="the short batch flushed")
    (when, n), *_ = rec.flushes
    assert n == 2 and when - first >= 0.3


def test_maintenance_runs_every_period_even_with_nothing_to_flush(
    start: Callable[..., tuple[QueueState, Recorder]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(flusher, "MAINTENANCE_S", 0.2)
    t0 = time.monotonic()
    _, rec = start(60.0, 1000)
    wait_until(lambda: len(rec.maintained) >= 2, timeout=5, what="two maintenance rounds")
    # the period runs from just before each round's maintain(): the gap between two calls is the
    # period less the few microseconds of that call's start, hence 0.15
    assert rec.maintained[0] - t0 >= 0.2 and rec.maintained[1] - rec.maintained[0] >= 0.15
    assert len(rec.flushes) >= 2  # each round commits first (an empty batch)


def test_close_ends_the_thread_without_another_flush(tmp_path: Path) -> None:
    s = QueueState(tmp_path / "q.db", {})
    rec = Recorder(s)
    t = threading.Thread(target=flusher.run_flusher, args=(s, s.path, 60.0, 1000, rec.flush, rec.maintain))
    t.start()
    put(s, 1)
    with s.lock:
        s.closed = True
        s.cond.notify_all()
    t.join(5)
    assert not t.is_alive() and rec.flushes == [] and rec.maintained == []


def test_a_full_disk_is_retried_after_a_pause_and_no_error_line(
    start: Callable[..., tuple[QueueState, Recorder]], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="edge_agent"):
        s, rec = start(0.01, 1, [QueueFullError("disk full")])
        put(s, 1)
        wait_until(lambda: len(rec.flushes) >= 2, timeout=5, what="the retry")
    (t1, _), (t2, n), *_ = rec.flushes
    assert n == 1 and t2 - t1 >= 0.5  # not a busy loop against a full disk
    assert caplog.records == []


@pytest.mark.parametrize(
    ("exc", "says"),
    [(QueueError("disk said no"), "disk said no"), (ValueError("a bug"), "unexpected ValueError: a bug")],
)
def test_a_failed_flush_is_one_error_line_and_retried_after_a_pause(
    start: Callable[..., tuple[QueueState, Recorder]],
    caplog: pytest.LogCaptureFixture,
    exc: Exception,
    says: str,
) -> None:
    with caplog.at_level(logging.WARNING, logger="edge_agent"):
        s, rec = start(0.01, 1, [exc])
        put(s, 1)
        wait_until(lambda: len(rec.flushes) >= 2, timeout=5, what="the retry")
    (t1, _), (t2, n), *_ = rec.flushes
    assert n == 1 and t2 - t1 >= 0.5
    (record,) = caplog.records
    assert record.levelno == logging.ERROR
    assert record.getMessage() == f"outbox {s.path}: background flush failed (will retry): {says}"
