"""The sync connection's checkpoint policy (issue 21): a batched drain lets the WAL grow to
SYNC_WAL_PAGES instead of paying a checkpoint (two fsyncs) per 500-row commit, truncates it when
the sync is idle, falls back to WAL_PAGES (what the reserve covers) on a full disk -- a REAL full
tmpfs -- and a kill -9 in the middle of a large WAL neither brings back an acked row nor loses one
that was not acked."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.outbox import TOPIC, big_limits
from support.tmpfs import fill, free, tmpfs

from edge_agent.adapters.outbox.claims import IDLE_WAL_BYTES, Message
from edge_agent.adapters.outbox.db import SYNC_WAL_PAGES, WAL_PAGES
from edge_agent.adapters.outbox.outbox import Outbox
from edge_agent.adapters.outbox.views import iter_messages

REPO = Path(__file__).resolve().parents[3]
FRAME = 4096 + 24  # a WAL frame: page + header


def _autocheckpoint(ob: Outbox) -> tuple[int, int]:
    """(writer, sync) connection's wal_autocheckpoint."""
    return tuple(int(c.execute("PRAGMA wal_autocheckpoint").fetchone()[0]) for c in (ob.db.w, ob.db.r))  # type: ignore[return-value]


def _wal(path: Path) -> int:
    try:
        return os.stat(f"{path}-wal").st_size
    except FileNotFoundError:
        return 0


def _drain(ob: Outbox, path: Path) -> tuple[int, int, int]:
    """What MqttSync does with batch_threshold = 1: two batches of 500 in flight, each PUBACK
    acked together with the next claim. Returns (rows acked, largest WAL seen, WAL size right
    after the first claim that found nothing left)."""
    flight: list[list[Message]] = [ob.claim(500), ob.claim(500)]
    acked = biggest = 0
    idle = -1
    while flight and flight[0]:
        done = flight.pop(0)
        n, nxt = ob.ack_and_claim([m.rowid for m in done], 500)
        acked += n
        biggest = max(biggest, _wal(path))
        if nxt:
            flight.append(nxt)
        elif idle < 0:
            idle = _wal(path)
    for batch in flight:
        acked += ob.ack([m.rowid for m in batch])
    return acked, biggest, idle


