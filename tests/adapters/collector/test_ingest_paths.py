"""The store's insert paths and its set-based watermarks, on SQLite and a real PostgreSQL.

PostgreSQL has two insert paths (adapters/collector/ingest.py): the new records COPYed straight
into ``messages`` under the round's device locks, and, when another writer took a key first (the
COPY's UniqueViolation), the round redone with a staging table + ``INSERT ... ON CONFLICT``.
``path = "staged"`` makes every round take the second one (its COPY refused as a race would), and
one test makes the race real with a second connection. The ``confirmed`` islands are written by
one set-based statement per pass for every device of a round; each test checks them against what
``messages`` holds, so a wrong merge, a lost update or an island claiming an unstored seq fails.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.collector import NOW, Postgres, rec, sqlite_url, status

from edge_agent.adapters.collector import ingest
from edge_agent.adapters.collector.db import CollectorDb
from edge_agent.adapters.collector.trust import Limits
from edge_agent.core.messages.confirm import decode, ranges_of
from edge_agent.core.messages.fleet import Record, parse


def body_rec(dev: str, seq: int, boot: int = 1, text: str = "a") -> list[Record]:
    body = {
        "id": f"{dev}-{boot}-{seq}",
        "seq": seq,
        "boot": boot,
        "device_id": dev,
        "ts": NOW + seq,
        "x": text,
    }
    return parse("edge", f"edge/{dev}/detections", json.dumps(body).encode(), NOW).records


@pytest.fixture(params=["sqlite", "postgresql", "postgresql-staged"])
def db(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[CollectorDb]:
    url = sqlite_url(tmp_path / "fleet.db")
    if request.param != "sqlite":
        url = fresh(request.getfixturevalue("pg_url"))
    if request.param == "postgresql-staged":
        from psycopg.errors import UniqueViolation

        def refused(*_: object) -> int:
            raise UniqueViolation("another writer took a key first")

        monkeypatch.setattr(ingest, "copy_pg", refused)
    d = CollectorDb(url)
    d.migrate()
    try:
        yield d
    finally:
        d.close()


@pytest.fixture
def pg_url(request: pytest.FixtureRequest) -> str:
    """The server of .ci/with_pg.py when a mutation run set one, else this module's cluster."""
    shared = os.environ.get("EDGE_AGENT_TEST_PG_URL")
    if shared:
        return shared
    pg: Postgres = request.getfixturevalue("postgres")
    return pg.url


def fresh(url: str) -> str:
    d = CollectorDb(url)
    d.conn.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public")
    d.close()
    return url


def stored(db: CollectorDb) -> dict[tuple[str, int], set[int]]:
    out: dict[tuple[str, int], set[int]] = {}
    for d, b, s in db._x("SELECT device, boot, seq FROM messages").fetchall():
        out.setdefault((str(d), int(b)), set()).add(int(s))
    return out


def islands(db: CollectorDb) -> dict[tuple[str, int], list[tuple[int, int]]]:
    out: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for d, b, lo, hi in db._x(
        "SELECT device, boot, lo, hi FROM confirmed ORDER BY device, boot, lo"
    ).fetchall():
        out.setdefault((str(d), int(b)), []).append((int(lo), int(hi)))
    return out


def watermark_is_messages(db: CollectorDb) -> None:
    """Every island is a run of stored seqs and every stored seq is in one (no conflicts here)."""
    assert islands(db) == {k: ranges_of(v) for k, v in stored(db).items()}


def test_a_duplicate_in_one_round_is_stored_once_and_counted(db: CollectorDb) -> None:
    assert db.store([*rec("d1", 1), *rec("d1", 2), *rec("d1", 1), *rec("d2", 1)], NOW) == 3
    assert db.last_duplicates == 1 and db.message_stats() == (3, 3)
    assert decode(db.confirms["d1"]) == {1: [(1, 2)]} and decode(db.confirms["d2"]) == {1: [(1, 1)]}
    watermark_is_messages(db)


def test_a_duplicate_across_rounds_changes_nothing_and_is_confirmed_again(db: CollectorDb) -> None:
    assert db.store([*rec("d1", 1), *rec("d1", 2)], NOW) == 2
    assert db.store([*rec("d1", 2), *rec("d1", 3)], NOW) == 1
    assert db.last_duplicates == 1 and db.message_stats() == (3, 3)
    assert decode(db.confirms["d1"]) == {1: [(1, 3)]}
    watermark_is_messages(db)


