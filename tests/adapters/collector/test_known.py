"""The PostgreSQL collector's own knowledge of a device (adapters/collector/known.py): a round skips
the reads of a device only while ``devices.writes`` proves nobody else wrote it since this
collector's last commit. Each writer here (a second collector, a retire, the purge, a partition
drop) leaves the cached highest seq or islands wrong; trusting the cache then makes the round store
or confirm something else than the reads would, which each test checks against the database."""

from __future__ import annotations

import json
import math
import random
import time
from collections.abc import Iterator

import pytest
from support.collector import NOW, Postgres, rec

from edge_agent.adapters.collector import partitions, purge
from edge_agent.adapters.collector.db import CollectorDb
from edge_agent.adapters.collector.known import after, around
from edge_agent.adapters.collector.trust import Limits
from edge_agent.core.messages.confirm import MAX_BOOTS, MAX_RANGES, decode
from edge_agent.core.messages.fleet import Record, parse

DAY = 86400.0


def body_rec(dev: str, seq: int, text: str = "a", ts: float = NOW) -> list[Record]:
    body = {"id": f"{dev}-{seq}", "seq": seq, "boot": 1, "device_id": dev, "ts": ts + seq, "x": text}
    return parse("edge", f"edge/{dev}/detections", json.dumps(body).encode(), NOW).records


def seqs(dev: str, lo: int, hi: int, boot: int = 1) -> list[Record]:
    return [r for s in range(lo, hi + 1) for r in rec(dev, s, boot=boot)]


@pytest.fixture()
def url(postgres: Postgres) -> str:
    d = CollectorDb(postgres.url)
    d.conn.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public")
    d.close()
    return postgres.url


@pytest.fixture()
def two(url: str) -> Iterator[tuple[CollectorDb, CollectorDb]]:
    a, b = CollectorDb(url, limits=Limits(seq_jump_max=5)), CollectorDb(url)
    a.migrate()
    try:
        yield a, b
    finally:
        a.close()
        b.close()


def islands(db: CollectorDb) -> list[tuple[int, int, int]]:
    rows = db._x("SELECT boot, lo, hi FROM confirmed WHERE device = 'd1' ORDER BY boot, lo").fetchall()
    return [(int(b), int(lo), int(hi)) for b, lo, hi in rows]


def test_a_device_only_this_collector_writes_is_not_read_again(two: tuple[CollectorDb, CollectorDb]) -> None:
    a, _ = two
    assert a.store(seqs("d1", 1, 3), NOW) == 3 and (a.known.hits, a.known.misses) == (0, 1)
    assert a.store(seqs("d1", 4, 6), NOW) == 3 and (a.known.hits, a.known.misses) == (1, 1)
    assert a.store(seqs("d1", 6, 8), NOW) == 2  # seq 6 is at or below the highest: read
    assert (a.known.hits, a.known.misses) == (1, 2) and a.last_duplicates == 1
    assert a.store(seqs("d1", 10, 10), NOW) == 1 and a.known.hits == 2
    assert islands(a) == [(1, 1, 8), (1, 10, 10)] and decode(a.confirms["d1"]) == {1: [(1, 8), (10, 10)]}


def test_a_second_collector_of_the_group_makes_the_next_round_read(
    two: tuple[CollectorDb, CollectorDb],
) -> None:
    """Trusted, the first collector would take seq 4 for new (a UniqueViolation, then the staging
    path counts it a duplicate: the conflict lost) and keep its old island (1..3), confirming
    7..9 as a second island next to the other's 4..6."""
    a, b = two
    assert a.store([*body_rec("d1", 1), *body_rec("d1", 2), *body_rec("d1", 3)], NOW) == 3
    assert b.store([*body_rec("d1", 4, "other"), *body_rec("d1", 5), *body_rec("d1", 6)], NOW) == 3
    assert a.store([*body_rec("d1", 4), *body_rec("d1", 7)], NOW) == 1
    assert a.last_conflicts == {"d1": 1} and a.known.misses == 2 and a.known.hits == 0
    assert islands(a) == [(1, 1, 7)] and decode(a.confirms["d1"]) == {1: [(1, 7)]}
    assert b.store(body_rec("d1", 8), NOW) == 1 and a.store(body_rec("d1", 9), NOW) == 1
    assert islands(a) == [(1, 1, 9)] and a.known.hits == 0


