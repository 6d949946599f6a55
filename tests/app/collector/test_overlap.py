"""The next round prepared while the store waits (app.collector.overlap): prepared once, handed over
once, and taken again on a later idle when nothing had come; the store calls the hook on
PostgreSQL only, while its COPY is in flight (the round not yet visible to anyone), never on SQLite
(no server to wait for)."""

from __future__ import annotations

import json
from typing import Optional

import pytest

from edge_agent.adapters.collector.db import CollectorDb
from edge_agent.app.collector.overlap import Ahead
from edge_agent.core.messages.fleet import Record

NOW = 1796000000.0


def test_a_round_is_prepared_once_and_handed_over_once() -> None:
    queue = [None, 7, 8]  # nothing arrived at the first idle, then two rounds did
    calls: list[Optional[int]] = []

    def take() -> Optional[int]:
        calls.append(queue[0] if queue else None)
        return queue.pop(0) if queue else None

    ahead: Ahead[int] = Ahead(take)
    assert ahead.next() is None and calls == []  # next() never takes: only the store's idle does
    ahead.idle()
    assert not ahead.pending() and calls == [None]
    ahead.idle()  # the store may call it again: what came since is taken now
    assert ahead.pending() and calls == [None, 7]
    ahead.idle()  # one is prepared already: not a second
    assert calls == [None, 7]
    assert ahead.next() == 7
    assert ahead.next() is None and not ahead.pending()
    ahead.idle()
    assert ahead.next() == 8


def _records(n: int, device: str = "cam-1") -> list[Record]:
    return [
        Record(device, 1, s, "detections", f"r{s}", NOW + s, json.dumps({"seq": s})) for s in range(1, n + 1)
    ]


def test_the_store_calls_idle_while_its_copy_is_in_flight_on_postgresql(url: str) -> None:
    db = CollectorDb(url)
    db.migrate()
    seen: list[int] = []

    def idle() -> None:  # what another connection sees then: not this round
        other = CollectorDb(url)
        seen.append(other.message_stats()[0])
        other.close()

    assert db.store(_records(3), NOW, idle=idle) == 3
    if db.dialect == "sqlite":
        assert seen == []  # in-process: nothing to wait for, the loop prepares the next round after
    else:
        from psycopg.pq import TransactionStatus

        assert seen == [0]  # once, in the round's transaction
        assert db.conn.info.transaction_status == TransactionStatus.IDLE  # committed
    assert db.message_stats() == (3, 3)
    # a round with nothing new copies nothing: no wait, no call
    assert db.store(_records(3), NOW, idle=idle) == 0
    assert len(seen) == (0 if db.dialect == "sqlite" else 1)
    db.close()


def test_an_idle_that_raises_rolls_the_round_back(url: str) -> None:
    db = CollectorDb(url)
    db.migrate()

    def idle() -> None:
        raise RuntimeError("parse bug")

    if db.dialect == "sqlite":  # never called there: the round stores
        assert db.store(_records(2), NOW, idle=idle) == 2
        return
    with pytest.raises(RuntimeError, match="parse bug"):
        db.store(_records(2), NOW, idle=idle)
    assert db.message_stats() == (0, 0) and not db.known.entries
    assert db.store(_records(2), NOW) == 2  # the connection is usable: the next round stores
    db.close()
