"""The message retention (adapters/collector/purge.py) as `fleet retention` and the collector's
maintenance rely on it, on SQLite and a real PostgreSQL: the ages give the cut-offs, a class
deletes its kinds only, a batch takes the oldest rows (by device time) first and at most its size,
a row at the cut-off stays, the spans of what was deleted are recorded merged (one row per
island, or per run of seqs outside the islands), an unknown class is one line, a second purger
of the group skips its turn, and a partitioned table is purged partition by partition."""

from __future__ import annotations

import json
import math
import time

import pytest
from support.collector import NOW

from edge_agent.adapters.collector import partitions, purge
from edge_agent.adapters.collector.db import CollectorDb
from edge_agent.core.messages.fleet import Record, parse

DAY = 86400.0


def msg(seq: int, ts: float, kind: str = "detections", dev: str = "d1") -> list[Record]:
    body = {"id": f"{dev}-{seq}", "seq": seq, "boot": 1, "device_id": dev, "ts": ts, "lines": {}}
    return parse("edge", f"edge/{dev}/{kind}", json.dumps(body).encode(), NOW).records


def opened(url: str) -> CollectorDb:
    db = CollectorDb(url)
    db.migrate()
    return db


def left(db: CollectorDb) -> list[tuple[int, str]]:
    got = db._x("SELECT seq, kind FROM messages ORDER BY seq").fetchall()
    return [(int(s), str(k)) for s, k in got]


def expired(db: CollectorDb) -> list[tuple[int, int, int]]:
    got = db._x("SELECT lo, hi, rows FROM expired WHERE device = 'd1' ORDER BY lo").fetchall()
    return [(int(a), int(z), int(n)) for a, z, n in got]


def test_the_ages_give_a_cutoff_per_class_with_an_age() -> None:
    assert purge.Ages(results=1, objects=0, counts=2.5).cutoffs(NOW) == {
        "results": NOW - DAY,
        "counts": NOW - 2.5 * DAY,
    }
    assert purge.Ages(objects=0.5).cutoffs(NOW) == {"objects": NOW - 0.5 * DAY}
    assert purge.Ages().cutoffs(NOW) == {}  # kept for ever


def test_an_unknown_class_is_one_line() -> None:
    with pytest.raises(ValueError) as err:
        purge.predicate("detections")
    assert str(err.value) == "retention class 'detections': expected one of results, objects, counts"


def test_each_class_deletes_its_own_kinds(url: str) -> None:
    db = opened(url)
    try:
        kinds = {1: "detections", 2: "objects", 3: "counts", 4: "zones", 5: "objects", 6: "counts"}
        db.store([r for s, k in kinds.items() for r in msg(s, NOW - 10 * DAY + s, k)], NOW)
        assert [purge.due(db, c, NOW) for c in ("results", "objects", "counts")] == [2, 2, 2]
        assert purge.purge_batch(db, "objects", NOW, 100) == 2
        assert [s for s, _ in left(db)] == [1, 3, 4, 6]
        assert purge.purge_batch(db, "results", NOW, 100) == 2
        assert left(db) == [(3, "counts"), (6, "counts")]
        assert purge.due(db, "results", NOW) == 0 and purge.due(db, "counts", NOW) == 2
        assert purge.purge_batch(db, "counts", NOW, 100) == 2 and left(db) == []
    finally:
        db.close()


