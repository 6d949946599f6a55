"""The collector's cache of a device (adapters/collector/known.py) without a database: which
devices of a round it answers for, when a version proves it, what a committed round leaves in it,
and what a failed round drops. Each wrong answer here would make a round skip a read it needs
(store a duplicate as new, confirm an island the database does not hold)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from support.collector import rec, sqlite_url

from edge_agent.adapters.collector import purge
from edge_agent.adapters.collector.db import CollectorDb
from edge_agent.adapters.collector.known import Entry, Known, after, around
from edge_agent.core.messages.confirm import MAX_BOOTS, MAX_RANGES
from edge_agent.core.messages.fleet import Record, parse

DAY = 86400.0


def old_rec(dev: str, seq: int, ts: float) -> list[Record]:
    body = {"id": f"{dev}-{seq}", "seq": seq, "boot": 1, "device_id": dev, "ts": ts + seq}
    return parse("edge", f"edge/{dev}/detections", json.dumps(body).encode(), ts).records


def known(**entries: Entry) -> Known:
    k = Known()
    k.entries.update(entries)
    return k


def test_a_device_is_answered_only_for_seqs_above_its_highest() -> None:
    k = known(d1=Entry(4, 10, {1: [(1, 10)]}))
    assert k.plan({"d1": [11, 12]}, [("d1", 1, 10, 13)]) == {"d1": {("d1", 1): [(1, 10)]}}
    assert k.plan({"d1": [10, 11]}, [("d1", 1, 9, 12)]) == {}  # 10 may be a stored duplicate
    assert k.plan({"d1": [3]}, [("d1", 1, 2, 4)]) == {}
    assert k.plan({"d2": [1]}, [("d2", 1, 0, 2)]) == {}  # never stored by this collector


def test_a_device_without_a_stored_row_is_answered_for_any_seq() -> None:
    k = known(d1=Entry(1, None, {}))
    assert k.plan({"d1": [1]}, [("d1", 1, 0, 2)]) == {"d1": {("d1", 1): []}}


def test_one_unknown_boot_makes_the_whole_device_read() -> None:
    """Boot 3 lies between the cached boots of a full tail (unknown): the device's other spans,
    before and after it, are not answered either (the round reads the device whole)."""
    tail = {b: [(1, 5)] for b in range(2, 2 + 2 * MAX_BOOTS, 2)}  # 2, 4, ... 16: full
    k = known(d1=Entry(7, 5, tail), d2=Entry(1, 5, {1: [(1, 5)]}))
    spans = [("d1", 2, 5, 7), ("d1", 3, 5, 7), ("d1", 4, 5, 7), ("d2", 1, 5, 7)]
    got = k.plan({"d1": [6], "d2": [6]}, spans)
    assert got == {"d2": {("d2", 1): [(1, 5)]}}
    assert k.plan({"d1": [6]}, [("d1", 2, 5, 7), ("d1", 4, 5, 7)]) == {
        "d1": {("d1", 2): [(1, 5)], ("d1", 4): [(1, 5)]}
    }


def test_only_the_next_version_proves_the_cache() -> None:
    k = known(d1=Entry(41, 3, {}))
    assert k.proven("d1", 42)
    assert not k.proven("d1", 41) and not k.proven("d1", 43) and not k.proven("d1", 40)
    assert not k.proven("d2", 1)


def test_a_committed_round_keeps_the_highest_seq_it_inserted() -> None:
    """The round's records in any order: the entry's top is the highest of them and of the
    stored top before it, its islands sorted per boot."""
    k = Known()
    new = [*rec("d1", 7), *rec("d1", 9), *rec("d1", 8), *rec("d2", 2)]
    tails = {"d1": {1: [(7, 9), (1, 3)]}, "d2": {1: [(1, 2)]}}
    k.keep({"d1": 5, "d2": 1}, {"d1": 3, "d2": None}, new, tails)
    assert k.entries == {"d1": Entry(5, 9, {1: [(1, 3), (7, 9)]}), "d2": Entry(1, 2, {1: [(1, 2)]})}
    k.keep({"d1": 6}, {"d1": 9}, rec("d1", 4), {"d1": {1: [(1, 4), (7, 9)]}})
    assert k.entries["d1"] == Entry(6, 9, {1: [(1, 4), (7, 9)]})  # a gap filled: the top stays


def test_a_round_that_only_saw_a_device_keeps_its_entry_while_proven() -> None:
    """A status or an event of a cached device: its version moves on by one, nothing else."""
    k = known(d1=Entry(5, 9, {1: [(1, 9)]}), d2=Entry(5, 9, {1: [(1, 9)]}))
    k.keep({"d1": 6, "d2": 8, "d3": 1}, {}, [], {})
    assert k.entries == {"d1": Entry(6, 9, {1: [(1, 9)]})}  # d2: another writer; d3: never known


def test_forget_drops_the_devices_named_or_all() -> None:
    k = known(d1=Entry(1, 1, {}), d2=Entry(1, 1, {}), d3=Entry(1, 1, {}))
    k.forget(["d2", "d9"])
    assert sorted(k.entries) == ["d1", "d3"]
    k.forget([])
    assert sorted(k.entries) == ["d1", "d3"]
    k.forget()
    assert k.entries == {}


def test_around_an_island_touching_the_span_and_a_full_boot_from_its_lowest() -> None:
    full = [(s, s + 1) for s in range(10, 10 + 3 * MAX_RANGES, 3)]  # MAX_RANGES islands from 10 up
    assert around({1: full}, 1, 11, 13) == [(10, 11), (13, 14)]  # touching at both ends
    assert around({1: full}, 1, 10, 13) == [(10, 11), (13, 14)]  # from the lowest island's lo up
    assert around({1: full}, 1, 12, 12) == []  # between two islands
    assert around({1: full[1:]}, 1, 1, 11) == []  # fewer than MAX_RANGES: none below
    boots = {b: [(1, 5)] for b in range(1, 1 + MAX_BOOTS - 1)}  # one boot short of full
    assert around(boots, 0, 5, 7) == []


def test_after_keeps_what_a_round_did_not_touch() -> None:
    tail = {1: [(1, 3)], 2: [(1, 5), (9, 9)]}
    got = after(tail, {2: ([(9, 9)], [(9, 10)]), 1: ([], [])})
    assert got == {2: [(1, 5), (9, 10)], 1: [(1, 3)]}
    # a boot the round wrote nothing new to, before one it did: both as they are then
    got = after(tail, {1: ([], []), 2: ([(9, 9)], [(9, 10)])})
    assert got == {2: [(1, 5), (9, 10)], 1: [(1, 3)]}
    assert after({}, {3: ([], [(1, 1)])}) == {3: [(1, 1)]}  # a new boot
    full = [(s, s) for s in range(10, 10 + 2 * MAX_RANGES, 2)]
    top = full[-1][0]
    # a full boot's two top islands joined and one more beside: still full, nothing below needed
    joined = after({1: full}, {1: (full[-2:], [(full[-2][0], top), (top + 2, top + 2)])})
    assert joined == {1: [*full[:-2], (full[-2][0], top), (top + 2, top + 2)]}


def test_the_purge_of_a_sqlite_database_takes_no_row_locks(tmp_path: Path) -> None:
    """SQLite has no ``devices.writes`` and no row locks (one writer): the purge deletes and
    commits without them."""
    db = CollectorDb(sqlite_url(tmp_path / "fleet.db"))
    db.migrate()
    try:
        now = time.time()
        old = [r for s in (1, 2, 3) for r in old_rec("d1", s, now - 2 * DAY)]
        assert db.store(old, now) == 3
        assert purge.purge_batch(db, "results", now - DAY, 100) == 3
        assert int(db._x("SELECT COUNT(*) FROM messages").fetchone()[0]) == 0
    finally:
        db.close()