def test_out_of_order_seqs_merge_into_one_island(db: CollectorDb) -> None:
    assert db.store([*rec("d1", 5), *rec("d1", 1), *rec("d2", 9)], NOW) == 3
    assert islands(db) == {("d1", 1): [(1, 1), (5, 5)], ("d2", 1): [(9, 9)]}
    assert db.store([*rec("d1", 3), *rec("d2", 10), *rec("d2", 8)], NOW) == 3  # d2 grows both ways
    assert islands(db) == {("d1", 1): [(1, 1), (3, 3), (5, 5)], ("d2", 1): [(8, 10)]}
    assert db.store([*rec("d1", 4), *rec("d1", 2)], NOW) == 2  # fills both holes: three become one
    assert islands(db)[("d1", 1)] == [(1, 5)] and decode(db.confirms["d1"]) == {1: [(1, 5)]}
    assert set(db.confirms) == {"d1"}
    watermark_is_messages(db)


def test_a_conflicting_body_is_kept_apart_never_stored_over_the_first(db: CollectorDb) -> None:
    assert db.store([*body_rec("d1", 1), *body_rec("d1", 2)], NOW) == 2
    # the same key with another body: across rounds and, twice, within one
    assert (
        db.store([*body_rec("d1", 2, text="forged"), *body_rec("d1", 3), *body_rec("d1", 3, text="b")], NOW)
        == 1
    )
    assert db.last_conflicts == {"d1": 2} and db.message_stats() == (3, 3)
    bodies = {int(s): b for s, b in db._x("SELECT seq, body FROM messages WHERE device = 'd1'").fetchall()}
    texts = {s: (json.loads(b) if isinstance(b, str) else b)["x"] for s, b in bodies.items()}
    assert texts == {1: "a", 2: "a", 3: "a"}  # the first one of each key stays
    assert [(b, q) for b, q, _, _ in db.conflict_rows("d1")] == [(1, 2), (1, 3)]
    watermark_is_messages(db)


def test_many_devices_and_boots_in_one_round_each_get_their_own_islands(db: CollectorDb) -> None:
    first = [r for d in ("a", "b", "c") for b in (1, 2) for s in (1, 2, 4, 9) for r in rec(d, s, boot=b)]
    assert db.store(first, NOW) == 24
    # per device and boot: one island grows up (kept lo), one merge (two rows become one), one new
    nxt = [r for d in ("a", "b", "c") for b in (1, 2) for s in (3, 10, 20) for r in rec(d, s, boot=b)]
    assert db.store(nxt, NOW) == 18
    want = [(1, 4), (9, 10), (20, 20)]
    assert islands(db) == {(d, b): want for d in ("a", "b", "c") for b in (1, 2)}
    assert all(decode(db.confirms[d]) == {1: want, 2: want} for d in ("a", "b", "c"))
    watermark_is_messages(db)


def test_random_rounds_keep_the_watermark_equal_to_what_is_stored(db: CollectorDb) -> None:
    rnd = random.Random(7)
    sent: set[tuple[str, int, int]] = set()
    for _ in range(12):
        keys = [(f"d{rnd.randrange(4)}", rnd.randrange(1, 3), rnd.randrange(1, 40)) for _ in range(30)]
        before = len(sent)
        n = db.store([r for d, b, s in keys for r in rec(d, s, boot=b)], NOW)
        sent |= set(keys)
        assert n == len(sent) - before and n + db.last_duplicates == len(keys)
        watermark_is_messages(db)
        for d in {d for d, _, _ in keys}:  # the confirmation holds every boot's islands of the device
            got = decode(db.confirms[d])
            assert got == {b: v for (dd, b), v in islands(db).items() if dd == d}
    assert db.message_stats() == (len(sent), len(sent))


