"""PostgreSQL's day partitions of ``messages`` (adapters/collector/partitions.py) as `fleet db
partition` and the maintenance rely on them, beyond test_retention.py: a partition's name and
bounds are its UTC day (also in a zone east of UTC), the conversion makes one partition per day
from the oldest row of the last year to the newest (or a week ahead), a clock at 1970 lands in
the default partition, the partitions ahead are made as days pass and take the rows of their day
out of the default one, a partition is dropped only once its whole day is past the cut-off (its
spans recorded, the device's cache invalidated; several days of one turn counted together), never
while another collector purges, the days made a year and a day each way at most, the views made
again in any order (or the conversion refused in one line, nothing changed, when the new key breaks
one), a hypertable keyed by time with day chunks (a stand-in for TimescaleDB: not in CI), and the
refusals are one line each."""

from __future__ import annotations

import datetime as dt
import json
import math
import re
import time
from collections.abc import Iterator

import pytest
from support.collector import Postgres

from edge_agent.adapters.collector import partitions, purge
from edge_agent.adapters.collector.db import CollectorDb, DbError
from edge_agent.core.messages.fleet import Record, parse

DAY = 86400.0


def msg(seq: int, ts: float, kind: str = "detections", dev: str = "d1") -> list[Record]:
    body = {"id": f"{dev}-{seq}", "seq": seq, "boot": 1, "device_id": dev, "ts": ts, "lines": {}}
    return parse("edge", f"edge/{dev}/{kind}", json.dumps(body).encode(), ts).records


