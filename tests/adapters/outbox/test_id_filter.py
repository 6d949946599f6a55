"""The outbox's claim/ack WHERE clause selects exactly the given row ids (a range when they are
consecutive, a list otherwise): a range one too wide would delete a row never acknowledged."""

from __future__ import annotations

import sqlite3

from hypothesis import given
from hypothesis import strategies as st

from edge_agent.adapters.outbox.claims import id_filter


@given(st.lists(st.integers(1, 60), min_size=1, max_size=60))
def test_id_filter_selects_exactly_the_ids(ids: list[int]) -> None:
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE messages (id INTEGER PRIMARY KEY)")
    db.executemany("INSERT INTO messages VALUES (?)", [(i,) for i in range(0, 62)])
    where, args = id_filter(ids)
    got = {r[0] for r in db.execute(f"SELECT id FROM messages WHERE {where}", args)}
    assert got == set(ids)


def test_a_run_of_consecutive_ids_is_one_range() -> None:
    assert id_filter([5, 6, 7, 8]) == ("id BETWEEN ? AND ?", [5, 8])
    assert id_filter([8, 5, 7, 6]) == ("id BETWEEN ? AND ?", [5, 8])
    assert id_filter([5, 7])[0] == "id IN (?,?)"
    assert id_filter([5, 5, 6])[0] == "id IN (?,?,?)"