def test_a_batch_takes_the_oldest_rows_first_and_keeps_one_at_the_cutoff(url: str) -> None:
    db = opened(url)
    try:
        # device times out of seq order (a clock stepped back): the oldest time goes first
        times = {1: 50.0, 2: 10.0, 3: 40.0, 4: 20.0, 5: 30.0, 6: 100.0}
        db.store([r for s, t in times.items() for r in msg(s, NOW - DAY + t)], NOW)
        cutoff = NOW - DAY + 100.0  # seq 6 is exactly at it: kept
        assert purge.due(db, "results", cutoff) == 5
        assert purge.purge_batch(db, "results", cutoff, 2) == 2
        assert [s for s, _ in left(db)] == [1, 3, 5, 6]  # 2 and 4, the two oldest
        assert purge.purge_batch(db, "results", cutoff, 2) == 2
        assert [s for s, _ in left(db)] == [1, 6]
        assert purge.purge_batch(db, "results", cutoff, 2) == 1  # fewer than a batch: done
        assert purge.purge_batch(db, "results", cutoff, 2) == 0
        assert [s for s, _ in left(db)] == [6] and purge.due(db, "results", cutoff) == 0
        n, k, newest = purge.expired_of(db, "d1")
        assert (n, k) == (5, 1) and newest == pytest.approx(NOW - DAY + 50.0, abs=1e-3)
        assert purge.expired_of(db, "nobody") == (0, 0, None)
    finally:
        db.close()


def test_spans_outside_the_islands_merge_with_their_neighbours_only(url: str) -> None:
    """A database older than the islands: spans are runs of consecutive seqs, a batch's span joins
    the stored one just before or after it, never one across a real gap (seq 7)."""
    db = opened(url)
    try:
        db.store([r for s in (*range(1, 7), 8, 9, 10, 12) for r in msg(s, NOW - DAY + s)], NOW)
        db._begin()
        db._x("DELETE FROM confirmed")
        db.conn.execute("COMMIT")
        while purge.purge_batch(db, "results", NOW, 2) == 2:
            pass
        assert expired(db) == [(1, 6, 6), (8, 10, 3), (12, 12, 1)]
        assert db.gap_rows("d1") == [(7, 7, 1, 1), (11, 11, 1, 1)]
    finally:
        db.close()


def test_spans_inside_an_island_are_one_row_whatever_is_kept_between(url: str) -> None:
    db = opened(url)
    try:
        kinds = {s: ("counts" if s in (4, 9) else "detections") for s in range(1, 11)}
        db.store([r for s, k in kinds.items() for r in msg(s, NOW - DAY + s, k)], NOW)
        while purge.purge_batch(db, "results", NOW, 3) == 3:
            pass
        assert expired(db) == [(1, 10, 8)] and db.gap_rows("d1") == []
        assert purge.expired_of(db, "d1") == (8, 1, pytest.approx(NOW - DAY + 10, abs=1e-3))
    finally:
        db.close()


def test_batches_of_one_island_taken_in_any_order_make_one_row(url: str) -> None:
    """Island 1..10: seqs 5-6 are the oldest, then 10 (the island's last seq), then 1-2 (its
    first); the rest are counts (kept): each later span joins the stored one across the kept rows."""
    db = opened(url)
    try:
        when = {5: 1, 6: 2, 10: 3, 1: 4, 2: 5}
        kind = {s: "detections" if s in when else "counts" for s in range(1, 11)}
        db.store([r for s in range(1, 11) for r in msg(s, NOW - DAY + when.get(s, 10), kind[s])], NOW)
        assert purge.purge_batch(db, "results", NOW, 2) == 2 and expired(db) == [(5, 6, 2)]
        assert purge.purge_batch(db, "results", NOW, 1) == 1 and expired(db) == [(5, 10, 3)]
        assert purge.purge_batch(db, "results", NOW, 2) == 2 and expired(db) == [(1, 10, 5)]
        assert db.gap_rows("d1") == []
    finally:
        db.close()


def test_spans_outside_the_islands_join_a_later_neighbour_but_never_across_a_gap(url: str) -> None:
    """No islands; seq 5 never received. 6-7 are the oldest, then 3-4, then 1-2: 3-4 must not
    swallow the gap to join 6-7, 1-2 joins 3-4 after it."""
    db = opened(url)
    try:
        when = {6: 1, 7: 2, 3: 3, 4: 4, 1: 5, 2: 6}
        db.store([r for s, t in when.items() for r in msg(s, NOW - DAY + t)], NOW)
        db._begin()
        db._x("DELETE FROM confirmed")
        db.conn.execute("COMMIT")
        assert purge.purge_batch(db, "results", NOW, 2) == 2
        assert purge.purge_batch(db, "results", NOW, 2) == 2 and expired(db) == [(3, 4, 2), (6, 7, 2)]
        assert purge.purge_batch(db, "results", NOW, 2) == 2 and expired(db) == [(1, 4, 4), (6, 7, 2)]
        assert db.gap_rows("d1") == [(5, 5, 1, 1)]
    finally:
        db.close()


