"""The outbox's SENT state (``[mqtt] confirm = "collector"``) on real SQLite files: a PUBACK keeps
the row (durably, across a reopen) until a confirmation covers it, an unconfirmed one is resent
after the timeout (doubling), caps count SENT rows, and an old queue file is migrated in place."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from support.outbox import TOPIC, big_limits

from edge_agent.adapters.outbox import claims as claims_mod
from edge_agent.adapters.outbox.outbox import Outbox
from edge_agent.adapters.outbox.views import read_stats

T0 = 1_800_000_000.0


def filled(path: Path, n: int, timeout: float | None = 10.0, **limits: object) -> Outbox:
    ob = Outbox(path, big_limits(**limits), flush_interval_s=60, flush_batch=10**6)
    ob.confirm_with(timeout)
    for i in range(n):
        ob.put(TOPIC, {"n": i})
    ob.flush()
    return ob


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    now = [T0]
    monkeypatch.setattr(claims_mod.time, "time", lambda: now[0])
    return now


def test_a_puback_makes_a_row_sent_and_a_confirmation_deletes_it(tmp_path: Path, clock: list[float]) -> None:
    with filled(tmp_path / "q.db", 10) as ob:
        msgs = ob.claim(10)
        assert [m.seq for m in msgs] == list(range(1, 11)) and {m.boot for m in msgs} == {ob.boot}
        assert ob.ack([m.rowid for m in msgs]) == 0  # nothing deleted: kept as SENT
        st = ob.stats()
        assert st["pending"] == 10 and st["sent"] == 10 and st["inflight"] == 0
        assert ob.claim(10) == []  # not resent before the timeout
        assert ob.confirm({ob.boot: [(2, 4)], ob.boot + 1: [(1, 10)]}) == 3  # another boot: not these
        assert ob.stats()["sent"] == 7 and ob.pending() == 7
        assert ob.confirm({ob.boot: [(1, 10)]}) == 7
        assert ob.stats()["pending"] == 0 and ob.stats()["sent"] == 0


def test_a_confirmation_before_the_puback_deletes_the_row_at_its_puback(
    tmp_path: Path, clock: list[float]
) -> None:
    with filled(tmp_path / "q.db", 4) as ob:
        msgs = ob.claim(4)
        assert ob.confirm({ob.boot: [(1, 2)]}) == 0  # in flight, not SENT yet: nothing deleted
        assert ob.ack([m.rowid for m in msgs]) == 2  # seqs 1, 2 confirmed already: deleted now
        assert ob.stats()["sent"] == 2


def test_an_unconfirmed_row_is_resent_after_the_timeout_doubling(tmp_path: Path, clock: list[float]) -> None:
    with filled(tmp_path / "q.db", 3, timeout=10.0) as ob:
        ids = [m.rowid for m in ob.claim(3)]
        ob.ack(ids)
        clock[0] = T0 + 9.9
        assert ob.claim(3) == []
        clock[0] = T0 + 10.0
        again = ob.claim(3)
        assert [m.rowid for m in again] == ids and {m.attempts for m in again} == {2}
        ob.ack(ids)  # second PUBACK: due 20 s later (doubled)
        clock[0] = T0 + 10.0 + 19.9
        assert ob.claim(3) == []
        clock[0] = T0 + 10.0 + 20.0
        assert len(ob.claim(3)) == 3


def test_the_resend_wait_is_bounded(tmp_path: Path, clock: list[float]) -> None:
    with filled(tmp_path / "q.db", 1, timeout=10.0) as ob:
        for _ in range(12):  # 10 * 2^11 s would be 5.7 h: the wait stops at CONFIRM_MAX_S
            (m,) = ob.claim(1)
            ob.ack([m.rowid])
            clock[0] += claims_mod.CONFIRM_MAX_S
        assert len(ob.claim(1)) == 1


def test_puback_mode_deletes_on_the_puback_as_before(tmp_path: Path) -> None:
    with filled(tmp_path / "q.db", 5, timeout=None) as ob:
        assert ob.ack([m.rowid for m in ob.claim(5)]) == 5
        assert ob.stats()["pending"] == 0 and ob.stats()["sent"] == 0


def test_sent_survives_a_reopen_and_queue_stats_shows_it(tmp_path: Path, clock: list[float]) -> None:
    path = tmp_path / "q.db"
    with filled(path, 6) as ob:
        ob.ack([m.rowid for m in ob.claim(4)])
    st = read_stats(path)
    assert st["pending"] == 6 and st["sent"] == 4 and st["oldest_unconfirmed_s"] is not None
    with Outbox(path, big_limits()) as ob:
        ob.confirm_with(10.0)
        assert [m.seq for m in ob.claim(10)] == [5, 6]  # the two PENDING; the SENT wait
        assert ob.stats()["sent"] == 4
        clock[0] = T0 + 11
        assert [m.seq for m in ob.claim(10)] == [1, 2, 3, 4]
        assert ob.confirm({ob.boot - 1: [(1, 4)]}) == 4  # the previous run's boot


def test_a_released_row_below_the_sent_ones_is_claimed_again(tmp_path: Path, clock: list[float]) -> None:
    with filled(tmp_path / "q.db", 20) as ob:
        first = ob.claim(5)
        second = ob.claim(10)
        ob.ack([m.rowid for m in second])  # SENT rows above the five in flight
        ob.release([m.rowid for m in first])  # e.g. the connection dropped
        assert [m.seq for m in ob.claim(10)] == [1, 2, 3, 4, 5, 16, 17, 18, 19, 20]


def test_caps_count_sent_rows(tmp_path: Path, clock: list[float]) -> None:
    with filled(tmp_path / "q.db", 10, max_messages=10) as ob:
        ob.ack([m.rowid for m in ob.claim(10)])
        for i in range(4):
            ob.put(TOPIC, {"more": i})
        ob.flush()
        st = ob.stats()
        assert st["pending"] == 10 and st["dropped"] == 4 and st["sent"] == 6  # the oldest (SENT) went


OLD_SCHEMA = """
CREATE TABLE messages(
    id INTEGER PRIMARY KEY AUTOINCREMENT, msg_id TEXT NOT NULL, topic TEXT NOT NULL,
    payload BLOB NOT NULL, size INTEGER NOT NULL, created REAL NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0, state INTEGER NOT NULL DEFAULT 0);
