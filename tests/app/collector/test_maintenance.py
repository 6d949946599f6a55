"""The collector's housekeeping (app/collector/maintenance.py) on a real SQLite file: one pass
expires what is past history_keep_days and thins what is past history_full_days, in batches of
maintenance_batch, then waits maintenance_every_s; a pass over its time budget says work is
left; the per-device metric rows are refreshed only when metrics are exported."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from support.collector import sqlite_url

from edge_agent.adapters.collector import history, purge
from edge_agent.adapters.collector.db import CollectorDb
from edge_agent.app.collector import maintenance
from edge_agent.app.collector.maintenance import Maintenance
from edge_agent.app.collector.round_stats import Metrics
from edge_agent.core.config.collector import CollectorConfig
from edge_agent.core.messages.fleet import DeviceStatus, Record, parse

DAY = 86400.0


def status(ts: float, now: float) -> DeviceStatus:
    body = {"device_id": "cam-1", "state": "running", "ts": ts, "queue": {"pending": 1}}
    s = parse("edge", "edge/cam-1/status", json.dumps(body).encode(), now).status
    assert s is not None
    return s


def seed(url: str, now: float) -> CollectorDb:
    db = CollectorDb(url)
    db.migrate()
    spans = ((now - 3 * DAY, 30), (now - 1.5 * DAY, 120), (now - 600, 20))
    db.store([], now, statuses=[status(start + 60 * i, now) for start, n in spans for i in range(n)])
    return db


def test_one_pass_expires_and_thins_then_waits(tmp_path: Path) -> None:
    now = time.time()
    db = seed(sqlite_url(tmp_path / "fleet.db"), now)
    cfg = CollectorConfig(
        history_full_days=1, history_bucket_s=3600, history_keep_days=2, maintenance_batch=25, metrics_port=0
    )
    m = Maintenance(cfg)
    try:
        assert m.history(db, now) is False  # all done within the budget
        rows = history.rows(db, "cam-1", None, 1000)
        assert m.expired == 30
        # 120 statuses a minute apart over 2 h: 2 or 3 hourly buckets, each split by batches of 25
        thinned = [r for r in rows if r["time"] < now - DAY]
        assert 2 <= len(thinned) <= 3 + 120 // 25 and m.thinned == 120 - len(thinned)
        assert len(rows) - len(thinned) == 20  # the last day untouched
        before = (m.expired, m.thinned)
        db.store([], now, statuses=[status(now - 5 * DAY, now)])
        assert m.history(db, now) is False and (m.expired, m.thinned) == before  # not due yet
        m.device_metrics(db, metrics := Metrics())
        assert metrics.device_rows == []  # metrics off: nothing read
    finally:
        db.close()


def test_a_pass_over_its_budget_leaves_the_rest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    now = time.time()
    db = seed(sqlite_url(tmp_path / "fleet.db"), now)
    monkeypatch.setattr(maintenance, "BUDGET_S", 0.0)
    cfg = CollectorConfig(history_full_days=1, history_keep_days=2, maintenance_batch=10, metrics_port=9999)
    m = Maintenance(cfg)
    try:
        assert m.history(db, now) is True and m.expired == 10  # one batch, then out of time
        m.device_metrics(db, metrics := Metrics())
        assert [r["device"] for r in metrics.device_rows] == ["cam-1"] and metrics.devices_known == 1
    finally:
        db.close()


def test_retention_runs_in_the_same_paced_pass(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    now = time.time()
    db = CollectorDb(sqlite_url(tmp_path / "fleet.db"))
    db.migrate()
    recs = []
    for s in range(1, 31):
        body = {
            "id": f"r{s}",
            "seq": s,
            "boot": 1,
            "device_id": "cam-1",
            "ts": now - (2 if s <= 25 else 0) * DAY,
        }
        recs += parse("edge", "edge/cam-1/detections", json.dumps(body).encode(), now).records
    db.store(recs, now)
    monkeypatch.setattr(maintenance, "BUDGET_S", 0.0)
    m = Maintenance(CollectorConfig(retention_results_days=1, maintenance_batch=10))
    try:
        assert m.history(db, now) is True and m.purged["results"] == 10  # one batch, out of time
        m._next = 0.0
        assert m.history(db, now) is True and m.purged["results"] == 20
        m._next = 0.0
        assert m.history(db, now) is False and m.purged["results"] == 25  # the rest: done
        assert db.message_stats()[0] == 5 and db.gap_rows("cam-1") == []
        off = Maintenance(CollectorConfig(maintenance_batch=10))  # no age: nothing deleted
        assert off.history(db, now + 9 * DAY) is False and off.purged["results"] == 0
    finally:
        db.close()


def test_postgresql_partitions_made_ahead_and_dropped_by_the_maintenance(url: str) -> None:
    if not url.startswith("postgresql"):
        return  # day partitions are PostgreSQL's
    from edge_agent.adapters.collector import partitions

    now = time.time()

    def recs(first: int, n: int, ts: float) -> list[Record]:
        out: list[Record] = []
        for s in range(first, first + n):
            body = {"id": f"r{s}", "seq": s, "boot": 1, "device_id": "cam-1", "ts": ts}
            out += parse("edge", "edge/cam-1/detections", json.dumps(body).encode(), now).records
        return out

    db = CollectorDb(url)
    db.migrate()
    try:
        db.store(recs(1, 20, now - 3 * DAY) + recs(21, 5, now) + recs(28, 1, 0.0), now)  # one at 1970
        assert partitions.convert(db, now)[1] < 20  # not a partition per day since 1970
        assert db._x("SELECT COUNT(*) FROM messages_default").fetchone()[0] == 1
        assert purge.purge_batch(db, "results", now - 400 * DAY, 10) == 1  # batches reach it
        assert db.gap_rows("cam-1") == [(26, 27, 1, 1)]  # the expired 28 still bounds the real gap
        db.store(recs(26, 2, now + 10 * DAY), now)  # a clock 10 days ahead: the default partition
        default = "SELECT COUNT(*) FROM messages_default"
        assert db._x(default).fetchone()[0] == 2
        m = Maintenance(
            CollectorConfig(retention_results_days=1, retention_objects_days=1, retention_counts_days=1)
        )
        assert m.history(db, now + 5 * DAY) is False  # 5 days later: made ahead, old days dropped
        assert db._x(default).fetchone()[0] == 0  # moved into their own day
        names = {p.name for p in partitions.leaves(db) or []}
        assert partitions.name_of(partitions._day(now + 12 * DAY)) in names
        assert partitions.name_of(partitions._day(now - 3 * DAY)) not in names  # dropped whole
        assert m.purged["results"] == 25 and db.gap_rows("cam-1") == []
        assert db.message_stats()[0] == 2
    finally:
        db.close()