def test_a_retired_and_purged_device_is_read_again(two: tuple[CollectorDb, CollectorDb]) -> None:
    """Its messages are gone: trusted, the cached highest seq (3) would make seq 20 a jump of more
    than 5 (a conflict, not stored)."""
    a, b = two
    assert a.store(seqs("d1", 1, 3), NOW) == 3
    assert b.retire("d1", purge=True) == (3, 0)
    assert a.store(seqs("d1", 20, 20), NOW) == 1 and a.last_conflicts == {}
    assert a.known.hits == 0 and islands(a) == [(1, 1, 3), (1, 20, 20)]


def test_the_purge_makes_the_next_round_read(two: tuple[CollectorDb, CollectorDb]) -> None:
    a, b = two
    now = time.time()
    assert a.store([r for s in (1, 2, 3) for r in body_rec("d1", s, ts=now - 2 * DAY)], now) == 3
    assert purge.purge_batch(b, "results", now - DAY, 100) == 3
    assert a.store(body_rec("d1", 20, ts=now), now) == 1 and a.last_conflicts == {}
    assert a.known.hits == 0


def test_a_partition_drop_makes_the_next_round_read(two: tuple[CollectorDb, CollectorDb]) -> None:
    a, b = two
    now = time.time()
    if now % DAY > DAY - 300:
        now -= 300  # the old rows stay in one day partition
    assert a.store([r for s in (1, 2, 3) for r in body_rec("d1", s, ts=now - 2 * DAY)], now) == 3
    assert partitions.convert(b, now)[0] == 3
    cutoff = (math.floor((now - 2 * DAY) / DAY) + 1) * DAY
    assert partitions.drop_before(b, cutoff)[0] >= 1
    assert int(b._x("SELECT COUNT(*) FROM messages").fetchone()[0]) == 0
    assert a.store(body_rec("d1", 20, ts=now), now) == 1 and a.last_conflicts == {}
    assert a.known.hits == 0


def test_a_boot_older_than_the_cached_ones_is_read(two: tuple[CollectorDb, CollectorDb]) -> None:
    """Nine boots: the read-back holds the newest eight; boot 0's island 1..10 is not in it, and
    a seq above every stored one must still grow that island (not make a second one beside it)."""
    a, _ = two
    assert a.store([r for b in range(MAX_BOOTS + 1) for r in seqs("d1", 1, 10, boot=b)], NOW) == 90
    assert a.store(seqs("d1", 11, 11, boot=0), NOW) == 1 and a.known.hits == 0
    assert islands(a)[:1] == [(0, 1, 11)]
    assert a.store(seqs("d1", 12, 12, boot=MAX_BOOTS), NOW) == 1 and a.known.hits == 1


def test_around_answers_only_for_what_the_tail_holds_whole() -> None:
    full = [(s, s) for s in range(10, 10 + 2 * MAX_RANGES, 2)]  # MAX_RANGES islands from 10 up
    assert around({1: full}, 1, 9, 11) is None  # below the lowest cached island: unknown
    assert around({1: full}, 1, 10, 13) == [(10, 10), (12, 12)]
    assert around({1: full[:3]}, 1, 1, 11) == [(10, 10)]  # fewer than MAX_RANGES: all of them
    boots = {b: [(1, 5)] for b in range(2, 2 + MAX_BOOTS)}
    assert around(boots, 1, 5, 7) is None  # older than every cached boot of a full tail
    assert around(boots, 2 + MAX_BOOTS, 5, 7) == []  # newer: it has no island
    assert around({2: [(1, 5)]}, 1, 5, 7) == []  # a tail of few boots holds them all
    assert around(boots, 3, 5, 7) == [(1, 5)] and around(boots, 3, 7, 9) == []