def test_a_key_another_writer_took_meanwhile_makes_the_round_redo_staged(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An older collector does not take the device locks first: it can store a key between this
    round's reads and its COPY. The COPY then fails on the unique key and the round is redone on
    the staging path, which sees the key: a duplicate (same body) or a conflict (another body)."""
    url = fresh(pg_url)  # SQLite has one writer at a time (BEGIN IMMEDIATE): no such race
    db = CollectorDb(url)
    other = CollectorDb(url)
    try:
        db.migrate()
        assert db.store(rec("d1", 1), NOW) == 1
        real = ingest.reads_pg
        calls: list[int] = []
        staged: list[int] = []
        real_staged = ingest.insert_staged

        def reads_then_race(*a: object, **k: object) -> ingest.Reads:
            got = real(*a, **k)  # type: ignore[arg-type]
            calls.append(1)
            if len(calls) == 1:  # the other writer commits seq 2 (the same message) and seq 3 (another body)
                other.conn.execute("BEGIN")
                other.conn.execute(
                    f"INSERT INTO messages ({ingest.COLS}) SELECT device, boot, seq + 1, kind, msg_id, time, "
                    "received, body, camera FROM messages WHERE device = 'd1' AND seq = 1"
                )
                other.conn.execute("COMMIT")
            return got

        def staged_spy(*a: object, **k: object) -> int:
            staged.append(1)
            return real_staged(*a, **k)  # type: ignore[arg-type]

        monkeypatch.setattr(ingest, "reads_pg", reads_then_race)
        monkeypatch.setattr(ingest, "insert_staged", staged_spy)
        # the other writer's seq 2 has the id and body of seq 1: for this round it is a conflict
        got = db.store([*rec("d1", 2), *rec("d1", 3)], NOW)
        assert len(calls) == 2 and staged == [1]  # redone once, on the staging path
        assert got == 1 and db.last_conflicts == {"d1": 1} and db.message_stats() == (3, 3)
        assert [q for _, q, _, _ in db.conflict_rows("d1")] == [2]
        assert islands(db) == {("d1", 1): [(1, 3)]}  # seq 2 is in messages (the other's), 3 is ours
    finally:
        other.close()
        db.close()


def test_the_staging_insert_skips_the_keys_already_there_and_repeated(pg_url: str) -> None:
    """The fallback's own guarantee (a key taken even between its reads and its INSERT): a key
    already stored, or twice in the batch, goes in once and is not counted as inserted."""
    db = CollectorDb(fresh(pg_url))
    try:
        db.migrate()
        assert db.store(rec("d1", 1), NOW) == 1
        db.conn.execute("BEGIN")
        n = ingest.insert_staged(db, [*rec("d1", 1), *rec("d1", 2), *rec("d1", 3), *rec("d1", 3)], NOW)
        db.conn.execute("COMMIT")
        assert n == 2 and db.message_stats() == (3, 3)
        # the staging table is emptied by each commit: nothing carried over (a purged key would
        # come back from it)
        assert db._x("SELECT COUNT(*) FROM ingest_stage").fetchone()[0] == 0
        db.conn.execute("BEGIN")
        assert ingest.insert_staged(db, rec("d1", 4), NOW) == 1
        db.conn.execute("COMMIT")
        assert db.message_stats() == (4, 4)
    finally:
        db.close()


def test_a_stored_duplicate_and_a_stored_conflict_in_one_round_are_both_seen(db: CollectorDb) -> None:
    """Two keys of one round already stored: one redelivered as it was, one with another body."""
    assert db.store([*body_rec("d1", 1), *body_rec("d1", 2)], NOW) == 2
    assert db.store([*body_rec("d1", 1), *body_rec("d1", 2, text="forged"), *body_rec("d1", 3)], NOW) == 1
    assert db.last_duplicates == 1 and db.last_conflicts == {"d1": 1}
    assert [q for _, q, _, _ in db.conflict_rows("d1")] == [2]
    watermark_is_messages(db)


def epoch(db: CollectorDb, col: str) -> str:
    return col if db.dialect == "sqlite" else f"EXTRACT(EPOCH FROM {col})::float8"


def test_the_device_time_and_the_receive_time_are_stored_to_the_microsecond(db: CollectorDb) -> None:
    received = NOW + 0.123456
    assert db.store([*rec("d1", 1), *rec("d1", 2)], received) == 2
    rows = db._x(f"SELECT seq, {epoch(db, 'time')}, {epoch(db, 'received')} FROM messages ORDER BY seq")
    got = [(int(s), float(t), float(r)) for s, t, r in rows.fetchall()]
    assert [s for s, _, _ in got] == [1, 2]
    for s, t, r in got:
        assert t == pytest.approx(NOW + s, abs=1e-6) and r == pytest.approx(received, abs=1e-6)


def test_last_seen_is_the_newest_receive_time_never_going_back(db: CollectorDb) -> None:
    assert db.store([*rec("d1", 1), *rec("d2", 1)], NOW + 100) == 2
    assert db.store([*rec("d1", 2), *rec("d3", 1)], NOW + 50) == 2  # a round stored late
    seen = {d["device"]: float(d["last_seen"]) for d in db.devices()}
    assert seen == pytest.approx({"d1": NOW + 100, "d2": NOW + 100, "d3": NOW + 50})
    assert db.store(rec("d1", 3), NOW + 200) == 1
    assert float(next(d for d in db.devices() if d["device"] == "d1")["last_seen"]) == pytest.approx(
        NOW + 200
    )


def test_a_seq_jump_counts_from_the_seq_a_device_reported(db: CollectorDb) -> None:
    """The highest seq known of a device is the higher of its stored and its reported (queue.seq)
    one: 103 after a status reporting 100 is no jump, 20 after a stored 1 and nothing reported is
    one (more than 5 above), whether the round reads the device or the collector knows it."""
    db.limits = Limits(seq_jump_max=5)
    reports = [status("d1", "running", seq=100), status("d2", "running", seq=100)]
    assert (
        db.store([*rec("d1", 1), *rec("d2", 1), *rec("d3", 1)], NOW, statuses=[s for s in reports if s]) == 3
    )
    # d1: only above its highest (the cache answers for it); d2: a duplicate too (read again)
    assert db.store([*rec("d1", 103), *rec("d2", 1), *rec("d2", 104), *rec("d3", 20)], NOW) == 2
    assert db.last_conflicts == {"d3": 1} and db.last_duplicates == 1
    assert stored(db) == {("d1", 1): {1, 103}, ("d2", 1): {1, 104}, ("d3", 1): {1}}


def test_rounds_above_a_devices_highest_are_answered_by_the_cache_until_another_writer(
    db: CollectorDb, request: pytest.FixtureRequest
) -> None:
    """The collector knows the device from its own rounds (hits), a round of another collector
    in between makes the next one read it (a miss: PostgreSQL's devices.writes, SQLite's
    data_version); the islands stay those of the stored seqs either way. The staging path (every
    COPY refused here) drops what it knew each round: a miss per round."""
    param = request.node.callspec.params["db"]
    other = CollectorDb(db.url)

    def counts(hits: int, misses: int, rounds: int) -> tuple[int, int]:
        return (hits, misses) if param in ("postgresql", "sqlite") else (0, rounds)

    try:
        for n, (seqs, hits) in enumerate((([1, 2], 0), ([3], 1), ([5], 2), ([6, 7], 3)), 1):
            assert db.store([r for s in seqs for r in rec("d1", s)], NOW) == len(seqs)
            assert (db.known.hits, db.known.misses) == counts(hits, 1, n)
            watermark_is_messages(db)
        want = {1: [(1, 3), (5, 7)]}
        assert islands(db) == {("d1", 1): want[1]} and decode(db.confirms["d1"]) == want
        assert other.store(rec("d1", 8), NOW) == 1
        assert db.store(rec("d1", 9), NOW) == 1
        assert (db.known.hits, db.known.misses) == counts(3, 2, 5)
        want = {1: [(1, 3), (5, 9)]}
        assert islands(db) == {("d1", 1): want[1]} and decode(db.confirms["d1"]) == want
        assert db.store(rec("d1", 10), NOW) == 1
        assert (db.known.hits, db.known.misses) == counts(4, 2, 6)
        assert decode(db.confirms["d1"]) == {1: [(1, 3), (5, 10)]}
        watermark_is_messages(db)
    finally:
        other.close()


def test_a_stored_body_is_a_json_object_sql_can_query(db: CollectorDb) -> None:
    """Dashboards and ``fleet`` queries read fields of the body in SQL: stored as the object sent,
    never as a JSON string holding it."""
    assert db.store([*body_rec("d1", 1, text="first"), *body_rec("d1", 2, text="second")], NOW) == 2
    field = "json_extract(body, '$.x')" if db.dialect == "sqlite" else "body->>'x'"
    kind = "json_type(body)" if db.dialect == "sqlite" else "jsonb_typeof(body)"
    rows = db._x(f"SELECT seq, {field}, {kind} FROM messages ORDER BY seq").fetchall()
    assert [(int(s), x, k) for s, x, k in rows] == [(1, "first", "object"), (2, "second", "object")]


def test_a_seq_jump_is_refused_after_a_round_of_only_redeliveries(db: CollectorDb) -> None:
    """A round that stored nothing new (a redelivery read back) leaves the device's highest seq
    known: a record more than seq_jump_max above it is still a conflict, never stored."""
    db.limits = Limits(seq_jump_max=5)
    assert db.store([*rec("d1", 1), *rec("d1", 2), *rec("d1", 3)], NOW) == 3
    assert db.store(rec("d1", 2), NOW) == 0 and db.last_duplicates == 1
    assert db.store(rec("d1", 20), NOW) == 0
    assert db.last_conflicts == {"d1": 1} and stored(db) == {("d1", 1): {1, 2, 3}}
    assert db.store(rec("d1", 8), NOW) == 1  # within the bound of 3: stored
    assert stored(db) == {("d1", 1): {1, 2, 3, 8}}


def test_a_seq_jump_is_refused_after_a_round_that_only_jumped(db: CollectorDb) -> None:
    """Rounds answered by the cache (seqs above the highest): one whose only record jumped
    (refused) leaves the highest where it was, so the next jump is refused too."""
    db.limits = Limits(seq_jump_max=5)
    assert db.store([*rec("d1", 1), *rec("d1", 2)], NOW) == 2
    assert db.store(rec("d1", 4), NOW) == 1
    assert db.store(rec("d1", 30), NOW) == 0 and db.last_conflicts == {"d1": 1}
    assert db.store(rec("d1", 40), NOW) == 0 and db.last_conflicts == {"d1": 1}
    assert stored(db) == {("d1", 1): {1, 2, 4}}
    assert db.store(rec("d1", 9), NOW) == 1
    assert stored(db) == {("d1", 1): {1, 2, 4, 9}}