@pytest.fixture()
def utc_east(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TZ", "Asia/Tokyo")  # +09:00: a local midnight is 15:00 UTC the day before
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_names_and_bounds_are_the_utc_day(utc_east: None) -> None:
    day = dt.date(2026, 12, 31)
    assert partitions.name_of(day) == "messages_p20261231"
    assert partitions.name_of(dt.date(2027, 1, 5)) == "messages_p20270105"
    assert (
        partitions.bounds(day) == "FOR VALUES FROM ('2026-12-31 00:00:00+00') TO ('2027-01-01 00:00:00+00')"
    )
    midnight = dt.datetime(2026, 12, 31, tzinfo=dt.timezone.utc).timestamp()
    assert partitions._ts(day) == midnight
    assert partitions._day(midnight) == day and partitions._day(midnight + DAY - 0.001) == day
    assert partitions._day(midnight - 0.001) == dt.date(2026, 12, 30)
    assert partitions._day(midnight + 16 * 3600) == day  # 01:00 on 1 January in Tokyo


def test_sqlite_has_no_partitions(tmp_path: object, url: str) -> None:
    if not url.startswith("sqlite"):
        return
    db = CollectorDb(url)
    try:
        db.migrate()
        assert partitions.leaves(db) is None
        with pytest.raises(DbError, match=r"^partitioning is for PostgreSQL \(SQLite deletes in batches\)$"):
            partitions.convert(db, time.time())
    finally:
        db.close()


@pytest.fixture()
def pg(postgres: Postgres) -> Iterator[CollectorDb]:
    db = CollectorDb(postgres.url)
    db.conn.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public")
    db.migrate()
    try:
        yield db
    finally:
        db.close()


def where(db: CollectorDb, seq: int) -> str:
    return str(db._x("SELECT tableoid::regclass::text FROM messages WHERE seq = ?", (seq,)).fetchone()[0])


def test_convert_makes_a_partition_per_day_and_the_default(pg: CollectorDb) -> None:
    now = time.time()
    today = partitions._day(now)
    assert partitions.leaves(pg) is None and not partitions.is_partitioned(pg)
    # 3 days back, 10 days ahead, 400 days back (past the year: default) and 1970 (default)
    rows = msg(1, now - 3 * DAY) + msg(2, now + 10 * DAY) + msg(3, now - 400 * DAY) + msg(4, 1000.0)
    pg.store(rows, now + 11 * DAY)
    assert partitions.convert(pg, now) == (4, 14 + 1)  # 3 back .. 10 ahead, and the default
    days = [today + dt.timedelta(days=i) for i in range(-3, 11)]
    parts = partitions.leaves(pg)
    assert parts is not None and partitions.is_partitioned(pg)
    assert parts[:-1] == [
        partitions.Part(partitions.name_of(d), partitions._ts(d), partitions._ts(d) + DAY) for d in days
    ]
    assert parts[-1] == partitions.Part("messages_default", None, None)
    assert where(pg, 1) == partitions.name_of(days[0]) and where(pg, 2) == partitions.name_of(days[-1])
    assert where(pg, 3) == where(pg, 4) == "messages_default"
    with pytest.raises(DbError, match=r"^messages is partitioned already$"):
        partitions.convert(pg, now)
    # the key holds time now: still one row per message
    assert pg.store(msg(1, now - 3 * DAY), now) == 0


def test_an_empty_table_gets_today_and_a_week_ahead(pg: CollectorDb) -> None:
    now = time.time()
    today = partitions._day(now)
    assert partitions.convert(pg, now, ahead_days=2) == (0, 3 + 1)
    names = [p.name for p in partitions.leaves(pg) or []]
    assert names == [partitions.name_of(today + dt.timedelta(days=i)) for i in range(3)] + [
        "messages_default"
    ]


def test_the_days_ahead_are_made_and_take_their_rows_from_the_default(pg: CollectorDb) -> None:
    now = time.time()
    today = partitions._day(now)
    partitions.convert(pg, now, ahead_days=1)  # today and tomorrow
    pg.store(msg(1, now + 3 * DAY), now + 4 * DAY)  # no partition yet: the default one
    assert where(pg, 1) == "messages_default"
    assert partitions.ensure_ahead(pg, now, 1) == 0  # made already
    assert partitions.ensure_ahead(pg, now + DAY, 3) == 3  # days +2, +3, +4
    names = [p.name for p in partitions.leaves(pg) or []]
    assert names == [partitions.name_of(today + dt.timedelta(days=i)) for i in range(5)] + [
        "messages_default"
    ]
    assert where(pg, 1) == partitions.name_of(today + dt.timedelta(days=3))  # moved out of the default
    assert int(pg._x("SELECT COUNT(*) FROM messages").fetchone()[0]) == 1
    assert partitions.ensure_ahead(pg, now + DAY, 3) == 0


def test_a_day_is_dropped_only_once_its_whole_day_is_past(pg: CollectorDb) -> None:
    now = time.time()
    start = (math.floor(now / DAY) - 3) * DAY  # midnight three days back
    kinds = ("detections", "counts", "objects", "detections")
    pg.store([r for s, k in enumerate(kinds, 1) for r in msg(s, start + 60 * s, k)], now)
    pg.store(msg(5, start + DAY + 60) + msg(1, start + 60, dev="d2"), now)
    partitions.convert(pg, now)
    writes = "SELECT device, writes FROM devices ORDER BY device"
    before = dict(pg._x(writes).fetchall())
    first = partitions.name_of(partitions._day(start))
    assert partitions.drop_before(pg, start + DAY - 1) == (0, {})  # a second short of its end
    other = CollectorDb(pg.url)  # another collector of the group is purging: skip the turn
    try:
        other._x("SELECT pg_advisory_lock(?)", (purge.PURGE_LOCK,)).fetchone()
        assert partitions.drop_before(pg, start + DAY) == (0, {})
        assert first in [p.name for p in partitions.leaves(pg) or []]
        # released here, not by close(): the server ends the session (and frees its lock) later
        other._x("SELECT pg_advisory_unlock(?)", (purge.PURGE_LOCK,)).fetchone()
    finally:
        other.close()
    assert partitions.drop_before(pg, start + DAY) == (1, {"results": 3, "counts": 1, "objects": 1})
    assert first not in [p.name for p in partitions.leaves(pg) or []]
    assert [int(s) for (s,) in pg._x("SELECT seq FROM messages ORDER BY seq").fetchall()] == [5]
    got = pg._x("SELECT device, lo, hi, rows FROM expired ORDER BY device, lo").fetchall()
    assert [(str(d), int(a), int(z), int(n)) for d, a, z, n in got] == [("d1", 1, 4, 4), ("d2", 1, 1, 1)]
    assert purge.expired_of(pg, "d1")[2] == pytest.approx(start + 240, abs=1e-3)
    assert pg.gap_rows("d1") == []
    assert dict(pg._x(writes).fetchall()) == {"d1": before["d1"] + 1, "d2": before["d2"] + 1}
    assert partitions.drop_before(pg, start + DAY) == (0, {})  # the default partition never goes


def test_spans_of_a_dropped_day_outside_the_islands_are_runs_of_seqs(pg: CollectorDb) -> None:
    now = time.time()
    start = (math.floor(now / DAY) - 3) * DAY
    pg.store([r for s in (1, 2, 3, 5, 6, 9, 12, 13) for r in msg(s, start + 60 * s)], now)
    pg._begin()
    pg._x("DELETE FROM confirmed WHERE lo <= 3 OR lo = 12")  # rows 1..3 and 12..13: from before the islands
    pg.conn.execute("COMMIT")
    spans = sorted(partitions.span_rows(pg, "messages"))
    assert [(s.lo, s.hi, s.rows) for s in spans] == [(1, 3, 3), (5, 6, 2), (9, 9, 1), (12, 13, 2)]
    assert spans[0].newest == pytest.approx(start + 180, abs=1e-3) and spans[0].device == "d1"


def test_without_timescaledb_the_hypertable_is_one_line(pg: CollectorDb) -> None:
    assert partitions.has_timescaledb(pg) is False
    with pytest.raises(DbError) as err:
        partitions.hypertable(pg)
    assert str(err.value) == (
        "the timescaledb extension is not installed in this database (CREATE EXTENSION timescaledb)"
    )


KEY = "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = 'messages'::regclass AND contype = 'p'"


@pytest.fixture()
def timescale(pg: CollectorDb, monkeypatch: pytest.MonkeyPatch) -> CollectorDb:
    """No TimescaleDB in CI: the extension counts as installed and a ``create_hypertable`` of the
    test's own (in the public schema, named arguments as TimescaleDB's) records how it was called."""
    monkeypatch.setattr(partitions, "has_timescaledb", lambda db: True)
    pg._x("CREATE TABLE hyper_calls (rel TEXT, col TEXT, chunk INTERVAL, migrate BOOLEAN)")
    pg._x(
        "CREATE FUNCTION create_hypertable(relation REGCLASS, time_column_name NAME, "
        "chunk_time_interval INTERVAL DEFAULT NULL, migrate_data BOOLEAN DEFAULT false) RETURNS void "
        "LANGUAGE sql AS $$ INSERT INTO hyper_calls VALUES "
        "(relation::text, time_column_name::text, chunk_time_interval, migrate_data) $$"
    )
    return pg


def test_a_hypertable_is_keyed_by_time_and_asks_for_day_chunks_with_the_rows(timescale: CollectorDb) -> None:
    db, now = timescale, time.time()
    db.store(msg(1, now - DAY) + msg(2, now) + msg(1, now, dev="d2"), now)
    assert db._x(KEY).fetchall() == [("messages_pkey", "PRIMARY KEY (device, boot, seq)")]
    assert partitions.hypertable(db) == 3
    other = CollectorDb(db.url)  # committed: another connection sees the new key and the call
    try:
        assert other._x(KEY).fetchall() == [("messages_pkey", 'PRIMARY KEY (device, boot, seq, "time")')]
        calls = other._x("SELECT rel, col, chunk, migrate FROM hyper_calls").fetchall()
        assert calls == [("messages", "time", dt.timedelta(days=1), True)]
    finally:
        other.close()


def test_a_failed_hypertable_leaves_the_table_as_it_was(timescale: CollectorDb) -> None:
    db = timescale
    db._x(
        "CREATE OR REPLACE FUNCTION create_hypertable(relation REGCLASS, time_column_name NAME, "
        "chunk_time_interval INTERVAL DEFAULT NULL, migrate_data BOOLEAN DEFAULT false) RETURNS void "
        "LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'table is not empty'; END $$"
    )
    with pytest.raises(db.errors(), match="table is not empty"):
        partitions.hypertable(db)
    # rolled back: the old key, and the connection takes the next statement
    assert db._x(KEY).fetchall() == [("messages_pkey", "PRIMARY KEY (device, boot, seq)")]


def test_days_dropped_in_one_turn_are_counted_together(pg: CollectorDb) -> None:
    now = time.time()
    start = (math.floor(now / DAY) - 3) * DAY
    pg.store(msg(1, start + 60) + msg(2, start + DAY + 60) + msg(3, start + DAY + 120, "counts"), now)
    partitions.convert(pg, now)
    assert partitions.drop_before(pg, start + 2 * DAY) == (2, {"results": 2, "counts": 1})
    assert [int(s) for (s,) in pg._x("SELECT seq FROM messages").fetchall()] == []


VIEW = "SELECT viewname FROM pg_views WHERE schemaname = current_schema() AND left(viewname, 5) = 'mine_' ORDER BY 1"


def test_views_on_views_are_made_again_whatever_order_they_come_in(pg: CollectorDb) -> None:
    pg._begin()
    # the view on the view first: it fails until its base is there, then is made on the next pass
    partitions._recreate(
        pg,
        [
            ("mine_top", "SELECT device FROM mine_base WHERE seq > 1"),
            ("mine_base", "SELECT device, seq FROM messages"),
        ],
    )
    pg.conn.execute("COMMIT")
    assert [str(v) for (v,) in pg._x(VIEW).fetchall()] == ["mine_base", "mine_top"]
    pg.store(msg(1, time.time()) + msg(2, time.time()), time.time())
    assert pg._x("SELECT device FROM mine_top").fetchall() == [("d1",)]


def test_views_the_new_key_breaks_stop_the_conversion_in_one_line(pg: CollectorDb) -> None:
    # a kind that depends on the old key (device, boot, seq) alone: not on the new one, which holds time
    for name in ("mine_a", "mine_b"):
        pg._x(
            f"CREATE VIEW {name} AS SELECT device, boot, seq, kind FROM messages GROUP BY device, boot, seq"
        )
    pg.store(msg(1, time.time()), time.time())
    with pytest.raises(DbError) as err:
        partitions.convert(pg, time.time())
    assert re.fullmatch(
        r"cannot recreate the views (mine_a, mine_b|mine_b, mine_a) on the partitioned table", str(err.value)
    )
    assert not partitions.is_partitioned(pg)  # rolled back: the table, its rows and the views as they were
    assert [str(v) for (v,) in pg._x(VIEW).fetchall()] == ["mine_a", "mine_b"]
    assert int(pg._x("SELECT COUNT(*) FROM mine_a").fetchone()[0]) == 1


def test_days_are_made_for_a_year_and_a_day_each_way_at_most(pg: CollectorDb) -> None:
    now = time.time()
    # half a day past the year and a day back, and 400 days ahead: both land in the default
    pg.store(msg(1, now - 366.5 * DAY) + msg(2, now + 400 * DAY), now)
    assert partitions.convert(pg, now) == (2, 366 + 1 + 1)  # today .. a year and a day ahead
    parts = partitions.leaves(pg) or []
    assert parts[0].name == partitions.name_of(partitions._day(now))
    assert parts[-2].name == partitions.name_of(partitions._day(now) + dt.timedelta(days=366))
    assert where(pg, 1) == where(pg, 2) == "messages_default"


def test_only_rows_older_than_a_year_give_today_and_the_days_ahead(pg: CollectorDb) -> None:
    now = time.time()
    pg.store(msg(1, 1000.0), now)  # a clock at 1970, nothing newer
    assert partitions.convert(pg, now, ahead_days=1) == (1, 2 + 1)
    assert [p.name for p in partitions.leaves(pg) or []][:1] == [partitions.name_of(partitions._day(now))]
    assert where(pg, 1) == "messages_default"
