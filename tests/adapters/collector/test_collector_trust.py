"""What the collector does not take on trust (SQLite and a real PostgreSQL): a second message for a
stored (device, boot, seq) with other content is kept as a conflict, a seq far ahead is held as
one, statuses are ordered by (boot, link, offline, status_seq) and not by the device's clock, and
the rejected table is bounded."""

from __future__ import annotations

import json
from typing import Optional

import pytest
from support.collector import NOW, rec

from edge_agent.adapters.collector.db import CollectorDb, Rejected
from edge_agent.adapters.collector.trust import Limits
from edge_agent.core.messages.fleet import DeviceStatus, Record, parse


def forged(dev: str, seq: int, boot: int = 1) -> list[Record]:
    body = {"id": f"forged-{seq}", "seq": seq, "boot": boot, "device_id": dev, "ts": NOW}
    return parse("edge", f"edge/{dev}/detections", json.dumps(body).encode(), NOW).records


def st(
    state: str,
    link: Optional[int],
    n: Optional[int],
    ts: float = NOW,
    boot: int = 1,
    seq: int = 0,
    at: float = NOW,
    dev: str = "d1",
) -> DeviceStatus:
    body: dict[str, object] = {
        "device_id": dev,
        "state": state,
        "ts": ts,
        "queue": {"boot": boot, "seq": seq},
    }
    if link is not None:
        body["link"], body["status_seq"] = link, n
    got = parse("edge", f"edge/{dev}/status", json.dumps(body).encode(), at).status
    assert got is not None
    return got


def state_of(db: CollectorDb) -> str:
    return str(next(d for d in db.devices() if d["device"] == "d1")["state"])


def test_a_forged_copy_of_a_seq_is_a_conflict_and_the_real_one_is_kept(url: str) -> None:
    db = CollectorDb(url)
    try:
        db.migrate()
        db.store([r for s in range(1, 130) for r in rec("cam", s)], NOW)
        # the attack: seq 130..329 forged first; the real ones arrive after
        assert db.store([r for s in range(130, 330) for r in forged("cam", s)], NOW) == 200
        real = [r for s in range(130, 330) for r in rec("cam", s)]
        assert db.store(real, NOW) == 0
        assert db.last_conflicts == {"cam": 200} and db.last_duplicates == 0
        # an identical redelivery of the real ones is a duplicate, not a second conflict
        assert db.store(real[:10], NOW) == 0
        assert db.last_conflicts == {} and db.last_duplicates == 10
        (dev,) = db.devices()
        assert dev["conflicts"] == 200 and dev["messages"] == 329 and dev["gaps"] == 0
        kept = {
            json.loads(b)["id"] if isinstance(b, str) else b["id"]
            for (b,) in db._x("SELECT body FROM conflicts").fetchall()
        }
        assert kept == {f"cam-{s}" for s in range(130, 330)}  # every real result is stored
        assert db.conflict_rows("cam")[0][:3] == (1, 130, "cam-130")
    finally:
        db.close()


def test_conflicts_within_one_round_and_the_bound_per_device_keeps_counting(url: str) -> None:
    db = CollectorDb(url, limits=Limits(conflicts_max_per_device=3))
    try:
        db.migrate()
        assert db.store(rec("cam", 1) + forged("cam", 1) + rec("cam", 1), NOW) == 1
        assert db.last_conflicts == {"cam": 1} and db.last_duplicates == 1
        db.store([r for s in range(2, 12) for r in rec("cam", s)], NOW)
        db.store([r for s in range(2, 12) for r in forged("cam", s)], NOW)
        (dev,) = db.devices()
        assert dev["conflicts"] == 11
        assert db._x("SELECT COUNT(*) FROM conflicts").fetchone()[0] == 3
    finally:
        db.close()


