"""The outbox's sync side (adapters/outbox/claims.py) in process, on real SQLite files: what the
batched drain relies on and the plain ack/claim tests did not pin (issue 19, mutation survivors).

``ack_and_claim`` falls back to ``ack()`` + ``claim()`` on any SQLite error with the same outcome,
so an outcome test alone cannot tell the one-transaction path from the fallback: the commits on
the sync connection are counted (one per batch is why it exists, issue 21)."""

from __future__ import annotations

import json
import logging
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from support.outbox import TOPIC, FailingDeletes, big_limits
from support.outbox import FullOnDelete as _FullOnDelete

from edge_agent.adapters.outbox.claims import IDLE_WAL_BYTES
from edge_agent.adapters.outbox.outbox import Outbox
from edge_agent.adapters.outbox.views import iter_messages, read_stats


def filled(path: Path, n: int, pad: int = 0) -> Outbox:
    ob = Outbox(path, big_limits(), flush_interval_s=60, flush_batch=10**6)
    for i in range(n):
        ob.put(TOPIC, {"n": i, "pad": "p" * pad})
    ob.flush()
    return ob


@contextmanager
def commits(conn: sqlite3.Connection) -> Iterator[list[str]]:
    """The transactions ended on ``conn`` while the block runs (explicit COMMITs and autocommitted
    writes alike: every statement that writes outside BEGIN...COMMIT is its own commit)."""
    seen: list[str] = []
    depth = [0]

    def trace(sql: str) -> None:
        word = sql.lstrip().split(None, 1)[0].upper() if sql.strip() else ""
        if word == "BEGIN":
            depth[0] += 1
        elif word in ("COMMIT", "END"):
            depth[0] -= 1
            seen.append("COMMIT")
        elif word == "ROLLBACK":
            depth[0] -= 1
            seen.append("ROLLBACK")
        elif word in ("UPDATE", "DELETE", "INSERT") and depth[0] == 0:
            seen.append(f"AUTOCOMMIT {word}")

    conn.set_trace_callback(trace)
    try:
        yield seen
    finally:
        conn.set_trace_callback(None)


def test_ack_and_claim_is_one_commit_and_hands_out_the_stored_messages(tmp_path: Path) -> None:
    ob = filled(tmp_path / "q.db", 30)
    try:
        first = ob.claim(10)
        with commits(ob.db.r) as seen:
            n, nxt = ob.ack_and_claim([m.rowid for m in first], 10)
        assert seen == ["COMMIT"]  # one transaction: no fallback to ack() + claim()
        assert n == 10
        # every field of the next batch as stored: the id consumers de-duplicate on, topic, payload
        stored = {m["rowid"]: m for m in iter_messages(tmp_path / "q.db")}
        assert [m.rowid for m in nxt] == list(range(11, 21))
        for m in nxt:
            assert m.topic == TOPIC
            assert json.loads(m.payload) == stored[m.rowid]["payload"]
            assert m.msg_id == stored[m.rowid]["payload"]["id"]
            assert m.attempts == 1
    finally:
        ob.close()


def test_ack_and_claim_keeps_the_byte_figure_exact(tmp_path: Path) -> None:
    ob = filled(tmp_path / "q.db", 40, pad=100)
    try:
        first = ob.claim(15)
        ob.ack_and_claim([m.rowid for m in first], 5)
        ob.flush()
        assert ob.stats()["bytes"] == read_stats(tmp_path / "q.db")["bytes"]  # what is on disk
        assert ob.stats()["pending"] == 25
    finally:
        ob.close()


def test_ack_and_claim_newest_first_in_one_commit(tmp_path: Path) -> None:
    ob = filled(tmp_path / "q.db", 30)
    try:
        first = ob.claim(5, newest_first=True)
        assert [m.rowid for m in first] == [30, 29, 28, 27, 26]
        with commits(ob.db.r) as seen:
            n, nxt = ob.ack_and_claim([m.rowid for m in first], 5, newest_first=True)
        assert seen == ["COMMIT"]
        assert n == 5 and [m.rowid for m in nxt] == [25, 24, 23, 22, 21]
        # and the attempt count was committed with it (a restart sees it)
    finally:
        ob.close()
    with Outbox(tmp_path / "q.db", big_limits()) as again:
        got = {m.rowid: m.attempts for m in again.claim(30)}
    assert got == {r: 2 for r in range(21, 26)} | {r: 1 for r in range(1, 21)}


