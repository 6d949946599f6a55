"""SQLite's round cache (adapters/collector/known.py, trust.reads_sqlite): a device this connection
alone wrote since its last round is not read again; ``PRAGMA data_version`` proves no other
connection committed in between, and this connection's own purge and retire forget what they
touch. Each test checks what a wrong cache would break: a stored key taken as new, a purged
seq confirmed, islands that are not what ``messages`` holds."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.collector import NOW, rec, sqlite_url

from edge_agent.adapters.collector import purge
from edge_agent.adapters.collector.db import CollectorDb
from edge_agent.adapters.collector.trust import Limits
from edge_agent.core.messages.confirm import decode
from edge_agent.core.messages.fleet import Record, parse

DAY = 86_400.0


@pytest.fixture
def db(tmp_path: Path) -> Iterator[CollectorDb]:
    d = CollectorDb(sqlite_url(tmp_path / "fleet.db"))
    d.migrate()
    try:
        yield d
    finally:
        d.close()


def seqs(db: CollectorDb, dev: str = "d1") -> list[int]:
    rows = db._x("SELECT seq FROM messages WHERE device = ? ORDER BY seq", (dev,)).fetchall()
    return [int(s) for (s,) in rows]


def islands(db: CollectorDb, dev: str = "d1") -> list[tuple[int, int]]:
    rows = db._x("SELECT lo, hi FROM confirmed WHERE device = ? ORDER BY boot, lo", (dev,)).fetchall()
    return [(int(a), int(b)) for a, b in rows]


def aged(dev: str, seq: int, ts: float) -> list[Record]:
    body = {"id": f"{dev}-{seq}", "seq": seq, "boot": 1, "device_id": dev, "ts": ts}
    return parse("edge", f"edge/{dev}/detections", json.dumps(body).encode(), ts).records


def test_rounds_of_one_connection_hit_and_a_redelivery_below_the_highest_is_still_read(
    db: CollectorDb,
) -> None:
    assert db.store([*rec("d1", 1), *rec("d1", 2)], NOW) == 2
    assert db.store(rec("d1", 3), NOW) == 1
    assert (db.known.hits, db.known.misses) == (1, 1)
    # seq 2 is at or below the cached highest: read, found, a duplicate (never inserted twice)
    assert db.store([*rec("d1", 2), *rec("d1", 4)], NOW) == 1 and db.last_duplicates == 1
    assert (db.known.hits, db.known.misses) == (1, 2)
    assert seqs(db) == [1, 2, 3, 4] and islands(db) == [(1, 4)]
    assert decode(db.confirms["d1"]) == {1: [(1, 4)]}


def test_any_commit_of_another_connection_makes_every_device_read_again(db: CollectorDb) -> None:
    """data_version does not say what the other connection wrote: every entry goes."""
    db.store([*rec("d1", 1), *rec("d2", 1)], NOW)
    other = sqlite3.connect(db.url.removeprefix("sqlite:///"))
    other.execute(
        "INSERT INTO messages (device, boot, seq, kind, msg_id, time, received, body) "
        "VALUES ('d1', 1, 2, 'detections', 'forged', 1.0, 1.0, '{}')"
    )
    other.commit()
    other.close()
    # d1's seq 2 is stored by the other writer: read, so the round's seq 2 is a conflict, not new
    assert db.store([*rec("d1", 2), *rec("d2", 2)], NOW) == 1
    assert (db.known.hits, db.known.misses) == (0, 4)
    assert db.last_conflicts == {"d1": 1}
    assert db.store([*rec("d1", 3), *rec("d2", 3)], NOW) == 2
    assert (db.known.hits, db.known.misses) == (2, 4)
    assert islands(db) == [(1, 3)] and islands(db, "d2") == [(1, 3)]


def test_its_own_purge_forgets_the_purged_devices_only(db: CollectorDb) -> None:
    now = time.time()
    assert (
        db.store([*aged("d1", 1, now - 2 * DAY), *aged("d1", 2, now - 2 * DAY), *aged("d2", 1, now)], now)
        == 3
    )
    db.store([*aged("d1", 3, now), *aged("d2", 2, now)], now)
    hits = db.known.hits
    assert purge.purge_batch(db, "results", now - DAY, 100) == 2  # d1's seqs 1 and 2
    db.store([*aged("d1", 4, now), *aged("d2", 3, now)], now)
    assert db.known.hits == hits + 1  # d2 only
    assert seqs(db) == [3, 4] and islands(db) == [(1, 4)]  # the watermark keeps what was stored


def test_a_retired_device_that_comes_back_is_read_not_taken_from_the_cache(db: CollectorDb) -> None:
    db.limits = Limits(seq_jump_max=5)
    db.store([*rec("d1", 1), *rec("d1", 2)], NOW)
    assert db.retire("d1", purge=True) == (2, 0)
    # a new start: nothing stored bounds its seq (a cached highest of 2 made seq 50 a conflict)
    assert db.store(rec("d1", 50), NOW) == 1 and db.last_conflicts == {}
    assert seqs(db) == [50]


def test_a_failed_round_forgets_everything(db: CollectorDb, monkeypatch: pytest.MonkeyPatch) -> None:
    db.store(rec("d1", 1), NOW)
    assert db.known.entries

    def broken(*_: object, **__: object) -> int:
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(db, "_insert_records", broken)
    with pytest.raises(sqlite3.OperationalError):
        db.store(rec("d1", 2), NOW)
    assert not db.known.entries
    monkeypatch.undo()
    assert db.store(rec("d1", 2), NOW) == 1 and islands(db) == [(1, 2)]
