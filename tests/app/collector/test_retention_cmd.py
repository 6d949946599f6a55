"""``edge-agent fleet retention [--dry-run]`` and ``fleet db partition`` as a user runs them: the
dry run counts and deletes nothing, the run deletes what is past the ages of ``--config`` or the
flags, bad input is one line, and partitioning is PostgreSQL's (once)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from support.collector import fleet

from edge_agent.adapters.collector.db import CollectorDb
from edge_agent.core.messages.fleet import parse

pytestmark = pytest.mark.slow
DAY = 86400.0


def seed(url: str, now: float) -> None:
    db = CollectorDb(url)
    db.migrate()
    for s in range(1, 41):
        kind = "counts" if s % 4 == 0 else "detections"
        body = {
            "id": f"r{s}",
            "seq": s,
            "boot": 1,
            "device_id": "d1",
            "ts": now - (3 if s <= 20 else 0) * DAY,
        }
        db.store(parse("edge", f"edge/d1/{kind}", json.dumps(body).encode(), now).records, now)
    db.close()


def left(url: str) -> int:
    db = CollectorDb(url)
    try:
        return int(db._x("SELECT COUNT(*) FROM messages").fetchone()[0])
    finally:
        db.close()


def test_dry_run_then_run_from_the_config(tmp_path: Path, url: str) -> None:
    seed(url, time.time())
    out = fleet("retention", "--db", url, "--results-days", "2", "--dry-run", "--json")
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["rows"]["results"] == 15 and "counts" not in got["rows"] and left(url) == 40
    (tmp_path / "c.toml").write_text("[collector]\nretention_results_days = 2\nretention_counts_days = 2.5\n")
    out = fleet("retention", "--db", url, "--config", str(tmp_path / "c.toml"))
    assert out.returncode == 0, out.stderr
    assert "results: older than 2 days: deleted 15" in out.stdout
    assert "counts: older than 2.5 days: deleted 5" in out.stdout and "objects: kept for ever" in out.stdout
    assert left(url) == 20
    gaps = json.loads(fleet("gaps", "d1", "--db", url, "--json").stdout)
    assert gaps["gaps"] == [] and gaps["expired"]["rows"] == 20


def test_bad_input_is_one_line(tmp_path: Path, url: str) -> None:
    seed(url, time.time())
    out = fleet("retention", "--db", url, "--results-days", "-1")
    assert out.returncode == 2 and "Traceback" not in out.stderr and "from 0" in out.stderr
    (tmp_path / "c.toml").write_text("[collector]\nretention_counts_days = -3\n")
    out = fleet("retention", "--db", url, "--config", str(tmp_path / "c.toml"))
    assert out.returncode == 1 and "retention_counts_days" in out.stderr and "Traceback" not in out.stderr
    out = fleet("db", "partition", "--db", url)
    if url.startswith("sqlite"):
        assert out.returncode == 1 and "SQLite" in out.stderr and len(out.stderr.strip().splitlines()) == 1
        return
    assert out.returncode == 0, out.stderr
    assert "messages: 40 rows, now" in out.stdout
    again = fleet("db", "partition", "--db", url)
    assert again.returncode == 1 and "partitioned already" in again.stderr and "Traceback" not in again.stderr
    assert fleet("retention", "--db", url, "--results-days", "2").returncode == 0 and left(url) == 25


def test_an_older_schema_is_one_line(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "old.db"
    c = sqlite3.connect(path)
    c.execute("CREATE TABLE schema_version (version INTEGER PRIMARY KEY, name TEXT NOT NULL)")
    c.execute("INSERT INTO schema_version VALUES (6, '0006_history.sql')")
    c.commit()
    c.close()
    out = fleet("retention", "--db", f"sqlite:///{path}", "--results-days", "1")
    assert out.returncode == 1 and "no retention tables" in out.stderr and "Traceback" not in out.stderr
