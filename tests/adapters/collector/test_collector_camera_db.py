"""The camera column on SQLite and on a real PostgreSQL: schema 4 on a database of schema 3 that
already holds rows (they keep a NULL camera), camera records stored with their camera (conflicts
too), and the index that serves "this device's camera's rows by time"."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.collector import NOW, rec, status

from edge_agent.adapters.collector import db as collector_db
from edge_agent.adapters.collector.db import CollectorDb
from edge_agent.core.messages.fleet import Record, parse


def cam_rec(dev: str, camera: str, seq: int, kind: str = "objects", **extra: Any) -> list[Record]:
    body = {"id": f"{dev}-{camera}-{seq}", "seq": seq, "boot": 1, "device_id": dev, "camera": camera}
    body.update(ts=NOW + seq, **extra)
    return parse("edge", f"edge/{dev}/{camera}/{kind}", json.dumps(body).encode(), NOW).records


def rows(db: CollectorDb, table: str = "messages") -> list[tuple[Any, ...]]:
    return [tuple(r) for r in db._x(f"SELECT device, seq, kind, camera FROM {table} ORDER BY device, seq")]


def test_schema_4_on_a_schema_3_database_keeps_its_rows_with_no_camera(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = collector_db.migrations
    monkeypatch.setattr(collector_db, "migrations", lambda dialect: real(dialect)[:3])
    db = CollectorDb(url)
    try:
        assert db.migrate() == 3
        cols = "device, boot, seq, kind, msg_id, time, received, body"
        t, j = ("?", "?") if db.dialect == "sqlite" else ("to_timestamp(?)", "?::jsonb")
        for seq in (1, 2):  # what a collector of schema 3 stored
            db._x(
                f"INSERT INTO messages ({cols}) VALUES (?, ?, ?, ?, ?, {t}, {t}, {j})",
                ("d1", 1, seq, "detections", f"r{seq}", NOW + seq, NOW, json.dumps({"seq": seq})),
            )
        monkeypatch.setattr(collector_db, "migrations", real)
        assert db.migrate() == len(real(db.dialect)) >= 4
        names = [n for (n,) in db._x("SELECT name FROM schema_version ORDER BY version")]
        assert names[3] == "0004_camera.sql"
        assert rows(db) == [("d1", 1, "detections", None), ("d1", 2, "detections", None)]
        # the insert paths of schema 4 on the migrated database: legacy and camera rows side by side
        assert (
            db.store(rec("d1", 3) + cam_rec("d1", "gate", 4) + cam_rec("d1", "yard", 5, "counts"), NOW) == 3
        )
        assert rows(db)[2:] == [
            ("d1", 3, "detections", None),
            ("d1", 4, "objects", "gate"),
            ("d1", 5, "counts", "yard"),
        ]
        (d,) = db.devices()
        assert (d["messages"], d["gaps"]) == (5, 0) and "cameras" not in d
    finally:
        db.close()


def test_camera_records_and_their_conflicts_keep_their_camera(url: str) -> None:
    db = CollectorDb(url)
    try:
        db.migrate()
        assert db.store(cam_rec("d1", "gate", 1) + cam_rec("d1", "yard", 2) + rec("d2", 1), NOW) == 3
        # the same (device, boot, seq) from another camera is a conflict, kept with its camera
        assert db.store(cam_rec("d1", "yard", 1), NOW) == 0
        assert rows(db) == [
            ("d1", 1, "objects", "gate"),
            ("d1", 2, "objects", "yard"),
            ("d2", 1, "detections", None),
        ]
        assert rows(db, "conflicts") == [("d1", 1, "objects", "yard")]
        # the rows of one device's camera by time, the view a dashboard asks for
        got = db._x(
            "SELECT seq FROM messages WHERE device = ? AND camera = ? ORDER BY time", ("d1", "yard")
        ).fetchall()
        assert [int(s) for (s,) in got] == [2]
    finally:
        db.close()


def test_the_camera_index_serves_a_devices_camera_by_time(url: str) -> None:
    db = CollectorDb(url)
    try:
        db.migrate()
        db.store([r for s in range(1, 200) for r in cam_rec("d1", "gate" if s % 2 else "yard", s)], NOW)
        since = "?" if db.dialect == "sqlite" else "to_timestamp(?)"
        q = f"SELECT seq, time FROM messages WHERE device = ? AND camera = ? AND time >= {since} ORDER BY time"
        if db.dialect == "sqlite":
            plan = " ".join(str(r[-1]) for r in db._x("EXPLAIN QUERY PLAN " + q, ("d1", "gate", NOW)))
        else:
            db._x("SET enable_seqscan = off")  # 200 rows: the planner would scan; can it use the index?
            plan = " ".join(str(r[0]) for r in db._x("EXPLAIN " + q, ("d1", "gate", NOW)))
        assert "messages_device_camera_time" in plan, plan
        assert "TEMP B-TREE" not in plan and "Sort" not in plan, plan  # the index gives the order
    finally:
        db.close()


def test_fleet_devices_carry_the_stored_cameras_map_only_when_reported(url: str) -> None:
    cams = {"gate": {"state": "streaming", "fps": 5.0}, "yard": {"state": "failed", "fps": 0}}
    db = CollectorDb(url)
    try:
        db.migrate()
        st = status("d1", "running")
        assert st is not None
        body = json.loads(st.body)
        with_cams = parse(
            "edge", "edge/d1/status", json.dumps({**body, "cameras": cams}).encode(), NOW
        ).status
        # a "cameras" that is no object (here a string that holds one) is no cameras map
        as_text = {**body, "device_id": "d3", "cameras": json.dumps(cams)}
        text_cams = parse("edge", "edge/d3/status", json.dumps(as_text).encode(), NOW).status
        db.store([], NOW, statuses=[with_cams, status("d2", "running"), text_cams])  # type: ignore[list-item]
        by_dev = {d["device"]: d for d in db.devices()}
        assert by_dev["d1"]["cameras"] == cams
        assert "cameras" not in by_dev["d2"] and "cameras" not in by_dev["d3"]
    finally:
        db.close()
