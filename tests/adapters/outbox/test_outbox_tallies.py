"""Tallies (outbox.tallies): counter operations a put() carries land in the transaction that
stores its row and never without it -- not for a refused put, not for a batch a full disk gave up
-- survive acks (rows delivered and deleted) and a reopen, and come back from a salvage."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.outbox import TOPIC, big_limits

from edge_agent.adapters.outbox import tallies
from edge_agent.adapters.outbox.outbox import Outbox
from edge_agent.errors import QueueFullError

A, B = '["totals","lines","gate","in"]', '["interval","lines","gate","in"]'


def stored(path: Path) -> dict[str, int]:
    """The tallies in the file, read by another connection (what a crash now would leave)."""
    con = sqlite3.connect(path)
    try:
        rows = con.execute("SELECT key, value FROM meta WHERE key LIKE 'tally:%'").fetchall()
    finally:
        con.close()
    return {k[len("tally:") :]: int(v) for k, v in rows}


def test_a_tally_is_stored_with_its_row_survives_acks_and_a_reopen(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    with Outbox(path, big_limits(), flush_interval_s=60, flush_batch=10**6) as ob:
        ob.put(TOPIC, {"n": 0})  # a fresh queue's first put commits its seq reservation
        ob.put(TOPIC, {"n": 1}, [("add", A, 1), ("add", B, 1)])
        ob.put(TOPIC, {"n": 2})  # a row that carries nothing changes nothing
        ob.put(TOPIC, {"n": 3}, [("add", A, 1)])
        assert stored(path) == {} and ob.tallies() == {}  # batched, not committed: nothing yet
        assert ob.flush() == 3
        assert stored(path) == ob.tallies() == {A: 2, B: 1}
        ob.put(TOPIC, {"n": 4}, [("set", B, 0), ("add", B, 2)])  # in put order: set, then add
        ob.flush()
        assert ob.tallies() == {A: 2, B: 2}
        assert ob.ack([m.rowid for m in ob.claim(10)]) == 5  # every row delivered and deleted
        assert ob.stats()["pending"] == 0
    assert stored(path) == {A: 2, B: 2}
    with Outbox(path, big_limits(), flush_interval_s=60, flush_batch=10**6) as again:
        assert again.tallies() == {A: 2, B: 2}


def test_a_refused_put_applies_nothing(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    with Outbox(path, big_limits(max_messages=1, policy="reject_new"), flush_interval_s=60) as ob:
        ob.put(TOPIC, {"n": 1}, [("add", A, 1)])
        with pytest.raises(QueueFullError):
            ob.put(TOPIC, {"n": 2}, [("add", A, 5)])
        ob.flush()
        assert ob.tallies() == stored(path) == {A: 1}


def test_a_batch_the_full_disk_gives_up_takes_its_tally_with_it(tmp_path: Path) -> None:
    """One result larger than the whole capped file: dropped, counted; its tally never lands,
    and the next row's does, alone."""
    path = tmp_path / "q.db"
    with Outbox(path, big_limits(), flush_interval_s=60, flush_batch=10**6, max_pages=64) as ob:
        ob.put(TOPIC, {"n": 0, "pad": "p" * 400_000}, [("add", A, 7)])
        assert ob.flush() == 0 and ob.counters["dropped"] == 1
        assert ob._state.tally_ops == {}  # forgotten, not kept for a later commit
        ob.put(TOPIC, {"n": 1}, [("add", A, 1)])
        assert ob.flush() == 1
        assert ob.tallies() == stored(path) == {A: 1}


