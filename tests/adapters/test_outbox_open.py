"""Opening the outbox's files (adapters/outbox_open.py) in process: a failed open is one line and
leaves nothing held, so the agent's next try (or another process) can open the queue (issue 19,
mutation survivors; the full-disk open is in tests/outbox/test_full_disk.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support.outbox import TOPIC, big_limits

from edge_agent.adapters.outbox import Outbox
from edge_agent.errors import QueueError


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_a_queue_that_cannot_be_opened_is_one_error_and_holds_nothing(tmp_path: Path) -> None:
    """A directory where the queue file should be: one QueueError naming the file, no descriptor
    left open (the marks, the lock), and once the path is fixed the queue opens at once."""
    path = tmp_path / "q.db"
    path.mkdir()
    before = _fds()
    for _ in range(3):  # the agent retries
        with pytest.raises(QueueError) as err:
            Outbox(path, big_limits())
        assert str(err.value) == f"{path}: cannot open the queue database: unable to open database file"
    assert _fds() == before
    path.rmdir()
    with Outbox(path, big_limits()) as ob:
        ob.put(TOPIC, {"n": 1})
        assert (ob.boot, ob.stats()["pending"]) == (1, 1)
    assert _fds() == before
