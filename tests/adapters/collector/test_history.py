"""The health history table and the views of schema 4, on SQLite and a real PostgreSQL: every
status stored is a row (also one that loses the devices upsert), thinning and expiry delete what
they should in bounded batches, the per-device metric rows count gaps as the gaps view does, and
the views read counts, detections and health (a malformed body gives NULLs, never an error)."""

from __future__ import annotations

import json
from typing import Any

from support.collector import NOW, rec

from edge_agent.adapters.collector import history
from edge_agent.adapters.collector.db import CollectorDb
from edge_agent.core.messages.fleet import DeviceStatus, Record, parse


def st(dev: str, ts: float, state: str = "running", **extra: Any) -> DeviceStatus:
    body = {
        "device_id": dev,
        "state": state,
        "ts": ts,
        "fps": 9.0,
        "queue": {"pending": 2, "disk_free_bytes": 5 * 2**30, "crashes": 1, "disk_full": False},
        "models": {"detector": {"id": "m1"}},
        **extra,
    }
    s = parse("edge", f"edge/{dev}/status", json.dumps(body).encode(), ts + 0.5).status
    assert s is not None
    return s


def msg(dev: str, seq: int, kind: str, **body: Any) -> list[Record]:
    full = {"seq": seq, "boot": 1, "device_id": dev, "ts": NOW + seq, **body}
    return parse("edge", f"edge/{dev}/{kind}", json.dumps(full).encode(), NOW).records


def opened(url: str) -> CollectorDb:
    db = CollectorDb(url)
    db.migrate()
    return db


def test_every_status_is_a_history_row(url: str) -> None:
    db = opened(url)
    try:
        db.store([], NOW, statuses=[st("cam-1", NOW), st("cam-1", NOW + 10, "offline")])
        db.store([], NOW + 20, statuses=[st("cam-1", NOW - 100)])  # older: loses the upsert, still history
        db.store(
            [],
            NOW + 30,
            statuses=[
                st(
                    "cam-2",
                    NOW + 30,
                    model_update={"last": {"outcome": "rolled_back", "at": NOW, "detail": "trial"}},
                )
            ],
        )
        rows = history.rows(db, "cam-1", None, 100)
        assert [(r["time"], r["state"]) for r in rows] == [
            (NOW - 100, "running"),
            (NOW, "running"),
            (NOW + 10, "offline"),
        ]
        r = rows[1]
        assert (r["fps"], r["backlog"], r["disk_free_bytes"], r["crashes"], r["model_id"]) == (
            9.0,
            2,
            5 * 2**30,
            1,
            "m1",
        )
        assert r["disk_full"] is False and r["received"] == NOW
        assert [x["time"] for x in history.rows(db, "cam-1", NOW - 1, 100)] == [NOW, NOW + 10]
        assert [x["time"] for x in history.rows(db, "cam-1", None, 2)] == [NOW, NOW + 10]  # the newest 2
        (v,) = history.rows(db, "cam-2", None, 10, body=True)
        assert (v["update_outcome"], v["update_detail"], v["body"]["state"]) == (
            "rolled_back",
            "trial",
            "running",
        )
        assert history.known(db, "cam-1") and not history.known(db, "cam-9")
        db.retire("cam-1", purge=True)
        assert history.rows(db, "cam-1", None, 10) == []
    finally:
        db.close()


def test_thinning_and_expiry_in_bounded_batches(url: str) -> None:
    db = opened(url)
    try:
        # one device, a status every 10 s for 2 hours, then a state change in the last bucket
        statuses = [st("cam-1", NOW + 10 * i) for i in range(720)] + [st("cam-1", NOW + 7195, "offline")]
        for i in range(0, len(statuses), 100):
            db.store([], NOW, statuses=statuses[i : i + 100])
        db.store([], NOW, statuses=[st("cam-2", NOW - 10 * 86400)])  # past the keep age
        assert history.expire(db, NOW - 86400, 1000) == 1
        total = 0
        while True:
            deleted, fetched = history.thin_batch(db, NOW + 7200, 600, 50)
            assert fetched <= 50
            total += deleted
            if fetched < 50:
                break
        rows = history.rows(db, "cam-1", None, 10_000)
        # 12 buckets of 600 s: one running each, plus the offline one of the last bucket; a bucket
        # split across batches may keep two
        assert 13 <= len(rows) <= 13 + 721 // 50 and total == 721 - len(rows)
        assert rows[-1]["state"] == "offline"
        assert history.thin_batch(db, NOW + 7200, 600, 50) == (0, 0)  # what is kept is not re-thinned
        newer = st("cam-1", NOW + 9000)
        db.store([], NOW, statuses=[newer, newer])
        assert history.thin_batch(db, NOW + 7200, 600, 50) == (0, 0)  # newer than the full age: kept
    finally:
        db.close()


