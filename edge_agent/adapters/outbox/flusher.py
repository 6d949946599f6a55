"""The outbox's background flusher: commits the batch at ``flush_batch`` rows or
``flush_interval_s`` after its first row, and runs maintenance every ``MAINTENANCE_S``.

Its own module so the outbox's assembly stays readable; it touches only the shared
:class:`~edge_agent.adapters.outbox.state.QueueState` and the two callables it is handed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

from edge_agent.adapters.outbox.state import QueueState
from edge_agent.errors import QueueError, QueueFullError

MAINTENANCE_S = 30.0


def run_flusher(
    s: QueueState,
    path: Path,
    flush_interval_s: float,
    flush_batch: int,
    flush: Callable[[], int],
    maintain: Callable[[], None],
) -> None:
    """Until the queue closes; never ends on an error (it is counted and retried)."""
    next_maintenance = time.monotonic() + MAINTENANCE_S
    while True:
        with s.lock:
            while not s.closed:
                now = time.monotonic()
                due = s.batch_since + flush_interval_s if s.batch else now + MAINTENANCE_S
                if len(s.batch) >= flush_batch or now >= min(due, next_maintenance):
                    break
                s.cond.wait(min(due, next_maintenance) - now)
            if s.closed:
                return
        try:
            flush()
            if time.monotonic() >= next_maintenance:
                next_maintenance = time.monotonic() + MAINTENANCE_S
                maintain()
        except QueueFullError:
            with s.lock:
                s.cond.wait(max(flush_interval_s, 0.5))
        except Exception as exc:  # noqa: BLE001 -- QueueError, or anything else: were this thread to
            # end, results would pile up unflushed in memory until close (lost on a crash)
            what = str(exc) if isinstance(exc, QueueError) else f"unexpected {type(exc).__name__}: {exc}"
            s.warn("flush", f"outbox {path}: background flush failed (will retry): {what}", logging.ERROR)
            with s.lock:
                s.cond.wait(max(flush_interval_s, 0.5))
