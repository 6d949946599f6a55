"""The SQLite outbox on real files, no broker: durability, caps, full disk, corruption, threads."""

from __future__ import annotations

import logging
import re
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from support.outbox import TOPIC, big_limits

from edge_agent.adapters.outbox.outbox import Outbox
from edge_agent.adapters.outbox.views import iter_messages, read_stats
from edge_agent.errors import QueueError, QueueFullError

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.arm_smoke
def test_round_trip_put_flush_claim_ack(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    with Outbox(path, big_limits(), flush_interval_s=60, flush_batch=1000) as ob:
        ids = [ob.put(TOPIC, {"n": i}) for i in range(5)]
        # the first put of a run commits at once (it reserves seq numbers, docs/queue.md); the rest batch
        assert read_stats(path)["pending"] == 1
        assert ob.flush() == 4
        assert read_stats(path)["pending"] == 5
        claimed = ob.claim(3)
        assert [m.msg_id for m in claimed] == ids[:3]
        assert [m.attempts for m in claimed] == [1, 1, 1]
        assert (
            claimed[0].topic == TOPIC
            and claimed[0].payload == f'{{"n":0,"id":"{ids[0]}","seq":1,"boot":1}}'.encode()
        )
        assert ob.stats()["inflight"] == 3
        assert ob.ack([m.rowid for m in claimed[:2]]) == 2
        assert ob.release([claimed[2].rowid]) == 1
        stats = ob.stats()
        assert (stats["pending"], stats["inflight"]) == (3, 0)
    with Outbox(path, big_limits()) as ob:
        again = ob.claim(10)
        assert [m.msg_id for m in again] == ids[2:]
        assert [m.attempts for m in again] == [2, 1, 1]
        ob.ack([m.rowid for m in again])
        assert ob.stats()["pending"] == 0
        assert ob.stats()["oldest"] is None


def test_put_sets_the_id_only_when_absent(outbox: Outbox) -> None:
    payload: dict[str, object] = {"x": 1}
    new_id = outbox.put(TOPIC, payload)
    assert payload["id"] == new_id and len(new_id) == 32
    assert outbox.put(TOPIC, {"id": "given-1"}) == "given-1"


def test_group_commit_by_batch_size_and_by_interval(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    with Outbox(path, big_limits(), flush_interval_s=0.2, flush_batch=50) as ob:
        ob.put(TOPIC, {"n": -1})  # the first put of a run commits (seq reservation, 16 ahead)
        for i in range(10):
            ob.put(TOPIC, {"n": i})
        assert read_stats(path)["pending"] == 1
        deadline = time.monotonic() + 5
        while read_stats(path)["pending"] < 11 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert read_stats(path)["pending"] == 11  # committed by the interval
    with Outbox(path, big_limits(), flush_interval_s=3600, flush_batch=50) as ob:
        for i in range(51):  # the first commits at once (seq reservation), then batches
            ob.put(TOPIC, {"n": i})
        deadline = time.monotonic() + 5
        while read_stats(path)["pending"] < 60 and time.monotonic() < deadline:
            time.sleep(0.02)
        # committed by batch size and seq reservation, not by time (the interval is an hour)
        assert 60 <= read_stats(path)["pending"] < 62
        ob.flush()
        assert read_stats(path)["pending"] == 62


def test_interval_zero_commits_inside_put(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    with Outbox(path, big_limits(), flush_interval_s=0, flush_batch=1000) as ob:
        ob.put(TOPIC, {"n": 1})
        assert read_stats(path)["pending"] == 1


def _run(code: str) -> int:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], cwd=REPO, timeout=60, env={"PYTHONPATH": str(REPO)}
    ).returncode


def test_hard_exit_loses_nothing_flushed_and_returns_in_flight_rows(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    assert (
        _run(f"""
        import os
        from edge_agent.adapters.outbox.outbox import Outbox
        from edge_agent.core.queue.policy import Limits
        ob = Outbox({str(path)!r}, Limits(10**6, 10**9, 1e9), flush_interval_s=60, flush_batch=10**6)
        for i in range(300):
            ob.put("t", {{"n": i}})
        ob.flush()
        ob.claim(10)
        os._exit(9)  # no close(): like a crash
    """)
        == 9
    )
    with Outbox(path, big_limits()) as ob:
        stats = ob.stats()
        assert (stats["pending"], stats["inflight"]) == (300, 0)
        first = ob.claim(20)
        assert [m.attempts for m in first] == [2] * 10 + [1] * 10


def test_second_writer_is_refused(outbox: Outbox) -> None:
    with pytest.raises(QueueError, match="in use by another process"):
        Outbox(outbox.path, big_limits())


@pytest.mark.arm_smoke
def test_drop_oldest_at_count_cap(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "q.db"
    caplog.set_level(logging.WARNING, "edge_agent.outbox")
    with Outbox(path, big_limits(max_messages=100), flush_interval_s=60, flush_batch=40) as ob:
        for i in range(250):
            ob.put(TOPIC, {"n": i})
        ob.flush()
        stats = ob.stats()
        assert (stats["pending"], stats["dropped"]) == (100, 150)
    assert [m["payload"]["n"] for m in iter_messages(path)] == list(range(150, 250))
    assert read_stats(path)["dropped"] == 150  # persisted
    assert any("dropped the" in r.message and "oldest" in r.message for r in caplog.records)


def test_drop_oldest_at_byte_cap(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    body = {"pad": "x" * 90}
    with Outbox(path, big_limits(max_bytes=1000), flush_interval_s=60, flush_batch=7) as ob:
        for i in range(10, 40):
            ob.put(TOPIC, {**body, "n": i, "id": f"{i:02d}", "seq": 0, "boot": 0})
        ob.flush()
        stats = ob.stats()
    sizes = [
        len(f'{{"pad":"{"x" * 90}","n":{i},"id":"{i:02d}","seq":{i - 9},"boot":1}}') for i in range(10, 40)
    ]
    assert set(sizes[-10:]) == {135}  # so 7 fit under 1000 bytes
    assert stats["bytes"] == 7 * 135 and stats["pending"] == 7 and stats["dropped"] == 23
    assert [m["payload"]["n"] for m in iter_messages(path)] == list(range(33, 40))


def test_reject_new_counts_and_raises(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    with Outbox(path, big_limits(max_messages=10, policy="reject_new"), flush_interval_s=60) as ob:
        for i in range(10):
            ob.put(TOPIC, {"n": i})
        for i in range(7):
            with pytest.raises(QueueFullError, match="max_messages=10"):
                ob.put(TOPIC, {"n": 100 + i})
        assert ob.stats()["rejected"] == 7
    assert [m["payload"]["n"] for m in iter_messages(path)] == list(range(10))
    assert read_stats(path)["rejected"] == 7


@pytest.mark.parametrize("policy", ["drop_oldest", "reject_new"])
def test_a_message_larger_than_the_byte_cap_is_always_rejected(tmp_path: Path, policy: str) -> None:
    with Outbox(tmp_path / "q.db", big_limits(max_bytes=1000, policy=policy)) as ob:
        ob.put(TOPIC, {"n": 1})
        with pytest.raises(QueueFullError, match=r"exceeds queue\.max_bytes=1000"):
            ob.put(TOPIC, {"pad": "x" * 1000})
        ob.flush()
        stats = ob.stats()
        assert (stats["pending"], stats["rejected"], stats["dropped"]) == (1, 1, 0)


def _pad(i: int) -> dict[str, object]:
    return {"n": i, "pad": "p" * 1000}


def test_full_disk_drop_oldest_keeps_newest_and_counts(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """PRAGMA max_page_count makes SQLite answer SQLITE_FULL exactly like a full disk."""
    path = tmp_path / "q.db"
    caplog.set_level(logging.WARNING, "edge_agent.outbox")
    with Outbox(path, big_limits(), flush_interval_s=60, flush_batch=10**6, max_pages=64) as ob:
        for i in range(2000):
            ob.put(TOPIC, _pad(i))
            if i % 50 == 49:
                ob.flush()
        ob.flush()
        stats = ob.stats()
    ns = [m["payload"]["n"] for m in iter_messages(path)]
    assert stats["dropped"] > 1000  # 64 pages of 4 KiB hold only a few hundred 1 KiB rows
    assert stats["pending"] + stats["dropped"] == 2000  # every message is stored or counted
    assert ns == list(range(2000 - len(ns), 2000))  # what survived is the newest, in order
    assert len(ns) == stats["pending"]
    assert any("disk full" in r.message for r in caplog.records)


def test_full_disk_reject_new_refuses_then_recovers(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    accepted, rejected = [], 0
    with Outbox(path, big_limits(policy="reject_new"), flush_interval_s=0, max_pages=64) as ob:
        for i in range(400):
            try:
                accepted.append(ob.put(TOPIC, _pad(i)))
            except QueueFullError as exc:
                assert str(exc) == f"{path}: disk full (SQLITE_FULL)"
                rejected += 1
        stats = ob.stats()
        assert rejected > 0
        assert (stats["pending"], stats["rejected"]) == (len(accepted), rejected)
        assert stats["unflushed"] == 1  # the row that met the full disk is held, not lost
        ob.ack([m.rowid for m in ob.claim(50)])  # the broker took some: room again
        ob.flush()
        more = ob.put(TOPIC, _pad(1000))
        assert ob.stats()["unflushed"] == 0
    stored = [m["payload"]["id"] for m in iter_messages(path)]
    assert stored == [*accepted[50:], more]


def _corrupt_page_holding(path: Path, marker: bytes) -> int:
    """Overwrite the page that holds ``marker`` with garbage; return how many rows lived on it."""
    data = bytearray(path.read_bytes())
    page_size = int.from_bytes(data[16:18], "big")
    start = data.index(marker) // page_size * page_size
    rows_on_page = data[start : start + page_size].count(b'"m":')
    data[start : start + page_size] = bytes([0xA5]) * page_size
    path.write_bytes(bytes(data))
    return rows_on_page


def test_corrupt_file_is_moved_aside_and_salvaged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "q.db"
    with Outbox(path, big_limits(), flush_interval_s=60, flush_batch=10**6) as ob:
        ids = [ob.put(TOPIC, {"m": f"row-{i:05d}", "pad": "z" * 150}) for i in range(2000)]
    lost = _corrupt_page_holding(path, b"row-01000")
    assert 5 < lost < 40
    corrupt_bytes = path.read_bytes()
    caplog.set_level(logging.ERROR, "edge_agent.outbox")
    with Outbox(path, big_limits()) as ob:
        stats = ob.stats()
        assert (stats["salvaged"], stats["lost"], stats["corrupt_files"]) == (2000 - lost, lost, 1)
        assert stats["pending"] == 2000 - lost
        got = [m.msg_id for m in ob.claim(5000)]
    asides = [a for a in tmp_path.glob("q.db.corrupt-*") if not a.name.endswith(("-wal", "-shm"))]
    assert len(asides) == 1 and re.fullmatch(r"q\.db\.corrupt-\d{8}T\d{6}Z", asides[0].name)
    assert asides[0].read_bytes() == corrupt_bytes  # kept as it was, for forensics
    assert got == [i for i in ids if i in set(got)]  # order kept
    assert len(set(ids) - set(got)) == lost
    assert any("moved aside" in r.message and f"lost {lost}" in r.message for r in caplog.records)
    assert read_stats(path)["salvaged"] == 2000 - lost  # the report survives a restart


def test_a_file_that_is_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    junk = b"this is not sqlite at all\n" * 400
    path.write_bytes(junk)
    with Outbox(path, big_limits()) as ob:
        stats = ob.stats()
        assert (stats["pending"], stats["salvaged"], stats["corrupt_files"]) == (0, 0, 1)
        ob.put(TOPIC, {"n": 1})
    asides = list(tmp_path.glob("q.db.corrupt-*"))
    assert [a.read_bytes() for a in asides if not a.name.endswith(("-wal", "-shm"))] == [junk]
    assert read_stats(path)["pending"] == 1


def test_old_rows_expire(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The 25 old rows are stamped 2 minutes ago (the put's clock moved back), not waited for."""
    import types

    from edge_agent.adapters.outbox import outbox as outbox_mod

    with Outbox(tmp_path / "q.db", big_limits(max_age_s=60), flush_interval_s=60) as ob:
        past = types.SimpleNamespace(time=lambda: time.time() - 120, monotonic=time.monotonic)
        with monkeypatch.context() as m:
            m.setattr(outbox_mod, "time", past)
            for i in range(25):
                ob.put(TOPIC, {"n": i})
            ob.flush()
        ob.put(TOPIC, {"n": 99})
        ob.flush()
        assert ob.expire() == 25
        stats = ob.stats()
        assert (stats["pending"], stats["expired"], stats["dropped"]) == (1, 25, 25)


def test_space_goes_back_to_the_filesystem(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    with Outbox(path, big_limits(), flush_interval_s=60, flush_batch=10**6) as ob:
        for i in range(4000):
            ob.put(TOPIC, _pad(i))
        ob.flush()
        ob.vacuum()
        full = path.stat().st_size
        while batch := ob.claim(500):
            ob.ack([m.rowid for m in batch])
        assert ob.vacuum() > 900
        assert path.stat().st_size < full / 20


def test_producer_and_consumer_threads(tmp_path: Path) -> None:
    """The agent loop puts while the sync thread claims/acks: each message acked exactly once."""
    n = 20_000
    with Outbox(tmp_path / "q.db", big_limits(), flush_interval_s=0.01, flush_batch=200) as ob:
        put_ids: list[str] = []
        acked: list[str] = []
        done = threading.Event()

        def produce() -> None:
            for i in range(n):
                put_ids.append(ob.put(TOPIC, {"n": i}))
            done.set()

        def consume() -> None:
            while not (done.is_set() and ob.stats()["pending"] == 0):
                batch = ob.claim(100)
                if not batch:
                    ob.flush() if done.is_set() else time.sleep(0.001)
                    continue
                acked.extend(m.msg_id for m in batch)
                ob.ack([m.rowid for m in batch])

        threads = [threading.Thread(target=produce), threading.Thread(target=consume)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert sorted(acked) == sorted(put_ids) and len(set(acked)) == n
        assert acked == put_ids  # oldest first
