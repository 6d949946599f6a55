"""Retention of the collector's messages on SQLite and a real PostgreSQL: a day of retention on
rows stamped two days ago removes them in batches, keeps the newer ones and the other kinds,
keeps every real gap and makes no new one, while another connection goes on ingesting."""

from __future__ import annotations

import json
import math
import threading
import time

from edge_agent.adapters.collector import partitions, purge
from edge_agent.adapters.collector.db import CollectorDb
from edge_agent.core.messages.fleet import Record, parse

DAY = 86400.0


def msg(dev: str, seq: int, ts: float, kind: str = "detections") -> list[Record]:
    body = {"id": f"{dev}-{seq}", "seq": seq, "boot": 1, "device_id": dev, "ts": ts, "lines": {}}
    return parse("edge", f"edge/{dev}/{kind}", json.dumps(body).encode(), time.time()).records


def seed(db: CollectorDb, now: float) -> None:
    old = now - 2 * DAY
    rows = []
    for s in range(1, 201):
        if 50 <= s <= 54:
            continue  # a real gap: never received
        kind = "counts" if s % 10 == 0 else "detections"
        rows += msg("d1", s, (old if s <= 150 else now) + s, kind)
    db.store(rows, now)


def test_a_day_removes_rows_two_days_old_keeps_the_rest_and_the_gaps(url: str) -> None:
    now = time.time()
    db = CollectorDb(url)
    try:
        db.migrate()
        seed(db, now)
        assert db.gap_rows("d1") == [(50, 54, 1, 1)]
        assert purge.due(db, "results", now - DAY) == 145 - 14
        batches = []
        while True:
            n = purge.purge_batch(db, "results", now - DAY, 20)
            batches.append(n)
            if n < 20:
                break
        assert sum(batches) == 131 and max(batches) == 20  # bounded batches
        kinds = db._x("SELECT kind, COUNT(*) FROM messages GROUP BY kind ORDER BY kind").fetchall()
        assert [(k, int(c)) for k, c in kinds] == [("counts", 19), ("detections", 45)]
        assert db.gap_rows("d1") == [(50, 54, 1, 1)]  # the real gap stays, the expired rows are none
        rows, spans, newest = purge.expired_of(db, "d1")
        assert (rows, spans) == (131, 2) and newest is not None and newest < now - DAY
        # the counts go too once they have an age; still no new gap
        assert purge.purge_batch(db, "counts", now - DAY, 1000) == 14
        assert db.gap_rows("d1") == [(50, 54, 1, 1)]
        assert purge.expired_of(db, "d1")[:2] == (145, 2)
        assert db.devices()[0]["gaps"] == 1 and db.devices()[0]["missing"] == 5
        assert db.retire("d1", purge=True) is not None and purge.expired_of(db, "d1")[:2] == (0, 0)
    finally:
        db.close()


def test_ingest_goes_on_during_the_purge(url: str) -> None:
    now = time.time()
    db = CollectorDb(url)
    db.migrate()
    db.store([r for s in range(1, 3001) for r in msg("old", s, now - 2 * DAY + s)], now)
    stored: list[int] = []
    errors: list[BaseException] = []

    def ingest() -> None:
        w = CollectorDb(url)
        try:
            for i in range(60):
                stored.append(
                    w.store([r for s in range(i * 20 + 1, i * 20 + 21) for r in msg("new", s, now)], now)
                )
        except BaseException as exc:  # noqa: BLE001 -- reported below
            errors.append(exc)
        finally:
            w.close()

    t = threading.Thread(target=ingest)
    t.start()
    purged = 0
    while True:
        n = purge.purge_batch(db, "results", now - DAY, 250)
        purged += n
        if n < 250:
            break
    t.join(60)
    try:
        assert not errors and sum(stored) == 1200
        assert purged == 3000
        assert db._x("SELECT COUNT(*) FROM messages WHERE device = 'new'").fetchone()[0] == 1200
        assert db._x("SELECT COUNT(*) FROM messages WHERE device = 'old'").fetchone()[0] == 0
        assert db.gap_rows("old") == [] and db.gap_rows("new") == []
    finally:
        db.close()


def test_postgresql_partitioned_by_day_drops_old_partitions(postgres: object, url: str) -> None:
    if not url.startswith("postgresql"):
        return  # native partitioning is PostgreSQL's
    now = time.time()
    if now % DAY > DAY - 300:
        now -= 300  # the old rows (up to 150 s after "two days ago") stay in one day partition
    db = CollectorDb(url)
    try:
        db.migrate()
        seed(db, now)
        views = "SELECT viewname FROM pg_views WHERE schemaname = current_schema() ORDER BY 1"
        before = db._x(views).fetchall()
        rows, parts = partitions.convert(db, now)
        assert rows == 195 and parts >= 10 and partitions.is_partitioned(db)
        assert db._x(views).fetchall() == before and len(before) >= 6  # every view is back
        assert db.gap_rows("d1") == [(50, 54, 1, 1)]  # the views came back
        assert db.store(msg("d1", 201, now), now) == 1 and db.store(msg("d1", 201, now), now) == 0
        assert partitions.ensure_ahead(db, now) == 0  # made already
        # an age that ends at the midnight after the old rows' day: that day goes whole, its spans
        # recorded (a fixed "now - 1.5 days" reached that midnight only after 12:00 UTC: the test
        # failed every morning)
        cutoff = (math.floor((now - 2 * DAY) / DAY) + 1) * DAY
        assert now - 2 * DAY + 150 < cutoff <= now - DAY
        n, by_class = partitions.drop_before(db, cutoff)
        assert n >= 1 and sum(by_class.values()) == 145 and by_class["counts"] == 14
        assert db.gap_rows("d1") == [(50, 54, 1, 1)]
        assert int(db._x("SELECT COUNT(*) FROM messages").fetchone()[0]) == 51
        # batches work inside partitions too
        assert purge.purge_batch(db, "counts", now + DAY, 100) == 5
        assert db.gap_rows("d1") == [(50, 54, 1, 1)]
    finally:
        db.close()
