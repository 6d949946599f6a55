"""The collector's commit watermark: the ``confirmed`` islands follow what ``messages`` holds, in the
round's own transaction (a rolled-back round confirms nothing), on SQLite and PostgreSQL; the
published confirmation holds this round's islands and the newest boots'."""

from __future__ import annotations

import pytest
from support.collector import NOW, rec

from edge_agent.adapters.collector import confirmed
from edge_agent.adapters.collector.db import CollectorDb
from edge_agent.core.messages.confirm import MAX_RANGES, decode


def islands(db: CollectorDb, device: str) -> list[tuple[int, int, int]]:
    rows = db._x(
        "SELECT boot, lo, hi FROM confirmed WHERE device = ? ORDER BY boot, lo", (device,)
    ).fetchall()
    return [(int(b), int(lo), int(hi)) for b, lo, hi in rows]


def test_islands_merge_as_seqs_arrive_and_duplicates_are_confirmed_again(url: str) -> None:
    db = CollectorDb(url)
    try:
        db.migrate()
        db.store([*rec("d1", 1), *rec("d1", 2), *rec("d1", 3), *rec("d1", 7), *rec("d2", 1, boot=4)], NOW)
        assert islands(db, "d1") == [(1, 1, 3), (1, 7, 7)] and islands(db, "d2") == [(4, 1, 1)]
        assert decode(db.confirms["d1"]) == {1: [(1, 3), (7, 7)]}
        assert decode(db.confirms["d2"]) == {4: [(1, 1)]}
        db.store([*rec("d1", 5), *rec("d1", 4), *rec("d1", 6)], NOW)  # fills the hole: one island
        assert islands(db, "d1") == [(1, 1, 7)] and set(db.confirms) == {"d1"}
        assert decode(db.confirms["d1"]) == {1: [(1, 7)]}
        db.store(rec("d1", 2), NOW)  # a resend of a stored one: confirmed again, nothing changes
        assert decode(db.confirms["d1"]) == {1: [(1, 7)]} and islands(db, "d1") == [(1, 1, 7)]
        db.store(rec("d1", 1, boot=2), NOW)  # a new boot: both boots in the message
        assert decode(db.confirms["d1"]) == {1: [(1, 7)], 2: [(1, 1)]}
    finally:
        db.close()


def test_a_rolled_back_round_confirms_nothing(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    db = CollectorDb(url)
    try:
        db.migrate()
        db.store(rec("d1", 1), NOW)
        real = confirmed.update

        def update_then_fail(
            d: CollectorDb,
            records: object,
            islands: object = None,
            commit: bool = False,
            tails: object = None,
            cached: object = None,
            planned: object = None,
        ) -> object:
            real(d, records, islands)  # type: ignore[arg-type] # never its COMMIT
            raise db.errors()[0]("the commit fails after the islands were written")

        monkeypatch.setattr(confirmed, "update", update_then_fail)
        with pytest.raises(db.errors()):
            db.store(rec("d1", 2), NOW)
        assert islands(db, "d1") == [(1, 1, 1)]  # seq 2 not stored: never confirmed
        assert decode(db.confirms["d1"]) == {1: [(1, 1)]}  # the last committed round's
        assert db.message_stats() == (1, 1)
    finally:
        db.close()


def test_the_message_keeps_the_rounds_island_when_it_fell_off_the_list(url: str) -> None:
    db = CollectorDb(url)
    try:
        db.migrate()
        every_other = [r for s in range(1, 2 * (MAX_RANGES + 10), 2) for r in rec("d1", s)]
        db.store(every_other, NOW)
        db.store(rec("d1", 1), NOW)  # the lowest island, far below the highest MAX_RANGES
        got = decode(db.confirms["d1"])[1]
        assert (1, 1) in got and len(got) == MAX_RANGES
        assert got[-1] == (2 * (MAX_RANGES + 10) - 1,) * 2  # and the highest
    finally:
        db.close()
