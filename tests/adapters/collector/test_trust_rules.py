"""What the collector does not take on trust, at the edges the collector-trust-rules mutation run
left open (issue 36), on SQLite and PostgreSQL: the dead letters are bounded to the newest and
counted, nothing is counted as trimmed when nothing was, and a round of more devices than one
query's chunk (trust.CHUNK) bounds each device by its own reported seq and its own kept conflicts."""

from __future__ import annotations

import json

from support.collector import NOW, rec

from edge_agent.adapters.collector.db import CollectorDb, Rejected
from edge_agent.adapters.collector.trust import CHUNK, Limits
from edge_agent.core.messages.fleet import DeviceStatus, Record, parse


def forged(dev: str, seq: int, tag: str) -> list[Record]:
    body = {"id": f"{tag}-{dev}-{seq}", "seq": seq, "boot": 1, "device_id": dev, "ts": NOW}
    return parse("edge", f"edge/{dev}/detections", json.dumps(body).encode(), NOW).records


def reported(dev: str, seq: int) -> DeviceStatus:
    body = {"device_id": dev, "state": "running", "ts": NOW, "queue": {"boot": 1, "seq": seq}}
    got = parse("edge", f"edge/{dev}/status", json.dumps(body).encode(), NOW).status
    assert got is not None
    return got


def trimmed(db: CollectorDb) -> dict[str, int]:
    return {str(n): int(d) for n, d in db._x("SELECT name, dropped FROM trimmed").fetchall()}


def test_the_dead_letters_keep_the_newest_and_count_the_dropped(url: str) -> None:
    db = CollectorDb(url, limits=Limits(rejected_max=3))
    try:
        db.migrate()
        for i in range(3):
            db.dead_letter(f"edge/d/{i}", "boom", f"payload {i}".encode(), NOW + i)
        assert trimmed(db) == {}  # at the bound: nothing dropped, nothing counted
        db.dead_letter("edge/d/0", "boom again", b"payload 0", NOW + 10)  # the same one again
        assert trimmed(db) == {}
        for i in range(3, 6):
            db.dead_letter(f"edge/d/{i}", "boom", f"payload {i}".encode(), NOW + 10 + i)
        rows = db._x("SELECT topic, count FROM dead_letters ORDER BY topic").fetchall()
        # the newest three by last seen: d/0 was seen again after d/1 and d/2, then d/3..d/5 came
        assert [(t, int(n)) for t, n in rows] == [("edge/d/3", 1), ("edge/d/4", 1), ("edge/d/5", 1)]
        assert trimmed(db) == {"dead_letters": 3}
        db.dead_letter("edge/d/6", "boom", b"payload 6", NOW + 20)
        assert trimmed(db) == {"dead_letters": 4}  # counted on, not reset
    finally:
        db.close()


def test_rejected_messages_under_the_bound_are_all_kept_and_nothing_is_counted(url: str) -> None:
    db = CollectorDb(url, limits=Limits(rejected_max=3))
    try:
        db.migrate()
        db.store([], NOW, rejected=[Rejected("edge/x/y", f"bad {i}", NOW) for i in range(3)])
        assert db._x("SELECT COUNT(*) FROM rejected").fetchone()[0] == 3
        assert trimmed(db) == {}
        db.store([], NOW, rejected=[Rejected("edge/x/y", "bad 3", NOW)])
        reasons = [r for (r,) in db._x("SELECT reason FROM rejected ORDER BY id").fetchall()]
        assert reasons == ["bad 1", "bad 2", "bad 3"] and trimmed(db) == {"rejected": 1}
    finally:
        db.close()


def test_more_devices_than_a_chunk_are_each_bounded_by_their_own_reported_seq(url: str) -> None:
    devs = [f"d{i:03}" for i in range(CHUNK + 5)]
    db = CollectorDb(url, limits=Limits(seq_jump_max=10))
    try:
        db.migrate()
        db.store([r for d in devs for r in rec(d, 1)], NOW)
        db.store([], NOW, statuses=[reported(d, 1000) for d in devs])
        # 1005: 5 above what each reported in an earlier round (the stored 1 alone would hold it)
        assert db.store([r for d in devs for r in rec(d, 1005)], NOW) == len(devs)
        assert db.last_conflicts == {}
    finally:
        db.close()


def test_more_devices_than_a_chunk_each_keep_only_their_own_bound_of_conflicts(url: str) -> None:
    devs = [f"d{i:03}" for i in range(CHUNK + 5)]
    db = CollectorDb(url, limits=Limits(conflicts_max_per_device=1))
    try:
        db.migrate()
        db.store([r for d in devs for r in rec(d, 1) + rec(d, 2)], NOW)
        db.store([r for d in devs for r in forged(d, 1, "a")], NOW)  # one kept each: the bound
        assert db.last_conflicts == {d: 1 for d in devs}
        db.store([r for d in devs for r in forged(d, 2, "b")], NOW)  # over it: only counted
        assert db.last_conflicts == {d: 1 for d in devs}
        kept = dict(db._x("SELECT device, COUNT(*) FROM conflicts GROUP BY device").fetchall())
        assert {d: int(n) for d, n in kept.items()} == {d: 1 for d in devs}
        assert {d["device"]: d["conflicts"] for d in db.devices()} == {d: 2 for d in devs}
    finally:
        db.close()


def test_a_device_that_reported_seq_0_and_stored_nothing_is_bounded_from_0(url: str) -> None:
    db = CollectorDb(url, limits=Limits(seq_jump_max=10))
    try:
        db.migrate()
        db.store([], NOW, statuses=[reported("new", 0)])  # an empty queue: nothing sent yet
        assert db.store(rec("new", 11), NOW) == 0 and db.last_conflicts == {"new": 1}
        assert db.store(rec("new", 10), NOW) == 1 and db.last_conflicts == {}
        # the same in one round: its status and its first results together
        assert db.store(rec("two", 11), NOW, statuses=[reported("two", 0)]) == 0
        assert db.last_conflicts == {"two": 1}
    finally:
        db.close()