def test_ack_and_claim_of_the_largest_batch_is_still_one_commit(tmp_path: Path) -> None:
    """500 rows (the per-transaction limit) in one commit; 501 are split (ack in chunks of 500)."""
    ob = filled(tmp_path / "q.db", 1200)
    try:
        first = ob.claim(500)
        with commits(ob.db.r) as seen:
            n, nxt = ob.ack_and_claim([m.rowid for m in first], 501)
        assert seen == ["COMMIT"] and n == 500 and len(nxt) == 501
        with commits(ob.db.r) as seen:
            n, more = ob.ack_and_claim([m.rowid for m in nxt], 10)
        assert n == 501 and len(more) == 10
        assert seen.count("COMMIT") + sum(s.startswith("AUTOCOMMIT") for s in seen) >= 3
        assert ob.stats()["pending"] == 1200 - 1001
    finally:
        ob.close()


def test_ack_and_claim_of_no_rows_is_a_claim(tmp_path: Path) -> None:
    ob = filled(tmp_path / "q.db", 10)
    try:
        n, got = ob.ack_and_claim([], 4)
        assert n == 0 and [m.rowid for m in got] == [1, 2, 3, 4]
        n, got = ob.ack_and_claim([], 4, newest_first=True)
        assert n == 0 and [m.rowid for m in got] == [10, 9, 8, 7]
    finally:
        ob.close()


def test_ack_and_claim_retries_the_deletes_a_failed_ack_left(tmp_path: Path) -> None:
    """Deletes left from a failed ack are retried by the next ack_and_claim (then nothing acked
    stays on disk to come back after a restart), in the order: retry, ack, claim."""
    path = tmp_path / "q.db"
    ob = filled(path, 20)
    try:
        first = ob.claim(4)
        real = ob.db.r
        ob.db.r = FailingDeletes(real)  # type: ignore[assignment]
        try:
            ob.ack([m.rowid for m in first])
        except Exception:  # noqa: BLE001 - the QueueError is the other test's subject
            pass
        finally:
            ob.db.r = real
        second = ob.claim(4)
        assert [m.rowid for m in second] == [5, 6, 7, 8]  # the acked rows are never handed out again
        n, nxt = ob.ack_and_claim([m.rowid for m in second], 4, newest_first=True)
        assert n == 4 and [m.rowid for m in nxt] == [20, 19, 18, 17]
        assert ob.stats()["pending"] == 12
        # on disk now, not only at close: a crash from here on brings none of the 8 back
        assert [m["rowid"] for m in iter_messages(path)] == list(range(9, 21))
        assert read_stats(path)["pending"] == 12
    finally:
        ob.close()


def test_a_failed_one_transaction_batch_falls_back_with_the_same_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ob = filled(tmp_path / "q.db", 20)
    try:
        first = ob.claim(3, newest_first=True)

        def fails(*args: object) -> None:
            raise sqlite3.OperationalError("disk I/O error (injected)")

        monkeypatch.setattr(ob.claims, "_ack_claim_txn", fails)
        n, nxt = ob.ack_and_claim([m.rowid for m in first], 3, newest_first=True)
        assert n == 3 and [m.rowid for m in nxt] == [17, 16, 15]
        monkeypatch.undo()
        # more than one transaction's worth of rows: the two calls, newest first still
        n, nxt = ob.ack_and_claim([m.rowid for m in nxt], 2, newest_first=True)
        assert [m.rowid for m in nxt] == [14, 13]
    finally:
        ob.close()


def test_a_large_batch_acked_past_the_limit_keeps_its_order(tmp_path: Path) -> None:
    ob = filled(tmp_path / "q.db", 700)
    try:
        first = ob.claim(501)
        n, nxt = ob.ack_and_claim([m.rowid for m in first], 3, newest_first=True)
        assert n == 501 and [m.rowid for m in nxt] == [700, 699, 698]
    finally:
        ob.close()


