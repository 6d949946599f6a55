"""Outbox.ack_and_claim (the batched drain's one transaction): the same outcome as ack() then
claim(), on disk and in memory; the claim's attempt count is committed with it; a failed
transaction changes nothing and the two separate calls run instead."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from support.outbox import TOPIC, big_limits

from edge_agent.adapters.outbox.outbox import Outbox
from edge_agent.adapters.outbox.views import iter_messages, read_stats


def filled(path: Path, n: int) -> Outbox:
    ob = Outbox(path, big_limits(), flush_interval_s=60, flush_batch=1000)
    for i in range(n):
        ob.put(TOPIC, {"n": i})
    ob.flush()
    return ob


def test_ack_and_claim_is_ack_then_claim_in_one_commit(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    ob = filled(path, 30)
    first = ob.claim(10)
    second = ob.claim(5)
    n, third = ob.ack_and_claim([m.rowid for m in first], 10)
    assert n == 10
    assert [m.rowid for m in third] == list(range(16, 26))  # in flight (second) is skipped
    assert all(m.attempts == 1 for m in third)
    stats = ob.stats()
    assert (stats["pending"], stats["inflight"]) == (20, 15)
    ob.close()
    on_disk = [m["rowid"] for m in iter_messages(path)]
    assert on_disk == list(range(11, 31)) and read_stats(path)["pending"] == 20
    with Outbox(path, big_limits()) as again:  # a restart: the claims' attempts were committed
        got = {m.rowid: m.attempts for m in again.claim(30)}
        assert got == {r: 2 for r in range(11, 26)} | {r: 1 for r in range(26, 31)}
    assert [m.rowid for m in second] == list(range(11, 16))


def test_a_failed_transaction_falls_back_to_ack_then_claim(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ob = filled(tmp_path / "q.db", 20)
    first = ob.claim(10)

    def fails(*args: object) -> None:
        raise sqlite3.OperationalError("disk I/O error (injected)")

    monkeypatch.setattr(ob.claims, "_ack_claim_txn", fails)
    n, nxt = ob.ack_and_claim([m.rowid for m in first], 5)
    assert n == 10 and [m.rowid for m in nxt] == list(range(11, 16))
    stats = ob.stats()
    assert (stats["pending"], stats["inflight"]) == (10, 5)
    ob.close()
    assert [m["rowid"] for m in iter_messages(tmp_path / "q.db")] == list(range(11, 21))


def test_only_the_given_rows_are_deleted(tmp_path: Path) -> None:
    ob = filled(tmp_path / "q.db", 20)
    claimed = ob.claim(20)
    picked = [m.rowid for m in claimed if m.rowid % 3 == 0]  # not a consecutive run
    n, more = ob.ack_and_claim(picked, 5)
    assert n == len(picked) and more == []  # everything else is in flight
    ob.release()
    left = [m.rowid for m in ob.claim(50)]
    assert left == [r for r in range(1, 21) if r % 3 != 0]
    ob.close()