def test_metric_rows_count_gaps_like_the_gaps_view(url: str) -> None:
    db = opened(url)
    try:
        db.store(
            rec("cam-1", 2) + rec("cam-1", 3) + rec("cam-1", 7) + rec("cam-2", 1),
            NOW,
            statuses=[st("cam-1", NOW)],
        )
        rows, total = history.metric_rows(db, 10)
        assert total == 2
        by = {r["device"]: r for r in rows}
        assert (by["cam-1"]["gaps"], by["cam-1"]["missing"]) == (2, 4)  # 1 and 4..6
        assert (by["cam-2"]["gaps"], by["cam-2"]["missing"]) == (0, 0)
        view = {d["device"]: (d["gaps"], d["missing"]) for d in db.devices()}
        assert view == {"cam-1": (2, 4), "cam-2": (0, 0)}
        assert by["cam-1"]["health"].backlog == 2 and by["cam-2"]["health"] is None
        assert by["cam-1"]["state"] == "running" and by["cam-1"]["last_seen"] == NOW
        assert [r["device"] for r in history.metric_rows(db, 1)[0]] == ["cam-1"]  # bounded
        assert history.gap_rows_all(db) == [("cam-1", 1, 1, None, 1), ("cam-1", 4, 6, 1, 1)]
    finally:
        db.close()


def test_the_views_read_counts_detections_and_health(url: str) -> None:
    db = opened(url)
    try:
        counts = {
            "interval_s": 60,
            "from": NOW,
            "to": NOW + 60,
            "lines": {"door": {"in": 3, "out": 1, "total_in": 3, "total_out": 1}, "bad": "x"},
            "zones": {"till": {"entered": 2, "total_entered": 2, "occupancy": 1}},
        }
        dets = [
            {"label": "person", "class_id": 0, "confidence": 0.9, "box": [0, 0, 1, 1]},
            {"label": "person", "class_id": 0, "confidence": 0.8, "box": [0, 0, 1, 1]},
            {"label": "car", "class_id": 2, "confidence": "high", "box": [0, 0, 1, 1]},
        ]
        records = msg("cam-1", 1, "counts", **counts) + msg("cam-1", 2, "detections", detections=dets)
        records += msg("cam-1", 3, "counts", lines=[1], zones=None) + msg(
            "cam-1", 4, "detections", detections={"a": 1}
        )
        records += msg("cam-1", 5, "counts", lines={"door": {"in": "many"}}, zones={"till": 5})
        db.store(records, NOW, statuses=[st("cam-1", NOW), st("cam-1", NOW + 1, "offline")])

        def q(sql: str) -> list[tuple[Any, ...]]:
            return [tuple(r) for r in db._x(sql).fetchall()]

        lines = q("SELECT device, line, crossed_in, crossed_out FROM line_counts ORDER BY line, crossed_in")
        got = sorted(
            (d, ln, -1 if i is None else int(i), -1 if o is None else int(o)) for d, ln, i, o in lines
        )
        assert got == [("cam-1", "door", -1, -1), ("cam-1", "door", 3, 1)]  # "bad" and "many": no row, NULLs
        zones = q("SELECT zone, entered, occupancy FROM zone_counts WHERE entered IS NOT NULL")
        assert [(z, int(e), int(o)) for z, e, o in zones] == [("till", 2, 1)]
        labels = q(
            "SELECT label, COUNT(*), COUNT(confidence) FROM detection_labels GROUP BY label ORDER BY label"
        )
        assert [(lb, int(n), int(c)) for lb, n, c in labels] == [("car", 1, 0), ("person", 2, 2)]
        hourly = q("SELECT label, detections FROM detections_per_hour ORDER BY label")
        assert [(lb, int(n)) for lb, n in hourly] == [("car", 1), ("person", 2)]
        health = q("SELECT state, online, backlog FROM device_health ORDER BY time")
        assert [(s, int(o), int(b)) for s, o, b in health] == [("running", 1, 2), ("offline", 0, 2)]
    finally:
        db.close()
