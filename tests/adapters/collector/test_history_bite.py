"""The health history table (adapters/collector/history.py) as `fleet history`, the maintenance
and the metrics read it, on SQLite and a real PostgreSQL, beyond test_history.py: a full disk and
an unknown one read back as such, ``--since`` takes a row at that very time, statuses of one time
come back in the order stored, the body as an object, a device known by its messages or its
history only, expiry and thinning take the oldest rows and whole batches of more than 500, each
device keeps its own newest row of a bucket, a full batch leaves its newest bucket for the next
one, and the fleet-wide reads (gaps in order, counters of a device without a status, metric
figures)."""

from __future__ import annotations

import json
from typing import Any

from support.collector import NOW, rec

from edge_agent.adapters.collector import history
from edge_agent.adapters.collector.db import CollectorDb
from edge_agent.core.messages.fleet import DeviceStatus, parse


def st(dev: str, ts: float, state: str = "running", **queue: Any) -> DeviceStatus:
    body = {
        "device_id": dev,
        "state": state,
        "ts": ts,
        "queue": {"pending": 2, **queue},
        "models": {"detector": {"id": "m1"}},
    }
    s = parse("edge", f"edge/{dev}/status", json.dumps(body).encode(), ts + 0.5).status
    assert s is not None
    return s


def opened(url: str) -> CollectorDb:
    db = CollectorDb(url)
    db.migrate()
    return db


def test_a_full_and_an_unknown_disk_read_back_as_such(url: str) -> None:
    db = opened(url)
    try:
        full = st("cam-1", NOW, disk_full=True, crashes=3)
        bare = st("cam-1", NOW + 1)._replace(health=None)  # no row worked out: made from the body
        db.store([], NOW + 5, statuses=[full, bare])
        a, b = history.rows(db, "cam-1", None, 10)
        assert a["disk_full"] is True and a["crashes"] == 3 and a["backlog"] == 2
        assert b["disk_full"] is None and b["crashes"] is None and b["model_id"] == "m1"
        assert "body" not in a and (a["time"], a["received"]) == (NOW, NOW + 5)
    finally:
        db.close()


def test_since_takes_a_row_at_that_time_and_ties_keep_the_stored_order(url: str) -> None:
    db = opened(url)
    try:
        db.store([], NOW, statuses=[st("cam-1", NOW - 10), st("cam-1", NOW), st("cam-1", NOW, "offline")])
        db.store([], NOW, statuses=[st("cam-2", NOW + 1)])
        got = history.rows(db, "cam-1", NOW, 10)
        assert [(r["time"], r["state"]) for r in got] == [(NOW, "running"), (NOW, "offline")]
        assert [r["state"] for r in history.rows(db, "cam-1", None, 1)] == ["offline"]  # the newest
        assert len(history.rows(db, "cam-1", None, 10)) == 3
        (r,) = history.rows(db, "cam-2", None, 10, body=True)
        assert isinstance(r["body"], dict) and r["body"]["device_id"] == "cam-2"
    finally:
        db.close()


def test_a_device_is_known_by_its_messages_or_its_history_alone(url: str) -> None:
    db = opened(url)
    try:
        db.store(rec("cam-1", 1), NOW)  # messages, no status
        db.store([], NOW, statuses=[st("cam-2", NOW)])
        assert history.known(db, "cam-1") and history.known(db, "cam-2")
        db.retire("cam-2")  # its devices row goes, its history stays
        assert db._x("SELECT 1 FROM devices WHERE device = 'cam-2'").fetchone() is None
        assert history.known(db, "cam-2") and not history.known(db, "cam-3")
    finally:
        db.close()


def test_expiry_takes_the_oldest_rows_first_and_keeps_one_at_the_cutoff(url: str) -> None:
    db = opened(url)
    try:
        db.store([], NOW, statuses=[st("cam-1", NOW - t) for t in (30, 10, 50, 20, 0)])
        assert history.due(db, NOW) == 4 and history.due(db, NOW - 20) == 2
        assert history.expire(db, NOW, 2) == 2
        assert [r["time"] for r in history.rows(db, "cam-1", None, 10)] == [NOW - 20, NOW - 10, NOW]
        assert history.expire(db, NOW, 5) == 2 and history.expire(db, NOW, 5) == 0
        assert [r["time"] for r in history.rows(db, "cam-1", None, 10)] == [NOW]
    finally:
        db.close()


def test_a_thinning_batch_of_more_than_500_rows_each_way(url: str) -> None:
    """600 buckets of 10 s with two statuses each: 600 rows to delete and 600 to mark kept, both
    past the 500 ids of one statement."""
    db = opened(url)
    try:
        statuses = [st("cam-1", NOW + 10 * b + d) for b in range(600) for d in (1, 6)]
        for i in range(0, len(statuses), 400):
            db.store([], NOW, statuses=statuses[i : i + 400])
        assert history.thin_batch(db, NOW + 6000, 10, 2000) == (600, 1200)
        rows = history.rows(db, "cam-1", None, 10_000)
        assert [r["time"] for r in rows] == [NOW + 10 * b + 6 for b in range(600)]  # each bucket's newest
        assert history.thin_batch(db, NOW + 6000, 10, 2000) == (0, 0)  # every kept row marked
    finally:
        db.close()


