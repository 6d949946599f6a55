"""The collector's loop in process, without a broker (its Subscriber is made but never started):
what one round takes, when leaving is done, the figures Prometheus gets, and the one row order
that keeps two PostgreSQL writers from deadlocking."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from edge_agent.adapters.collector_mqtt import Inbound
from edge_agent.app import collector as collector_mod
from edge_agent.app.collector import RATE_WINDOW_S, Collector, Metrics
from edge_agent.core.collector_config import CollectorConfig
from edge_agent.core.fleet import Record

NOW = 1796000000.0


def make(tmp_path: Path, leave_quiet_s: float | None = None, **cfg: object) -> Collector:
    c = CollectorConfig(db=f"sqlite:///{tmp_path / 'fleet.db'}", **cfg)  # type: ignore[arg-type]
    col = Collector(c, None, None, leave_quiet_s)
    col.db.migrate()
    return col


def inbound(seq: int, device: str = "cam-1", ts: float = NOW) -> Inbound:
    body = {"id": f"r{seq}", "seq": seq, "boot": 1, "device_id": device, "ts": ts}
    return Inbound(f"edge/{device}/detections", json.dumps(body).encode(), seq, 1, 1)


def test_a_round_takes_at_most_batch_max_and_leaves_the_rest_waiting(tmp_path: Path) -> None:
    col = make(tmp_path, batch_max=5)
    for seq in range(1, 13):
        col.sub.inbox.put(inbound(seq))
    assert [m.mid for m in col._take(0.1)] == [1, 2, 3, 4, 5]
    assert [m.mid for m in col._take(0.1)] == [6, 7, 8, 9, 10]
    assert [m.mid for m in col._take(0.1)] == [11, 12]  # never waits for a batch to fill
    assert col._take(0.05) == []
    col.db.close()


def test_leaving_is_not_done_while_a_message_waits_in_the_inbox(tmp_path: Path) -> None:
    col = make(tmp_path, leave_quiet_s=0.0)
    col.sub.unsubscribed.set()
    col.sub.unsubscribed_at = 0.0
    col.sub.inbox.put(inbound(1))
    assert not col._done_leaving(0.0)  # ending the session now would lose that message
    col.sub.inbox.get_nowait()
    assert col._done_leaving(0.0)
    col.sub.unsubscribed.clear()
    assert not col._done_leaving(0.0)  # the broker has not confirmed the UNSUBSCRIBE yet
    col.db.close()


def test_leaving_waits_for_its_quiet_time_after_the_last_round(tmp_path: Path) -> None:
    col = make(tmp_path, leave_quiet_s=60.0)
    col.sub.unsubscribed.set()
    col.sub.unsubscribed_at = 0.0
    assert not col._done_leaving(collector_mod.time.monotonic())
    assert col._done_leaving(collector_mod.time.monotonic() - 61)
    assert not make(tmp_path / "b")._done_leaving(0.0)  # not leaving at all: never done
    col.db.close()


def test_lag_is_measured_to_the_newest_record_of_the_round(tmp_path: Path) -> None:
    col = make(tmp_path)
    received = collector_mod.time.time()
    batch = [inbound(1, ts=received - 100), inbound(2, ts=received - 3), inbound(3, ts=received - 50)]
    col._round(batch, threading.Event())
    assert col.metrics.records == 3 and col.metrics.messages == 3
    assert 3.0 <= col.metrics.lag_s < 4.0
    col.db.close()


def test_the_ingest_rate_counts_only_the_last_window() -> None:
    m = Metrics()
    m.stored(100.0, 50)
    m.stored(100.0 + RATE_WINDOW_S - 1, 30)
    assert m.rate(100.0 + RATE_WINDOW_S - 1) == pytest.approx(80 / RATE_WINDOW_S)
    m.stored(100.0 + RATE_WINDOW_S + 5, 20)  # the first entry is now out of the window
    assert m.rate(100.0 + RATE_WINDOW_S + 5) == pytest.approx(50 / RATE_WINDOW_S)
    assert len(m._window) == 2  # and forgotten: the window does not grow without bound
    assert m.rate(100.0 + 10 * RATE_WINDOW_S) == 0.0


def test_online_devices_are_counted_at_most_every_few_seconds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    col = make(tmp_path)
    calls: list[int] = []
    real = col.db.online
    monkeypatch.setattr(col.db, "online", lambda: calls.append(1) or real())
    clock = [1000.0]
    monkeypatch.setattr(collector_mod.time, "monotonic", lambda: clock[0])
    col._refresh_online()
    col._refresh_online()  # the loop calls this every 0.2 s: one query per ONLINE_EVERY_S
    assert len(calls) == 1
    clock[0] += collector_mod.ONLINE_EVERY_S
    col._refresh_online()
    assert len(calls) == 2
    col.db.close()


def test_one_round_stores_rows_in_key_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two PostgreSQL writers locking rows in different orders deadlocked in the 200-device run:
    every round writes its records sorted by (device, boot, seq)."""
    col = make(tmp_path)
    seen: list[list[tuple[str, int, int]]] = []
    real = col.db._insert_records

    def spy(records: list[Record], received: float) -> int:
        seen.append([(r.device, r.boot, r.seq) for r in records])
        return real(records, received)

    monkeypatch.setattr(col.db, "_insert_records", spy)
    batch = [inbound(5, "cam-b"), inbound(2, "cam-a"), inbound(9, "cam-a"), inbound(1, "cam-b")]
    col._round(batch, threading.Event())
    assert seen == [[("cam-a", 1, 2), ("cam-a", 1, 9), ("cam-b", 1, 1), ("cam-b", 1, 5)]]
    col.db.close()