def test_an_ack_deletes_a_batch_in_one_commit(tmp_path: Path) -> None:
    """500 rows per transaction: an ack of a drain's batch is one commit (one fsync), not one per row."""
    ob = filled(tmp_path / "q.db", 30)
    try:
        got = ob.claim(30)
        with commits(ob.db.r) as seen:
            assert ob.ack([m.rowid for m in got]) == 30
        assert seen == ["COMMIT"]
    finally:
        ob.close()


def test_release_returns_how_many_rows_went_back(tmp_path: Path) -> None:
    ob = filled(tmp_path / "q.db", 10)
    try:
        got = ob.claim(6)
        assert ob.release([got[0].rowid, got[1].rowid, 999]) == 2
        assert ob.release() == 4
        assert ob.release() == 0
        assert [m.rowid for m in ob.claim(10)] == list(range(1, 11))
    finally:
        ob.close()


def test_a_drained_queue_gives_its_wal_back(tmp_path: Path) -> None:
    """A batched drain grows the sync connection's WAL up to 4 MiB; the claim that finds nothing
    left truncates it, so an idle device does not keep megabytes of WAL on its SD card."""
    path = tmp_path / "q.db"
    ob = filled(path, 3000, pad=600)
    wal = Path(f"{path}-wal")
    try:
        batch = ob.claim(500)
        biggest = 0
        while batch:
            _, batch = ob.ack_and_claim([m.rowid for m in batch], 500)
            biggest = max(biggest, wal.stat().st_size)
        assert biggest > IDLE_WAL_BYTES  # the drain did grow it past the idle size
        assert os.stat(wal).st_size <= IDLE_WAL_BYTES
        assert ob.stats()["pending"] == 0
    finally:
        ob.close()