def test_the_salvage_of_a_damaged_file_keeps_the_tallies(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    with Outbox(path, big_limits(), flush_interval_s=60, flush_batch=10**6) as ob:
        for i in range(40):
            ob.put(TOPIC, {"n": i, "pad": "z" * 300}, [("add", A, 1)])
        ob.flush()
        ob.db.checkpoint()
    data = bytearray(path.read_bytes())
    at = data.find(b'"n":5,') // 4096 * 4096  # a leaf of rows, not the meta page
    data[at : at + 4096] = bytes(4096)
    path.write_bytes(bytes(data))
    with Outbox(path, big_limits(), flush_interval_s=60, flush_batch=10**6) as ob:
        assert ob.counters["corrupt_files"] == 1 and ob.counters["lost"] > 0
        assert ob.tallies() == {A: 40}  # the crossings counted, also those whose rows were lost


def test_store_tallies_writes_at_once(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    with Outbox(path, big_limits(), flush_interval_s=60) as ob:
        ob.store_tallies([("set", A, 9)])
        assert stored(path) == ob.tallies() == {A: 9}


@pytest.mark.parametrize(
    ("op", "says"),
    [
        (("inc", A, 1), "operation 'inc'"),
        (("add", "", 1), "expected 1-400 characters"),
        (("add", "x" * 401, 1), "expected 1-400 characters"),
        (("add", "a\0b", 1), "without NUL"),
        (("add", "a\ud800", 1), "lone surrogate"),
        (("add", A, -1), "value -1"),
        (("set", A, 1 << 63), "expected an integer 0.."),
        (("set", A, True), "value True"),
    ],
)
def test_a_bad_operation_is_refused_naming_it(tmp_path: Path, op: tallies.Op, says: str) -> None:
    with Outbox(tmp_path / "q.db", big_limits(), flush_interval_s=60) as ob:
        with pytest.raises(ValueError, match=says.replace("(", r"\(").replace(".", r"\.")):
            ob.put(TOPIC, {"n": 1}, [op])
        assert ob.stats()["pending"] == 0  # nothing queued for it


def test_too_many_operations_are_refused() -> None:
    with pytest.raises(ValueError, match="1001 operations in one message; at most 1000"):
        tallies.checked([("add", A, 1)] * 1001)


OPS = st.lists(
    st.lists(st.tuples(st.sampled_from(["add", "set"]), st.sampled_from(["a", "b"]), st.integers(0, 50))),
    max_size=6,
)


@given(OPS)
def test_folding_rows_equals_applying_them_one_by_one(rows: list[list[tallies.Op]]) -> None:
    one_by_one: dict[str, int] = {"a": 3}
    for row in rows:
        for kind, name, value in row:
            one_by_one[name] = value if kind == "set" else one_by_one.get(name, 0) + value
    folded: dict[str, int] = {"a": 3}
    tallies.apply(folded, tallies.fold(rows))
    assert folded == one_by_one
    con = sqlite3.connect(":memory:")
    con.execute("CREATE TABLE meta(key TEXT PRIMARY KEY, value INTEGER NOT NULL)")
    con.execute("INSERT INTO meta VALUES ('tally:a', 3)")
    tallies.write(con, tallies.fold(rows))
    assert tallies.from_meta(dict(con.execute("SELECT key, value FROM meta").fetchall())) == one_by_one


def test_the_bounds_themselves_are_accepted() -> None:
    ops = [("add", "x" * 400, 0), ("set", "y", tallies.MAX_VALUE)] + [("add", B, 1)] * 998
    assert tallies.checked(ops) == tuple(ops)
    with pytest.raises(ValueError, match=r"tally '\[.*value 4611686018427387905; expected an integer"):
        tallies.checked([("set", A, tallies.MAX_VALUE + 1)])


def test_a_counter_saturates_at_the_bound_in_memory_and_in_the_file() -> None:
    # SQLite's INTEGER is 64-bit: a sum past 2**63 would be an overflow error inside the commit
    rows = [[("add", A, tallies.MAX_VALUE)], [("add", A, tallies.MAX_VALUE), ("add", B, 2)]]
    folded = tallies.fold(rows)
    assert folded == {A: (False, tallies.MAX_VALUE), B: (False, 2)}
    values = {A: 5}
    tallies.apply(values, folded)
    assert values == {A: tallies.MAX_VALUE, B: 2}
    con = sqlite3.connect(":memory:")
    con.execute("CREATE TABLE meta(key TEXT PRIMARY KEY, value INTEGER NOT NULL)")
    con.execute("INSERT INTO meta VALUES ('tally:' || ?, ?)", (A, tallies.MAX_VALUE))
    con.execute("INSERT INTO meta VALUES ('schema', 7)")  # a meta row that is no tally
    tallies.write(con, folded)
    assert tallies.from_meta(dict(con.execute("SELECT key, value FROM meta").fetchall())) == {
        A: tallies.MAX_VALUE,
        B: 2,
    }