@pytest.mark.parametrize("jump", [1_000_000, 5_000_000])
def test_a_seq_far_above_the_highest_known_is_held_as_a_conflict_not_a_huge_gap(url: str, jump: int) -> None:
    db = CollectorDb(url, limits=Limits(seq_jump_max=jump))
    try:
        db.migrate()
        db.store(rec("cam", 100), NOW)
        assert db.store(forged("cam", 2**62) + forged("cam", 100 + jump + 1), NOW) == 0
        assert db.last_conflicts == {"cam": 2}
        assert db.store(rec("cam", 100 + jump), NOW) == 1  # just within the bound: stored
        assert db.gap_rows("cam")[-1][:2] == (101, 99 + jump)
        # a status reporting its outbox seq raises the base
        db.store([], NOW, statuses=[st("running", 1, 1, seq=3 * jump, dev="cam")])
        assert db.store(forged("cam", 3 * jump + 5), NOW) == 1
    finally:
        db.close()


def test_the_rejected_table_keeps_the_newest_rows_and_counts_the_rest(url: str) -> None:
    db = CollectorDb(url, limits=Limits(rejected_max=10))
    try:
        db.migrate()
        for i in range(25):
            db.store([], NOW, rejected=[Rejected("edge/x/y", f"bad {i}", NOW)])
        reasons = [r for (r,) in db._x("SELECT reason FROM rejected ORDER BY id").fetchall()]
        assert reasons == [f"bad {i}" for i in range(15, 25)]
        assert db._x("SELECT dropped FROM trimmed WHERE name = 'rejected'").fetchone()[0] == 15
    finally:
        db.close()


def test_statuses_are_ordered_by_link_and_counter_not_by_the_device_clock(url: str) -> None:
    db = CollectorDb(url)
    try:
        db.migrate()
        db.store([], NOW, statuses=[st("running", 1, 2, ts=NOW)])
        # a clock stepped back 30 days: the newer status still wins
        db.store([], NOW + 1, statuses=[st("draining", 1, 3, ts=NOW - 30 * 86400, at=NOW + 1)])
        assert state_of(db) == "draining"
        # a forged ts in the year 4800 is clamped to the receive time, and an older counter loses
        db.store([], NOW + 2, statuses=[st("running", 1, 1, ts=9e10, at=NOW + 2)])
        (d,) = db.devices()
        assert d["state"] == "draining"
        db.store([], NOW + 3, statuses=[st("running", 1, 4, ts=9e10, at=NOW + 3)])
        (d,) = db.devices()
        assert d["state"] == "running" and d["status_time"] == pytest.approx(NOW + 3, abs=1e-3)
    finally:
        db.close()


def test_the_last_will_beats_the_statuses_of_its_connection_and_loses_to_the_next_one(url: str) -> None:
    db = CollectorDb(url)
    try:
        db.migrate()
        # link 2: the will was stamped at CONNECT (status_seq 5), statuses 6..9 were sent after it
        db.store([], NOW, statuses=[st("running", 2, 6), st("running", 2, 7)])
        db.store([], NOW + 60, statuses=[st("offline", 2, 5, at=NOW + 60)])  # the broker fires it
        assert state_of(db) == "offline"
        # a status of that connection redelivered late (another collector, a restart) stays behind
        db.store([], NOW + 61, statuses=[st("running", 2, 9, at=NOW + 61)])
        assert state_of(db) == "offline"
        # the next connection's first status wins, whatever its clock says
        db.store([], NOW + 62, statuses=[st("running", 3, 11, ts=NOW - 86400, at=NOW + 62)])
        assert state_of(db) == "running"
        # a new boot starts its counters again and still wins
        db.store([], NOW + 63, statuses=[st("draining", 1, 1, boot=2, at=NOW + 63)])
        assert state_of(db) == "draining"
    finally:
        db.close()


def test_an_old_agent_without_counters_is_still_ordered_by_ts_and_offline_by_arrival(url: str) -> None:
    db = CollectorDb(url)
    try:
        db.migrate()
        db.store([], NOW + 10, statuses=[st("running", None, None, ts=NOW + 10, at=NOW + 10)])
        db.store([], NOW + 30, statuses=[st("offline", None, None, ts=NOW, at=NOW + 30)])
        db.store([], NOW + 31, statuses=[st("running", None, None, ts=NOW + 20, at=NOW + 31)])
        assert state_of(db) == "offline"
        # a forged far-future ts of an old agent is clamped: it cannot pin the row as running
        db.store([], NOW + 40, statuses=[st("running", None, None, ts=9e10, at=NOW + 40)])
        db.store([], NOW + 50, statuses=[st("offline", None, None, ts=NOW + 45, at=NOW + 50)])
        assert state_of(db) == "offline"
    finally:
        db.close()


