"""What the collector does not take on trust, at the edges the collector-trust mutation run left
open (issue 36), on SQLite and PostgreSQL: a replayed id with another body is a conflict, not a
redelivery; a redelivery in another spelling is one; one device's seqs, statuses and conflicts
never decide for another device or another boot."""

from __future__ import annotations

import json

from support.collector import NOW, rec

from edge_agent.adapters.collector.db import CollectorDb
from edge_agent.adapters.collector.trust import Limits
from edge_agent.core.messages.fleet import DeviceStatus, Record, parse


def message(dev: str, seq: int, msg_id: str, payload: str | None = None, **extra: object) -> list[Record]:
    body = {"id": msg_id, "seq": seq, "boot": 1, "device_id": dev, "ts": NOW + seq, **extra}
    raw = payload if payload is not None else json.dumps(body)
    return parse("edge", f"edge/{dev}/detections", raw.encode(), NOW).records


def reported(dev: str, seq: int) -> DeviceStatus:
    body = {"device_id": dev, "state": "running", "ts": NOW, "queue": {"boot": 1, "seq": seq}}
    got = parse("edge", f"edge/{dev}/status", json.dumps(body).encode(), NOW).status
    assert got is not None
    return got


def test_a_replayed_id_with_another_body_is_a_conflict_and_the_first_body_stays(url: str) -> None:
    db = CollectorDb(url)
    try:
        db.migrate()
        assert db.store(message("cam", 5, "cam-5", count=1), NOW) == 1
        # the same id and seq, the body changed (a forger who read the first one off the broker)
        assert db.store(message("cam", 5, "cam-5", count=99), NOW) == 0
        assert db.last_conflicts == {"cam": 1} and db.last_duplicates == 0
        (body,) = db._x("SELECT body FROM messages WHERE device = 'cam'").fetchone()
        assert (json.loads(body) if isinstance(body, str) else body)["count"] == 1
        (kept,) = db._x("SELECT body FROM conflicts WHERE device = 'cam'").fetchone()
        assert (json.loads(kept) if isinstance(kept, str) else kept)["count"] == 99
    finally:
        db.close()


def test_a_redelivery_in_a_later_round_is_a_duplicate_even_spelt_otherwise(url: str) -> None:
    db = CollectorDb(url)
    try:
        db.migrate()
        first = '{"id": "cam-5", "seq": 5, "boot": 1, "device_id": "cam", "ts": 1796000005.0}'
        assert db.store(message("cam", 5, "cam-5", first), NOW) == 1
        assert db.store(message("cam", 5, "cam-5", first), NOW) == 0  # byte for byte
        assert db.last_duplicates == 1 and db.last_conflicts == {}
        # the same values, the keys in another order and other spacing (another agent build, a bridge)
        again = '{"ts":1796000005.0,"device_id":"cam","boot":1,"seq":5,"id":"cam-5"}'
        assert db.store(message("cam", 5, "cam-5", again), NOW) == 0
        assert db.last_duplicates == 1 and db.last_conflicts == {}
        (dev,) = db.devices()
        assert dev["conflicts"] == 0 and dev["messages"] == 1
    finally:
        db.close()


def test_the_same_seq_of_another_boot_or_another_device_is_new_not_a_conflict(url: str) -> None:
    db = CollectorDb(url)
    try:
        db.migrate()
        db.store(rec("cam", 5) + rec("cam", 6), NOW)
        assert db.store(rec("cam", 5, boot=2) + rec("cam-2", 5) + rec("cam-2", 6), NOW) == 3
        assert db.last_conflicts == {} and db.last_duplicates == 0
        # and the real redelivery among them is still told apart
        assert db.store(rec("cam", 6) + rec("cam", 7), NOW) == 1 and db.last_duplicates == 1
    finally:
        db.close()


def test_one_devices_high_seq_does_not_raise_another_devices_bound(url: str) -> None:
    db = CollectorDb(url, limits=Limits(seq_jump_max=100))
    try:
        db.migrate()
        db.store(rec("cam", 1) + rec("big", 5000), NOW)  # "big": its first message sets no bound
        db.store([], NOW, statuses=[reported("loud", 90_000)])
        # cam's bound is its own 1 + 100: neither big's 5000 nor loud's reported 90 000 counts
        assert db.store(rec("cam", 102), NOW) == 0 and db.last_conflicts == {"cam": 1}
        assert db.store(rec("cam", 101), NOW) == 1
        # big's own bound: 5000 + 100
        assert db.store(rec("big", 5100) + rec("big", 5201), NOW) == 1
        assert db.last_conflicts == {"big": 1}
        # loud's reported seq is its base
        assert db.store(rec("loud", 90_100), NOW) == 1
    finally:
        db.close()


def test_one_device_at_its_conflict_bound_does_not_stop_another_keeping_its_own(url: str) -> None:
    db = CollectorDb(url, limits=Limits(conflicts_max_per_device=2))
    try:
        db.migrate()
        for dev in ("a", "b"):
            db.store([r for s in range(1, 5) for r in rec(dev, s)], NOW)
        db.store([r for s in range(1, 5) for r in message("a", s, f"forged-{s}")], NOW)
        assert db.last_conflicts == {"a": 4}
        db.store([r for s in range(1, 3) for r in message("b", s, f"forged-{s}")], NOW)
        assert db.last_conflicts == {"b": 2}
        kept = dict(db._x("SELECT device, COUNT(*) FROM conflicts GROUP BY device").fetchall())
        assert {d: int(n) for d, n in kept.items()} == {"a": 2, "b": 2}
        counted = {d["device"]: d["conflicts"] for d in db.devices()}
        assert counted == {"a": 4, "b": 2}
    finally:
        db.close()