CREATE TABLE meta(key TEXT PRIMARY KEY, value INTEGER NOT NULL);
INSERT INTO meta(key, value) VALUES ('rows', 2);
INSERT INTO messages(msg_id, topic, payload, size, created) VALUES ('a', 'edge/d/detections', x'7b7d', 2, 1.0);
INSERT INTO messages(msg_id, topic, payload, size, created) VALUES ('b', 'edge/d/detections', x'7b7d', 2, 2.0);
"""


def test_an_old_queue_file_is_migrated_in_place_and_its_rows_go_on_the_puback(
    tmp_path: Path, clock: list[float]
) -> None:
    path = tmp_path / "q.db"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.executescript(OLD_SCHEMA)
    conn.close()
    assert read_stats(path)["sent"] == 0  # queue stats on the old file: no SENT column yet
    with Outbox(path, big_limits()) as ob:
        ob.confirm_with(10.0)
        old = ob.claim(10)
        assert [(m.msg_id, m.seq, m.boot) for m in old] == [("a", None, None), ("b", None, None)]
        ob.put(TOPIC, {"new": 1})
        ob.flush()
        new = ob.claim(10)
        assert new[0].seq is not None
        # rows without their numbers cannot be confirmed: deleted on the PUBACK, as before
        assert ob.ack([m.rowid for m in old + new]) == 2 and ob.stats()["sent"] == 1
    cols = {r[1] for r in sqlite3.connect(path).execute("PRAGMA table_info(messages)")}
    assert {"boot", "seq", "due"} <= cols
