"""``Collector.run`` in process, its subscriber never connected (messages put in its inbox): rounds,
the next one parsed while PostgreSQL inserts this one (app.collector.overlap), are committed and
acked in the order taken, leaving waits until every round is stored, a store's error that is not
about the data ends the run, and a round prepared ahead when the run stops is not acked."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any, Optional

from edge_agent.adapters.collector.subscriber import Inbound
from edge_agent.app.collector.loop import Collector
from edge_agent.core.config.collector import CollectorConfig


def inbound(seq: int, device: str = "cam-1") -> Inbound:
    body = {"id": f"r{seq}", "seq": seq, "boot": 1, "device_id": device, "ts": 1796000000.0 + seq}
    return Inbound(f"edge/{device}/detections", json.dumps(body).encode(), seq, 1, 1)


def make(
    tmp_path: Path, leave_quiet_s: Optional[float] = None, db: str = "", **cfg: Any
) -> tuple[Collector, list[int]]:
    c = CollectorConfig(db=db or f"sqlite:///{tmp_path / 'fleet.db'}", **cfg)
    col = Collector(c, None, None, leave_quiet_s)
    acked: list[int] = []
    col.sub.start = lambda: None  # type: ignore[method-assign]
    col.sub.stop = lambda end_session=False: None  # type: ignore[method-assign]
    col.sub.ack = lambda msgs: acked.extend(m.mid for m in msgs) or len(msgs)  # type: ignore[method-assign]
    return col, acked


def run_in_thread(col: Collector, stop: threading.Event) -> tuple[threading.Thread, list[BaseException]]:
    errors: list[BaseException] = []

    def go() -> None:
        try:
            col.run(stop)
        except BaseException as exc:  # noqa: BLE001 -- the test looks at it
            errors.append(exc)

    t = threading.Thread(target=go)
    t.start()
    return t, errors


def wait_for(cond: Any, timeout: float = 20.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.02)


def test_rounds_are_stored_and_acked_in_the_order_taken(tmp_path: Path, url: str) -> None:
    col, acked = make(tmp_path, db=url, batch_max=7)
    stored: list[int] = []
    ahead: list[int] = []  # messages taken while a round's COPY was in flight
    real = col.db.store

    def store(records: Any, *a: Any, **k: Any) -> int:
        stored.extend(r.seq for r in records)
        time.sleep(0.02)  # a round's store takes longer than its parse: rounds queue up
        taken = col.metrics.taken
        n = real(records, *a, **k)
        ahead.append(col.metrics.taken - taken)
        return n

    col.db.store = store  # type: ignore[method-assign]
    for s in range(1, 51):
        col.sub.inbox.put(inbound(s))
    stop = threading.Event()
    t, errors = run_in_thread(col, stop)
    wait_for(lambda: len(acked) == 50)
    stop.set()
    t.join(20)
    assert errors == []
    assert acked == list(range(1, 51)) and stored == list(range(1, 51))
    assert col.metrics.records == 50 and col.metrics.rounds >= 8
    # PostgreSQL: each round but the last took the next 7 during its COPY; SQLite: none (serial)
    assert ahead == ([7] * 6 + [1, 0] if col.db.dialect == "postgresql" else [0] * 8)
    db = Collector(col.cfg, None, None).db
    assert db.message_stats() == (50, 50)
    db.close()


def test_leaving_waits_until_every_round_is_stored(tmp_path: Path) -> None:
    col, acked = make(tmp_path, leave_quiet_s=0.0)
    col.sub.unsubscribed.set()
    col.sub.unsubscribed_at = 0.0
    real = col._commit

    def slow_commit(*a: Any) -> None:
        time.sleep(0.5)  # the inbox is empty long before this round is committed
        real(*a)

    col._commit = slow_commit  # type: ignore[method-assign]
    col.sub.inbox.put(inbound(1))
    col.sub.inbox.put(inbound(2))
    stop = threading.Event()
    t, errors = run_in_thread(col, stop)
    t.join(20)
    assert not t.is_alive() and errors == []
    assert col.left  # the session ended only once what it held was stored and acked
    assert acked == [1, 2] and col.metrics.records == 2


def test_a_commit_error_ends_the_run_with_that_error(tmp_path: Path) -> None:
    col, acked = make(tmp_path)

    def broken(*a: Any) -> None:
        raise RuntimeError("writer bug")

    col._commit = broken  # type: ignore[method-assign]
    col.sub.inbox.put(inbound(1))
    stop = threading.Event()
    t, errors = run_in_thread(col, stop)
    t.join(20)
    assert not t.is_alive()  # not a collector that takes messages it never stores
    assert len(errors) == 1 and "writer bug" in str(errors[0])
    assert acked == []


def test_a_round_prepared_ahead_at_stop_is_not_acked(tmp_path: Path) -> None:
    col, acked = make(tmp_path, batch_max=2)
    stop = threading.Event()
    real = col.db.store

    def store(records: Any, *a: Any, **k: Any) -> int:
        a[-1]()  # the hook PostgreSQL's COPY calls (app.collector.overlap): round 2 is taken now
        stop.set()  # and the collector is stopped before round 2 is stored
        return real(records, *a, **k)

    col.db.store = store  # type: ignore[method-assign]
    for s in (1, 2, 3, 4):
        col.sub.inbox.put(inbound(s))
    t, errors = run_in_thread(col, stop)
    t.join(20)
    assert errors == []
    assert acked == [1, 2]  # the round in hand finished; the one prepared is redelivered by the broker
    assert col.metrics.taken == 4 and col.metrics.records == 2