def test_thinning_keeps_a_state_change_and_a_verdict_inside_a_bucket(url: str) -> None:
    db = opened(url)
    try:
        verdict = {"last": {"outcome": "installed", "at": NOW + 3, "detail": "ok"}}
        body = {"device_id": "cam-1", "state": "running", "ts": NOW + 4, "model_update": verdict}
        v = parse("edge", "edge/cam-1/status", json.dumps(body).encode(), NOW + 5).status
        assert v is not None
        db.store(
            [], NOW, statuses=[st("cam-1", NOW + 1), st("cam-1", NOW + 2, "offline"), v, st("cam-1", NOW + 5)]
        )
        assert history.thin_batch(db, NOW + 100, 60, 10) == (1, 4)
        got = [(r["time"], r["state"], r["update_outcome"]) for r in history.rows(db, "cam-1", None, 10)]
        assert got == [
            (NOW + 2, "offline", None),
            (NOW + 4, "running", "installed"),
            (NOW + 5, "running", None),
        ]
    finally:
        db.close()


def test_the_fleet_wide_reads(url: str) -> None:
    db = opened(url)
    try:
        db.store(rec("b", 3) + rec("b", 5) + rec("a", 2) + rec("a", 9) + rec("a", 1, boot=2), NOW)
        db.store([], NOW, statuses=[st("a", NOW, dropped=4, crashes=2)])
        # boot 2 starting at 1 leaves a's seq 1 of boot 1 no gap (the gaps view's rule)
        assert history.gap_rows_all(db) == [("a", 3, 8, 1, 1), ("b", 1, 2, None, 1), ("b", 4, 4, 1, 1)]
        counters = history.counters_all(db)
        assert counters["b"] == dict.fromkeys(counters["b"], 0) and len(counters["b"]) == 7
        assert (counters["a"]["dropped"], counters["a"]["crashes"], counters["a"]["lost"]) == (4, 2, 0)
        rows, total = history.metric_rows(db, 10)
        by = {r["device"]: r for r in rows}
        assert total == 2 and [r["device"] for r in rows] == ["a", "b"]
        assert (by["a"]["gaps"], by["a"]["missing"], by["b"]["gaps"], by["b"]["missing"]) == (1, 6, 2, 3)
        assert {d["device"]: (d["gaps"], d["missing"]) for d in db.devices()} == {"a": (1, 6), "b": (2, 3)}
        assert by["a"]["health"].backlog == 2 and by["b"]["health"] is None
        assert by["a"]["crashes"] == 2 and by["b"]["crashes"] is None  # no status: not reported
        assert by["a"]["conflicts"] == 0 and by["a"]["last_seen"] == NOW
        # the same id with another body: a conflict, counted on the device's row
        other = {"id": "b-3", "seq": 3, "boot": 1, "device_id": "b", "ts": NOW + 3, "x": "other"}
        db.store(parse("edge", "edge/b/detections", json.dumps(other).encode(), NOW).records, NOW)
        assert db.last_conflicts == {"b": 1}
        assert {r["device"]: r["conflicts"] for r in history.metric_rows(db, 10)[0]} == {"a": 0, "b": 1}
        rows, total = history.metric_rows(db, 1)
        assert total == 2 and [r["device"] for r in rows] == ["a"]
    finally:
        db.close()


def test_thinning_keeps_each_devices_newest_of_a_bucket(url: str) -> None:
    db = opened(url)
    try:
        db.store([], NOW, statuses=[st("cam-1", NOW + 1), st("cam-2", NOW + 2), st("cam-1", NOW + 3)])
        assert history.thin_batch(db, NOW + 100, 60, 10) == (1, 3)
        assert [r["time"] for r in history.rows(db, "cam-1", None, 10)] == [NOW + 3]
        assert [r["time"] for r in history.rows(db, "cam-2", None, 10)] == [NOW + 2]
    finally:
        db.close()


def test_a_full_batch_leaves_its_newest_bucket_for_the_next_one(url: str) -> None:
    """A batch of exactly ``batch`` rows may not hold the whole of its newest bucket: that bucket
    waits for the next batch, which also sees the status that came after."""
    db = opened(url)
    try:
        db.store([], NOW, statuses=[st("cam-1", NOW + t) for t in (1, 6, 11, 16)])
        assert history.thin_batch(db, NOW + 100, 10, 4) == (1, 4)  # bucket [0, 10) only
        db.store([], NOW, statuses=[st("cam-1", NOW + 18)])
        assert history.thin_batch(db, NOW + 100, 10, 4) == (2, 3)  # fewer than 4: all of it
        assert [r["time"] for r in history.rows(db, "cam-1", None, 10)] == [NOW + 6, NOW + 18]
    finally:
        db.close()
