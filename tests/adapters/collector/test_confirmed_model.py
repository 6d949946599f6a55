"""The commit watermark against a model (issue 36, the collector-confirmed mutation run), on SQLite
and PostgreSQL: after every round of a seeded random run, the ``confirmed`` table holds exactly the
islands of what ``messages`` holds, and each device's published confirmation is this round's
islands plus the newest MAX_BOOTS boots' highest MAX_RANGES islands (rounds on one CollectorDb:
PostgreSQL's later rounds answer from the known tails, adapters.collector.known)."""

from __future__ import annotations

import random

from support.collector import NOW, rec

from edge_agent.adapters.collector.db import CollectorDb
from edge_agent.core.messages.confirm import MAX_BOOTS, MAX_RANGES, Confirms, bound, decode, ranges_of
from edge_agent.core.messages.fleet import Record

Model = dict[str, dict[int, set[int]]]  # device -> boot -> the seqs stored


def table(db: CollectorDb) -> dict[tuple[str, int], list[tuple[int, int]]]:
    out: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for d, b, lo, hi in db._x(
        "SELECT device, boot, lo, hi FROM confirmed ORDER BY device, boot, lo"
    ).fetchall():
        out.setdefault((str(d), int(b)), []).append((int(lo), int(hi)))
    return out


def expected(model: Model, device: str, round_seqs: dict[int, set[int]]) -> Confirms:
    boots = model[device]
    newest = sorted(boots, reverse=True)[:MAX_BOOTS]
    stored = {b: ranges_of(boots[b])[-MAX_RANGES:] for b in newest}
    keep = {
        b: [r for r in ranges_of(boots[b]) if any(r[0] <= s <= r[1] for s in seqs)]
        for b, seqs in round_seqs.items()
    }
    return bound(stored, keep)


def a_round(rng: random.Random, model: Model) -> list[Record]:
    out: list[Record] = []
    # "a": dense seqs over ten boots (old boots come back: a resend); "w": one boot, only even
    # seqs, so its islands pass MAX_RANGES; "n": a few seqs, sometimes only stored ones again
    for s in rng.sample(range(1, 80), rng.randint(1, 12)):
        out += rec("a", s, boot=rng.randint(1, 10))
    for s in rng.sample(range(2, 600, 2), rng.randint(0, 14)):
        out += rec("w", s)
    known = sorted(model.get("n", {}).get(3, set()))
    pool = known if known and rng.random() < 0.3 else list(range(1, 30))
    for s in rng.sample(pool, min(len(pool), rng.randint(1, 4))):
        out += rec("n", s, boot=3)
    # "m": as a live device sends, upward from its highest, a gap now and then, a reboot rarely
    # (PostgreSQL answers its rounds from the known tails: the cache's path of confirmed.update)
    boots = model.get("m", {1: {0}})
    boot = max(boots) + (rng.random() < 0.1)
    top = max(boots.get(boot, {0}))
    for s in range(top + 1 + rng.choice([0, 0, 1, 3]), top + 2 + rng.randint(1, 6)):
        out += rec("m", s, boot=boot)
    return out


def test_every_round_the_islands_and_the_confirmation_follow_what_is_stored(url: str) -> None:
    rng = random.Random(36)
    model: Model = {}
    db = CollectorDb(url)
    try:
        db.migrate()
        for i in range(30):
            records = a_round(rng, model)
            rng.shuffle(records)
            db.store(records, NOW + i)
            this: dict[str, dict[int, set[int]]] = {}
            for r in records:
                model.setdefault(r.device, {}).setdefault(r.boot, set()).add(r.seq)
                this.setdefault(r.device, {}).setdefault(r.boot, set()).add(r.seq)
            want_table = {(d, b): ranges_of(seqs) for d, boots in model.items() for b, seqs in boots.items()}
            assert table(db) == want_table, f"round {i}"
            assert set(db.confirms) == set(this), f"round {i}"
            for d, seqs in this.items():
                assert decode(db.confirms[d]) == expected(model, d, seqs), f"round {i}, device {d}"
        assert len(ranges_of(model["w"][1])) > MAX_RANGES  # the bound was reached
        assert len(model["a"]) == 10 > MAX_BOOTS
        if db.dialect == "postgresql":
            assert db.known.hits > 10  # the cached path was taken
    finally:
        db.close()


def test_an_island_that_grows_downward_or_joins_two_is_rewritten_not_duplicated(url: str) -> None:
    db = CollectorDb(url)
    try:
        db.migrate()
        db.store(rec("d", 10) + rec("d", 20), NOW)
        db.store(rec("d", 9), NOW)  # grows downward: its lo moves
        assert table(db) == {("d", 1): [(9, 10), (20, 20)]}
        db.store(rec("d", 21), NOW)  # grows upward: its lo stays
        assert table(db) == {("d", 1): [(9, 10), (20, 21)]}
        db.store([r for s in range(11, 20) for r in rec("d", s)], NOW)  # joins both
        assert table(db) == {("d", 1): [(9, 21)]}
        assert decode(db.confirms["d"]) == {1: [(9, 21)]}
        db.store(rec("d", 5) + rec("d", 7) + rec("d", 8), NOW)  # below: one new, one joined
        assert table(db) == {("d", 1): [(5, 5), (7, 21)]}
        assert decode(db.confirms["d"]) == {1: [(5, 5), (7, 21)]}
    finally:
        db.close()
