"""The Grafana dashboard (deploy/grafana/edge-agent-fleet.json, PostgreSQL datasource) without
Grafana: every panel's every query, and the device variable's, with Grafana's macros expanded as
its PostgreSQL datasource expands them, runs on the real schema (all migrations) of a throw-away
PostgreSQL over a seeded fleet, returns rows in the shape its format wants, and its time filter
filters (a range before the data returns nothing)."""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from support.collector import NOW, REPO, Postgres

from edge_agent.adapters.collector.db import CollectorDb
from edge_agent.core.messages.fleet import Record, parse

pytestmark = pytest.mark.slow
DASHBOARD = REPO / "deploy" / "grafana" / "edge-agent-fleet.json"
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def seconds(text: str) -> int:
    m = re.fullmatch(r"'?(\d+)([smhd])'?", text.strip())
    assert m, text
    return int(m.group(1)) * UNITS[m.group(2)]


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).isoformat()


def expand(sql: str, frm: float, to: float, devices: list[str]) -> str:
    """Grafana's PostgreSQL macros (as of Grafana 10): $__timeFilter, $__timeGroupAlias, $__interval."""
    sql = sql.replace("$__interval", "1m")

    def group(m: re.Match[str]) -> str:
        s = seconds(m.group(2))
        return f'floor(extract(epoch from {m.group(1)})/{s})*{s} AS "time"'

    sql = re.sub(r"\$__timeGroupAlias\((\w+),\s*([^)]+)\)", group, sql)
    sql = re.sub(
        r"\$__timeFilter\((\w+)\)", lambda m: f"{m.group(1)} BETWEEN '{iso(frm)}' AND '{iso(to)}'", sql
    )
    sql = sql.replace("$device", ", ".join("'" + d.replace("'", "''") + "'" for d in devices))
    assert "$" not in sql, sql
    return sql


def msg(dev: str, seq: int, kind: str, t: float, **body: Any) -> list[Record]:
    full = {"seq": seq, "boot": 1, "device_id": dev, "ts": t, **body}
    return parse("edge", f"edge/{dev}/{kind}", json.dumps(full).encode(), t).records


def status(dev: str, t: float, **extra: Any) -> Any:
    body = {
        "device_id": dev,
        "state": "running",
        "ts": t,
        "fps": 8.0,
        "errors": 1,
        "queue": {"pending": 4, "oldest_unconfirmed_s": 3.0, "disk_free_bytes": 2**33, "crashes": 0},
        "models": {"detector": {"id": "m1"}},
        **extra,
    }
    return parse("edge", f"edge/{dev}/status", json.dumps(body).encode(), t).status


def seed(url: str) -> None:
    db = CollectorDb(url)
    try:
        db.conn.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public")
        db.migrate()
        det = {"label": "person", "class_id": 0, "confidence": 0.9, "box": [0, 0, 1, 1]}
        verdict = {"last": {"outcome": "refused", "at": NOW, "detail": "gate: recall 0.4 < 0.9"}}
        for dev in ("cam-1", "cam-2"):
            records: list[Record] = []
            for i in range(6):
                t = NOW + 600 * i
                counts = {
                    "interval_s": 600,
                    "from": t - 600,
                    "to": t,
                    "lines": {"door": {"in": i, "out": 1, "total_in": i, "total_out": 1}},
                    "zones": {"till": {"entered": 1, "total_entered": i, "occupancy": 2}},
                }
                records += msg(dev, 2 * i + 1, "counts", t, **counts)
                records += msg(dev, 2 * i + 2, "detections", t, detections=[det, {**det, "label": "car"}])
            statuses = [status(dev, NOW + 600 * i, model_update=verdict) for i in range(6)]
            db.store(records, NOW + 3600, statuses=statuses)
    finally:
        db.close()


def test_every_panel_query_runs_on_the_real_schema(postgres: Postgres) -> None:
    seed(postgres.url)
    dash = json.loads(DASHBOARD.read_text())
    assert dash["__inputs"][0]["pluginId"] == "grafana-postgresql-datasource"
    db = CollectorDb(postgres.url)
    try:
        (var,) = dash["templating"]["list"]
        devices = [r[0] for r in db.conn.execute(var["query"]).fetchall()]
        assert devices == ["cam-1", "cam-2"]
        ran = 0
        for panel in dash["panels"]:
            assert panel["datasource"]["uid"] == "${DS_EDGE}", panel["title"]
            for target in panel["targets"]:
                sql = target["rawSql"]
                cur = db.conn.execute(expand(sql, NOW - 60, NOW + 7200, devices[:1]))
                cols = [c.name for c in cur.description]
                rows = cur.fetchall()
                assert rows, f"{panel['title']} {target['refId']}: no rows\n{sql}"
                if target["format"] == "time_series":
                    assert cols == ["time", "metric", "value"], (panel["title"], cols)
                    assert all(
                        r[1].startswith("cam-1") or panel["title"].startswith("Detections") for r in rows
                    )
                if "$__timeFilter" in sql:  # the filter filters
                    before = db.conn.execute(expand(sql, NOW - 7200, NOW - 3600, devices)).fetchall()
                    assert before == [], panel["title"]
                ran += 1
        assert ran >= 14
        by_title = {p["title"]: p for p in dash["panels"]}
        sql = by_title["Detections per class per hour"]["targets"][0]["rawSql"]
        got = db.conn.execute(expand(sql, NOW - 60, NOW + 7200, devices)).fetchall()
        assert {r[1] for r in got} == {"person", "car"} and sum(int(r[2]) for r in got) == 24
        sql = by_title["Model update verdicts"]["targets"][0]["rawSql"]
        got = db.conn.execute(expand(sql, NOW - 60, NOW + 7200, devices)).fetchall()
        assert [(r[1], r[2]) for r in got] == [("cam-1", "refused"), ("cam-2", "refused")]  # once each
    finally:
        db.close()


def test_the_dashboard_is_importable_json() -> None:
    dash = json.loads(Path(DASHBOARD).read_text())
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids)) and dash["uid"] == "edge-agent-fleet"
    assert all(t["rawQuery"] and t["editorMode"] == "code" for p in dash["panels"] for t in p["targets"])
