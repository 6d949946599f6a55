"""The collector's housekeeping (app/collector/maintenance.py) beyond test_maintenance.py: counts
that add up over batches within one pass, the pacing after a pass, metrics read only when due, and
each failure logged as one line naming the step (ingest goes on)."""

from __future__ import annotations

import json
import logging
import sqlite3
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
from edge_agent.core.messages.fleet import parse

DAY = 86400.0


def results(db: CollectorDb, now: float, old: int, new: int) -> None:
    recs = []
    for s in range(1, old + new + 1):
        ts = now - (3 if s <= old else 0) * DAY
        body = {"id": f"r{s}", "seq": s, "boot": 1, "device_id": "cam-1", "ts": ts}
        recs += parse("edge", "edge/cam-1/detections", json.dumps(body).encode(), now).records
    db.store(recs, now)


def test_a_pass_within_its_budget_adds_up_every_batch_and_waits_its_interval(tmp_path: Path) -> None:
    now = time.time()
    db = CollectorDb(sqlite_url(tmp_path / "fleet.db"))
    db.migrate()
    results(db, now, 53, 4)
    m = Maintenance(CollectorConfig(retention_results_days=1, maintenance_batch=10, maintenance_every_s=600))
    try:
        t0 = time.monotonic()
        assert m.history(db, now) is False
        assert m.purged["results"] == 53  # 10 + 10 + 10 + 10 + 10 + 3: each batch counted
        assert db.message_stats()[0] == 4
        assert m._next >= t0 + 600  # nothing left: the next pass after maintenance_every_s
    finally:
        db.close()


def test_work_left_brings_the_next_pass_after_twice_the_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = time.time()
    db = CollectorDb(sqlite_url(tmp_path / "fleet.db"))
    db.migrate()
    results(db, now, 25, 0)
    monkeypatch.setattr(maintenance, "BUDGET_S", 0.0)
    m = Maintenance(CollectorConfig(retention_results_days=1, maintenance_batch=10, maintenance_every_s=3600))
    try:
        assert m.history(db, now) is True and m.purged["results"] == 10  # a full batch, no time left
        assert m._next <= time.monotonic() + 60  # again soon (2 x the budget), not in an hour
    finally:
        db.close()


def test_per_device_metrics_are_read_when_due_not_at_every_round(tmp_path: Path) -> None:
    now = time.time()
    db = CollectorDb(sqlite_url(tmp_path / "fleet.db"))
    db.migrate()
    results(db, now, 0, 1)
    m = Maintenance(CollectorConfig(metrics_port=9999))
    met = Metrics()
    try:
        m.device_metrics(db, met)
        assert [r["device"] for r in met.device_rows] == ["cam-1"]
        met.device_rows = []
        m.device_metrics(db, met)  # at once again: not due (METRICS_EVERY_S)
        assert met.device_rows == []
        m._metrics_at -= maintenance.METRICS_EVERY_S + 1
        m.device_metrics(db, met)
        assert [r["device"] for r in met.device_rows] == ["cam-1"]
    finally:
        db.close()


def _broken(tmp_path: Path) -> CollectorDb:
    db = CollectorDb(sqlite_url(tmp_path / "fleet.db"))
    db.migrate()
    return db


def test_each_failing_step_is_one_line_naming_it_and_nothing_escapes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    db = _broken(tmp_path)

    def fail(*a: object, **k: object) -> object:
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(history, "expire", fail)
    monkeypatch.setattr(purge, "purge_batch", fail)
    monkeypatch.setattr(history, "metric_rows", fail)
    m = Maintenance(CollectorConfig(retention_results_days=1, metrics_port=9999))
    met = Metrics()
    try:
        with caplog.at_level(logging.WARNING, logger="edge_agent.collector"):
            assert m.history(db, time.time()) is False  # no work left claimed: tried again later
            m.device_metrics(db, met)
        lines = [r.getMessage() for r in caplog.records]
        assert lines == [
            "collector: health history maintenance failed: disk I/O error",
            "collector: retention failed: disk I/O error",
            "collector: reading the per-device metrics failed: disk I/O error",
        ]
        assert met.device_rows == [] and m.purged["results"] == 0
    finally:
        db.close()
