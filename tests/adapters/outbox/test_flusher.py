"""The outbox's background flusher outlives any one failed flush."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

import pytest
from support import wait_until
from support.outbox import TOPIC, big_limits

from edge_agent.adapters.outbox.outbox import Outbox
from edge_agent.errors import QueueError


@pytest.mark.parametrize("exc", [QueueError("disk said no"), RuntimeError("a bug in a flush step")])
def test_a_failed_background_flush_is_logged_and_retried_not_the_end_of_the_flusher(
    outbox: Outbox, caplog: pytest.LogCaptureFixture, exc: Exception
) -> None:
    """Were the thread to end, results would pile up unflushed in memory until close: all lost on
    a power cut, though each put had returned."""
    outbox.put(TOPIC, {"n": 0})  # the first put also reserves seq numbers with a flush of its own
    wait_until(lambda: outbox.stats()["unflushed"] == 0, what="the first result flushed")
    real = outbox.flush
    calls = {"n": 0}

    def flaky() -> Any:
        calls["n"] += 1
        if calls["n"] == 1:
            raise exc
        return real()

    outbox.flush = flaky  # type: ignore[method-assign]
    with caplog.at_level(logging.ERROR, logger="edge_agent"):
        outbox.put(TOPIC, {"n": 1})
        wait_until(lambda: outbox.stats()["unflushed"] == 0 and calls["n"] >= 2, what="flushed on a retry")
    assert outbox._flusher.is_alive()
    assert outbox.stats()["pending"] == 2
    assert any("background flush failed (will retry)" in r.getMessage() for r in caplog.records)
    outbox.put(TOPIC, {"n": 2})
    wait_until(lambda: outbox.stats()["unflushed"] == 0, what="the next result flushed too")
    assert outbox.stats()["pending"] == 3


def test_a_failing_disk_is_one_error_line_whoever_flushes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """put()'s own flush (flush_interval_s = 0) and the flusher's share one rate limit: a disk that
    fails both is one ERROR line per 10 s, not one per path."""
    callers: set[str] = set()
    with Outbox(tmp_path / "q.db", big_limits(), flush_interval_s=0) as ob:
        real = ob.flush

        def failing() -> Any:
            callers.add(threading.current_thread().name)
            raise QueueError("disk said no")

        with caplog.at_level(logging.ERROR, logger="edge_agent"):
            ob.flush = failing  # type: ignore[method-assign]
            ob.put(TOPIC, {"n": 1})
            wait_until(
                lambda: {"MainThread", "outbox-flusher"} <= callers, timeout=10, what="both flush paths"
            )
            ob.flush = real  # type: ignore[method-assign]
        lines = [r.getMessage() for r in caplog.records if "flush failed (will retry)" in r.getMessage()]
        assert len(lines) == 1, lines