def test_a_batched_drain_grows_the_sync_wal_then_truncates_it_when_idle(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    with Outbox(path, big_limits()) as ob:
        for i in range(20_000):
            ob.put(TOPIC, {"n": i, "pad": "p" * 300})
        ob.flush()
        assert _autocheckpoint(ob) == (WAL_PAGES, SYNC_WAL_PAGES)
        acked, biggest, idle = _drain(ob, path)
        assert acked == 20_000 and ob.stats()["pending"] == 0
        # the WAL grew past the small bound (no checkpoint per batch) but stayed near its own
        assert IDLE_WAL_BYTES < biggest <= (SYNC_WAL_PAGES + 400) * FRAME
        assert idle == 0  # nothing left to claim: the WAL's bytes went back to the filesystem
        assert ob.claim(500) == [] and _wal(path) <= IDLE_WAL_BYTES  # the last acks: a small WAL stays


def test_live_acks_do_not_checkpoint_when_idle(tmp_path: Path) -> None:
    """One result at a time (live syncing): the WAL stays small, so an empty claim does not
    truncate it -- no checkpoint (two fsyncs) per result."""
    path = tmp_path / "q.db"
    with Outbox(path, big_limits()) as ob:
        for i in range(30):
            ob.put(TOPIC, {"n": i})
            ob.flush()
            (m,) = ob.claim(10)
            ob.ack([m.rowid])
            assert ob.claim(10) == []
        assert 0 < _wal(path) <= IDLE_WAL_BYTES  # never truncated: still holds the frames


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    with tmpfs(tmp_path / "fs") as where:
        yield where


def test_on_a_full_disk_the_sync_wal_is_small_again_and_the_drain_completes(disk: Path) -> None:
    path = disk / "q.db"
    with Outbox(path, big_limits(), flush_interval_s=0.2, flush_batch=100) as ob:
        for i in range(20_000):  # 1 KiB results: more than the 16 MB filesystem holds
            ob.put(TOPIC, {"n": i, "pad": "p" * 1000})
        ob.flush()
        stats = ob.stats()
        assert stats["disk_full"] and stats["dropped"] > 0 and free(disk) < 2 << 20
        assert _autocheckpoint(ob) == (WAL_PAGES, WAL_PAGES)  # capped: what the reserve covers
        pending = stats["pending"]
        acked, _, _ = _drain(ob, path)
        assert acked == pending and ob.stats()["pending"] == 0  # every ack got written
        ob.vacuum()
        ob._maintain()  # what the flusher does every 30 s: room again, so the cap is lifted
        assert not ob.stats()["disk_full"]
        assert _autocheckpoint(ob) == (WAL_PAGES, SYNC_WAL_PAGES)


def test_a_batched_drain_of_a_queue_reopened_on_a_brim_full_disk(disk: Path) -> None:
    """Only the quarter of the reserve kept for the next start is left. A 500-row delete of 1 KiB
    results does not fit in it: before, every batch's ack failed and its rows stayed acked but
    undeleted for good (a restart sent them again). Capped, acks go in smaller transactions, so
    every acked row is deleted (some at a later ack, after a checkpoint gave the WAL back)."""
    path = disk / "q.db"
    with Outbox(path, big_limits(), flush_interval_s=0.2, flush_batch=100) as ob:
        for i in range(20_000):
            ob.put(TOPIC, {"n": i, "pad": "p" * 1000})
    fill(disk)
    assert free(disk) == 0
    with Outbox(path, big_limits()) as ob:
        assert _autocheckpoint(ob) == (WAL_PAGES, WAL_PAGES)
        assert 0 < ob.claims.ack_rows_per_txn() < 500
        _drain(ob, path)
        ob.ack([])  # what the maintenance pass does: retry deletes a full disk refused
        assert ob.stats()["pending"] == 0 and not ob._state.acked_undeleted
    with Outbox(path, big_limits()) as ob:
        assert ob.stats()["pending"] == 0  # the deletes are durable: nothing comes back


CHILD = r"""
import sys
from edge_agent.adapters.outbox.outbox import Outbox
from edge_agent.core.queue.policy import Limits
ob = Outbox(sys.argv[1], Limits(10**7, 10**10, 1e9))
flight = [ob.claim(500), ob.claim(500)]
while flight[0]:
    done = flight.pop(0)
    nxt = ob.ack_and_claim([m.rowid for m in done], 500)[1]
    print("acked", ",".join(str(m.rowid) for m in done), flush=True)  # after its commit
    flight.append(nxt)
"""


def test_kill_9_during_a_batched_drain_with_a_large_wal(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    with Outbox(path, big_limits()) as ob:
        for i in range(30_000):
            ob.put(TOPIC, {"n": i, "pad": "p" * 300})
    every = {m["rowid"] for m in iter_messages(path)}
    assert len(every) == 30_000
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(path)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert child.stdout is not None
    acked: set[int] = set()
    wal = 0
    try:
        for line in child.stdout:
            acked.update(int(x) for x in line.split()[1].split(","))
            wal = max(wal, _wal(path))
            if len(acked) >= 15_000:
                break
        child.send_signal(signal.SIGKILL)
    finally:
        child.kill()
        child.wait()
    assert wal > IDLE_WAL_BYTES  # the kill met a WAL past the small bound
    with Outbox(path, big_limits()) as ob:
        left = {m["rowid"] for m in iter_messages(path)}
        assert not left & acked  # no acknowledged row comes back
        # acked after the last line read, before the kill: whole batches, right after the ones read
        gone = every - left - acked
        top = max(acked)
        assert len(gone) % 500 == 0 and gone == set(range(top + 1, top + 1 + len(gone)))
        assert ob.stats()["pending"] == len(left)  # the row count agrees with the rows
        assert ob.stats()["lost"] == 0 and ob.stats()["salvaged"] == 0