def test_a_purge_counts_as_a_write_of_the_device(url: str) -> None:
    """PostgreSQL: another collector's cache of the device must miss after a purge (known.py)."""
    if not url.startswith("postgresql"):
        return  # devices.writes is PostgreSQL's (migration 0008)
    db = opened(url)
    try:
        db.store([r for s in (1, 2) for r in msg(s, NOW - DAY + s)], NOW)
        db.store(msg(1, NOW, dev="d2"), NOW)
        w = "SELECT device, writes FROM devices ORDER BY device"
        before = dict(db._x(w).fetchall())
        assert purge.purge_batch(db, "results", NOW - 10, 1) == 1
        after = dict(db._x(w).fetchall())
        assert after == {"d1": before["d1"] + 1, "d2": before["d2"]}
    finally:
        db.close()


def test_a_second_purger_skips_its_turn(postgres: object, url: str) -> None:
    if not url.startswith("postgresql"):
        return  # SQLite: BEGIN IMMEDIATE, one writer
    db, other = opened(url), CollectorDb(url)
    try:
        db.store([r for s in (1, 2, 3) for r in msg(s, NOW - DAY + s)], NOW)
        other._x("SELECT pg_advisory_lock(?)", (purge.PURGE_LOCK,)).fetchone()
        assert purge.purge_batch(db, "results", NOW, 100) == 0 and len(left(db)) == 3
        other._x("SELECT pg_advisory_unlock(?)", (purge.PURGE_LOCK,)).fetchone()
        assert purge.purge_batch(db, "results", NOW, 100) == 3 and left(db) == []
    finally:
        other.close()
        db.close()


def test_the_tables_purged_are_the_partitions_that_may_hold_old_rows(postgres: object, url: str) -> None:
    db = opened(url)
    try:
        if not url.startswith("postgresql"):
            assert purge.tables(db) == ["messages"] and purge.tables(db, NOW) == ["messages"]
            return
        assert purge.tables(db) == ["messages"] and purge.tables(db, NOW) == ["messages"]  # not partitioned
        now = time.time()
        today = math.floor(now / DAY) * DAY
        # rows 3, 2 and 1 days back, two a day, and one at 1970 (the default partition)
        rows = [r for i, d in enumerate((3, 3, 2, 2, 1, 1)) for r in msg(i + 1, today - d * DAY + 60 + i)]
        db.store(rows + msg(7, 1000.0), now)
        partitions.convert(db, now)
        days = [f"messages_p{time.strftime('%Y%m%d', time.gmtime(today - d * DAY))}" for d in (3, 2, 1)]
        every = purge.tables(db)
        assert every[:3] == days and every[-1] == "messages_default" and "messages" not in every
        assert [p.name for p in partitions.children(db)] == every
        # before the day two back starts: only the oldest day (and the default) may hold such rows
        assert purge.tables(db, today - 2 * DAY) == [days[0], "messages_default"]
        assert purge.tables(db, today - 2 * DAY + 1) == [days[0], days[1], "messages_default"]
        # a batch goes on into the next partition for what is left of it, day by day (the default
        # partition, a clock years off, last)
        assert purge.purge_batch(db, "results", today, 3) == 3
        assert [s for s, _ in left(db)] == [4, 5, 6, 7]
        assert purge.purge_batch(db, "results", today - DAY, 2) == 2 and [s for s, _ in left(db)] == [5, 6]
        assert purge.purge_batch(db, "results", today, 10) == 2 and left(db) == []
    finally:
        db.close()