def newest(db: CollectorDb, dev: str) -> dict[int, list[tuple[int, int]]]:
    """What confirmed.NEWEST_PG reads: the newest MAX_BOOTS boots' highest MAX_RANGES islands."""
    out: dict[int, list[tuple[int, int]]] = {}
    boots = db._x(
        "SELECT DISTINCT boot FROM confirmed WHERE device = ? ORDER BY boot DESC LIMIT ?", (dev, MAX_BOOTS)
    ).fetchall()
    for (b,) in boots:
        rows = db._x(
            "SELECT lo, hi FROM confirmed WHERE device = ? AND boot = ? ORDER BY lo DESC LIMIT ?",
            (dev, b, MAX_RANGES),
        ).fetchall()
        out[int(b)] = sorted((int(lo), int(hi)) for lo, hi in rows)
    return out


def test_the_islands_a_round_works_out_are_the_ones_the_database_holds(
    two: tuple[CollectorDb, CollectorDb],
) -> None:
    """Rounds of seqs above each device's highest (known answers them), with gaps (more than
    MAX_RANGES islands: a boot's tail full), new boots (more than MAX_BOOTS) and, now and then,
    a seq filling a gap (read): after each round the islands the cache holds are those the
    database returns, and the confirmation sent holds every island of the round."""
    a, _ = two
    rnd = random.Random(5)
    top = {"d1": 0, "d2": 0}
    boot = {"d1": 1, "d2": 1}
    for n in range(60):
        batch: list[Record] = []
        boot["d1"] += n % 5 == 4  # d1: a new boot every 5 rounds; d2: one boot, many gaps
        for dev in top:
            for _ in range(rnd.randrange(1, 6)):
                top[dev] += rnd.choice((1, 1, 2, 3) if dev == "d1" else (1, 2, 3))
                batch += rec(dev, top[dev], boot=boot[dev])
            if rnd.random() < 0.15:
                batch += rec(dev, rnd.randrange(1, top[dev] + 1), boot=boot[dev])
        a.store(batch, NOW)
        for dev in top:
            assert a.known.entries[dev].tail == newest(a, dev)
            sent = decode(a.confirms[dev])
            for r in batch:
                if r.device == dev:
                    assert any(lo <= r.seq <= hi for lo, hi in sent[r.boot]), r
    assert a.known.hits > 60 and len(newest(a, "d2")[1]) == MAX_RANGES and len(newest(a, "d1")) == MAX_BOOTS


def test_after_needs_a_read_only_when_a_full_boot_lost_islands() -> None:
    full = [(s, s) for s in range(10, 10 + 2 * MAX_RANGES, 2)]
    top = full[-1][0]
    grown = after({1: full}, {1: ([full[-1]], [(top, top + 1)])})  # the top island grows: as many
    assert grown == {1: [*full[:-1], (top, top + 1)]}
    joined = [(full[-2][0], top)]  # two islands become one: the one below the tail is unknown
    assert after({1: full}, {1: (full[-2:], joined)}) is None
    assert after({1: full[:3]}, {1: (full[1:3], [(12, 14)])}) == {1: [(10, 10), (12, 14)]}
    many = after({1: full}, {1: ([], [(top + 2, top + 2)])})  # one more: the lowest falls off
    assert many == {1: [*full[1:], (top + 2, top + 2)]}
    boots = {b: [(1, 5)] for b in range(1, 1 + MAX_BOOTS)}
    assert after(boots, {1: ([], [])}) == boots  # nothing written
    newer = after(boots, {9: ([], [(1, 1)])})
    assert newer is not None and sorted(newer) == list(range(2, 2 + MAX_BOOTS))