def test_a_forged_order_far_ahead_cannot_pin_the_device_row(url: str) -> None:
    db = CollectorDb(url)
    try:
        db.migrate()
        db.store([], NOW, statuses=[st("running", 2, 6)])
        # forged: boot 2^31 (or a link 10^9 ahead) would win every later comparison for ever
        db.store([], NOW + 1, statuses=[st("offline", 2, 7, boot=2**31, at=NOW + 1)])
        # the forged one was ordered by its (clamped) ts: the device's next status, sent later, wins
        db.store([], NOW + 2, statuses=[st("running", 2, 8, ts=NOW + 2, at=NOW + 2)])
        assert state_of(db) == "running"
        db.store([], NOW + 3, statuses=[st("offline", 10**9, 1, at=NOW + 3)])
        db.store([], NOW + 4, statuses=[st("running", 2, 9, ts=NOW + 4, at=NOW + 4)])
        assert state_of(db) == "running"
        # a jump within the bounds (a device that rebooted 999 times while away) is taken
        db.store([], NOW + 5, statuses=[st("draining", 1, 1, boot=1000, at=NOW + 5)])
        db.store([], NOW + 6, statuses=[st("running", 5, 50, boot=999, at=NOW + 6)])
        assert state_of(db) == "draining"
    finally:
        db.close()


def test_a_confirmation_covers_what_the_database_holds_and_never_a_conflict_over_the_bound(url: str) -> None:
    """Confirmed (the device may delete it): stored now, stored before, or kept in conflicts. Not
    confirmed: a conflict over the per-device bound (only counted: the database does not hold it,
    so its device must keep it) and a seq held back as implausible once the bound is reached."""
    from edge_agent.core.messages.confirm import covers, decode

    db = CollectorDb(url, limits=Limits(conflicts_max_per_device=2, seq_jump_max=10))
    try:
        db.migrate()
        db.store([r for s in range(1, 6) for r in forged("cam", s)], NOW)  # first in: the forgeries
        db.store([r for s in range(1, 6) for r in rec("cam", s)], NOW)  # the real ones: conflicts
        assert db.last_conflicts == {"cam": 5}
        held = {int(s) for (s,) in db._x("SELECT seq FROM conflicts WHERE device = 'cam'").fetchall()}
        assert held == {1, 2}  # the bound: two kept, three only counted
        ranges = decode(db.confirms["cam"])[1]
        # the watermark is of keys: 1..5 are in messages (the forged copies won the key). So the
        # real 3..5, over the bound, are covered too: without broker ACLs and past the bound a
        # forger can cost real results (docs/threat-model.md); with enrollment it cannot publish
        assert all(covers(ranges, s) for s in range(1, 6))
        db.store(rec("cam", 100), NOW)  # 95 above the highest known (5): held, but over the bound
        assert db.last_conflicts == {"cam": 1}
        assert "cam" not in db.confirms  # nothing of the round is held: nothing confirmed
        assert db._x("SELECT COUNT(*) FROM messages WHERE seq = 100").fetchone()[0] == 0
    finally:
        db.close()


def test_a_kept_implausible_seq_is_confirmed_it_is_in_conflicts(url: str) -> None:
    from edge_agent.core.messages.confirm import covers, decode

    db = CollectorDb(url, limits=Limits(seq_jump_max=10))
    try:
        db.migrate()
        db.store(rec("cam", 1), NOW)
        db.store(rec("cam", 500), NOW)  # held as a conflict, kept: the database has it
        assert db.last_conflicts == {"cam": 1}
        assert covers(decode(db.confirms["cam"])[1], 500)
    finally:
        db.close()