def test_a_claim_that_finds_nothing_gives_the_wal_back_too(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    ob = filled(path, 3000, pad=600)
    wal = Path(f"{path}-wal")
    try:
        while True:
            batch = ob.claim(500)
            if not batch:
                break
            ob.ack([m.rowid for m in batch])
        assert os.stat(wal).st_size <= IDLE_WAL_BYTES
    finally:
        ob.close()


def test_an_ack_on_a_full_disk_retries_then_gives_back_the_whole_reserve(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """First retry after a checkpoint only; the second with the whole reserve released and the file
    capped (the disk counts as full from then on); the delete lands."""
    path = tmp_path / "q.db"
    ob = filled(path, 20)
    reserve = Path(f"{path}.reserve")
    try:
        got = ob.claim(10)
        real = ob.db.r
        ob.db.r = _FullOnDelete(real, times=1)  # type: ignore[assignment]
        with caplog.at_level(logging.WARNING, logger="edge_agent.outbox"):
            assert ob.ack([m.rowid for m in got[:5]]) == 5
        assert reserve.stat().st_size == 1 << 20 and not ob.stats()["disk_full"]  # one retry did it
        assert caplog.records == []
        ob.db.r = _FullOnDelete(real, times=2)  # type: ignore[assignment]
        with caplog.at_level(logging.WARNING, logger="edge_agent.outbox"):
            assert ob.ack([m.rowid for m in got[5:]]) == 5
        ob.db.r = real
        assert not reserve.exists() and ob.stats()["disk_full"]
        assert [r.getMessage() for r in caplog.records] == [
            f"outbox {path}: filesystem full (SQLITE_FULL on ack): released the disk reserve; the file "
            f"stays at {ob.db.w.execute('PRAGMA page_count').fetchone()[0]} pages; policy drop_oldest applies"
        ]
        assert ob.stats()["pending"] == 10
    finally:
        ob.close()
    assert read_stats(path)["pending"] == 10


def test_an_ack_the_full_disk_refuses_three_times_waits_for_the_next_ack(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "q.db"
    ob = filled(path, 20)
    try:
        got = ob.claim(8)
        real = ob.db.r
        ob.db.r = _FullOnDelete(real, times=3)  # type: ignore[assignment]
        with caplog.at_level(logging.WARNING, logger="edge_agent.outbox"):
            assert ob.ack([m.rowid for m in got]) == 0  # none deleted yet
        ob.db.r = real
        assert [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR] == [
            f"outbox {path}: disk full: 8 acknowledged messages not deleted yet (retried; a restart "
            "before that redelivers them)"
        ]
        s = ob.stats()
        assert (s["pending"], s["inflight"]) == (12, 0)  # out of the figures and of claims already
        assert read_stats(path)["pending"] == 20  # still on disk
        assert ob.ack([]) == 0  # the next ack deletes them (none of its own)
        assert read_stats(path)["pending"] == 12 and ob.stats()["pending"] == 12
        assert ob.stats()["bytes"] == read_stats(path)["bytes"]
    finally:
        ob.close()


def test_an_ack_of_more_than_one_transaction_keeps_the_figures_exact(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    ob = filled(path, 1300, pad=50)
    try:
        got = ob.claim(1200)
        assert ob.ack([m.rowid for m in got]) == 1200  # three transactions of at most 500
        s, on_disk = ob.stats(), read_stats(path)
        assert (s["pending"], s["bytes"]) == (on_disk["pending"], on_disk["bytes"]) == (100, on_disk["bytes"])
    finally:
        ob.close()


def test_on_a_full_disk_an_ack_deletes_in_transactions_the_released_reserve_can_hold(tmp_path: Path) -> None:
    """Capped (full disk): as many rows per transaction as fit, on average, in one full-disk commit
    slice (an eighth of the reserve: 128 KiB for 1 MiB), so each delete's WAL fits what is left."""
    path = tmp_path / "q.db"
    ob = filled(path, 400, pad=1000)
    try:
        real = ob.db.r
        got = ob.claim(2)
        ob.db.r = _FullOnDelete(real, times=2)  # type: ignore[assignment]
        ob.ack([m.rowid for m in got])  # caps the file, as the full disk would
        ob.db.r = real
        assert ob.stats()["disk_full"]
        per_row = ob.stats()["bytes"] / ob.stats()["pending"]
        per_txn = int((1 << 20) // 8 / per_row)
        assert 100 < per_txn < 130
        got = ob.claim(3 * per_txn - 10)
        with commits(real) as seen:
            assert ob.ack([m.rowid for m in got]) == len(got)
        assert seen == ["COMMIT"] * 3
    finally:
        ob.close()


@pytest.mark.parametrize(
    ("released", "n", "want"), [([3, 4], 5, [3, 4, 11, 12, 13]), ([2, 4, 5, 6, 7, 8, 9], 3, [2, 4, 5])]
)
def test_a_claim_after_a_partial_release_never_hands_out_a_row_still_in_flight(
    tmp_path: Path, released: list[int], n: int, want: list[int]
) -> None:
    """Rows in flight that are not one run of ids (some released after a timeout): the released
    ones come back first, the others are not sent twice."""
    ob = filled(tmp_path / "q.db", 20)
    try:
        assert [m.rowid for m in ob.claim(10)] == list(range(1, 11))
        assert ob.release(released) == len(released)
        assert [m.rowid for m in ob.claim(n)] == want
        with commits(ob.db.r) as seen:
            _, more = ob.ack_and_claim(want, 2)
        assert seen == ["COMMIT"]
        assert not {m.rowid for m in more} & set(range(1, 11)) - set(released)
    finally:
        ob.close()


def test_a_late_ack_after_a_purge_of_a_full_disk_queue_is_no_error(tmp_path: Path) -> None:
    """The broker's PUBACKs for rows an operator purged meanwhile, on a capped (full) queue that is
    now empty: nothing to delete, no division by the empty row count in the sync thread."""
    ob = filled(tmp_path / "q.db", 10)
    try:
        got = ob.claim(10)
        real = ob.db.r
        ob.db.r = _FullOnDelete(real, times=2)  # type: ignore[assignment]
        ob.ack([got[0].rowid])  # caps the file
        ob.db.r = real
        assert ob.stats()["disk_full"]
        assert ob.purge() == 9
        assert ob.ack([m.rowid for m in got[1:]]) == 0
        assert ob.stats()["pending"] == 0
    finally:
        ob.close()
