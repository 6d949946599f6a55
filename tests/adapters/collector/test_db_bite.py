"""CollectorDb's rules the collector-db mutation run showed no test held (issue 36), on SQLite and a
real PostgreSQL: SQLite works without psycopg installed, the first copy of a seq to arrive in a
round is the one stored, a stored message keeps the round's receive time, a round is committed
when ``store`` returns even without records, a dead letter is one per topic and payload, a device
known only by its status can be retired, a failed retire changes nothing, a conflict says why,
a PostgreSQL migration waits for another collector's, a database opened on one thread is written on
another, the PostgreSQL connection's errors and password."""

from __future__ import annotations

import json
import socket
import sys
import threading
from typing import Any, Optional

import pytest
from support import wait_until
from support.collector import NOW, rec, status

from edge_agent.adapters.collector.db import ADVISORY_LOCK, CollectorDb, DbError
from edge_agent.core.messages.fleet import DeviceStatus, Record, parse


def st(dev: str, state: str, ts: float = NOW) -> DeviceStatus:
    got: Optional[DeviceStatus] = status(dev, state, ts)
    assert got is not None
    return got


def copy_of(dev: str, seq: int, msg_id: Optional[str]) -> list[Record]:
    body: dict[str, Any] = {"seq": seq, "boot": 1, "device_id": dev, "ts": NOW + seq}
    if msg_id is not None:
        body["id"] = msg_id
    return parse("edge", f"edge/{dev}/detections", json.dumps(body).encode(), NOW).records


def stored_id(db: CollectorDb, dev: str, seq: int) -> str:
    (msg_id,) = db._x("SELECT msg_id FROM messages WHERE device = ? AND seq = ?", (dev, seq)).fetchone()
    return str(msg_id)


def test_sqlite_needs_no_psycopg(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """psycopg is the ``[collector]`` extra for PostgreSQL only: a SQLite collector without it
    opens, migrates, stores, reads and fails over as with it."""
    if not url.startswith("sqlite:"):
        pytest.skip("the SQLite promise: PostgreSQL needs psycopg")
    loaded = [m for m in sys.modules if m.startswith("psycopg.")]
    for name in {"psycopg", "psycopg.errors", *loaded}:
        monkeypatch.setitem(sys.modules, name, None)  # `import psycopg...` now raises ImportError
    db = CollectorDb(url)
    try:
        db.migrate()
        assert db.store(rec("d1", 1) + rec("d1", 2), NOW, statuses=[st("d1", "running")]) == 2
        assert [d["device"] for d in db.devices()] == ["d1"] and db.message_stats() == (2, 2)
        assert db.errors() and db.transient()
    finally:
        db.close()


def test_the_first_copy_of_a_seq_in_a_round_is_stored_a_later_other_one_is_the_conflict(url: str) -> None:
    db = CollectorDb(url)
    try:
        db.migrate()
        # the ids sort the other way round from their arrival: arrival decides, not the id
        got = db.store(copy_of("d1", 1, "zz-first") + copy_of("d1", 1, "aa-later"), NOW)
        assert got == 1 and db.last_conflicts == {"d1": 1}
        assert stored_id(db, "d1", 1) == "zz-first"
        assert [m for _, _, m, _ in db.conflict_rows("d1")] == ["aa-later"]
        # one copy without an id (an old agent) and one with: stored, refused, no error
        assert db.store(copy_of("d1", 2, "with-id") + copy_of("d1", 2, None), NOW) == 1
        assert stored_id(db, "d1", 2) == "with-id"
    finally:
        db.close()


def test_a_conflict_row_says_why_it_was_held(url: str) -> None:
    db = CollectorDb(url)
    try:
        db.migrate()
        db.store(rec("d1", 4), NOW)
        db.store(copy_of("d1", 4, "forged"), NOW)
        assert db.conflict_rows("d1") == [
            (1, 4, "forged", "seq 4 of boot 1 already taken by another id or body")
        ]
    finally:
        db.close()


def test_a_stored_message_keeps_the_rounds_receive_time(url: str) -> None:
    db = CollectorDb(url)
    try:
        db.migrate()
        db.store(rec("d1", 1), NOW + 42)
        (received,) = db._x("SELECT received FROM messages").fetchone()
        if db.dialect == "postgresql":
            received = received.timestamp()
        assert received == pytest.approx(NOW + 42, abs=1e-3)
    finally:
        db.close()


def test_a_round_without_records_is_committed_when_store_returns(url: str) -> None:
    db, other = CollectorDb(url), None
    try:
        db.migrate()
        db.store([], NOW, statuses=[st("d1", "running")])
        other = CollectorDb(url)  # another connection: sees only what was committed
        assert [d["device"] for d in other.devices()] == ["d1"]
        other.close()
        db.store(rec("d1", 1), NOW + 1, statuses=[st("d1", "draining", ts=NOW + 1)])
        other = CollectorDb(url)
        assert [d["state"] for d in other.devices()] == ["draining"] and other.message_stats() == (1, 1)
    finally:
        if other is not None:
            other.close()
        db.close()


def test_a_dead_letter_is_one_per_topic_and_payload(url: str) -> None:
    db = CollectorDb(url)
    try:
        db.migrate()
        for topic in ("edge/a/detections", "edge/b/detections", "edge/a/detections"):
            db.dead_letter(topic, "boom", b'{"id": "same"}', NOW)
        rows = db._x("SELECT topic, count FROM dead_letters ORDER BY topic").fetchall()
        assert [(t, int(n)) for t, n in rows] == [("edge/a/detections", 2), ("edge/b/detections", 1)]
    finally:
        db.close()


def test_a_device_known_only_by_its_status_is_retired(url: str) -> None:
    db = CollectorDb(url)
    try:
        db.migrate()
        db.store([], NOW, statuses=[st("quiet", "running"), st("keep", "running")])
        assert db.retire("quiet") == (0, 0)
        assert db.device_ids() == ["keep"] and db.retire("quiet") is None
    finally:
        db.close()


def test_a_retire_that_fails_changes_nothing_and_the_database_stays_usable(url: str) -> None:
    db = CollectorDb(url)
    try:
        db.migrate()
        db.store(rec("old", 1), NOW, statuses=[st("old", "running")])
        db._x("ALTER TABLE expired RENAME TO expired_away")  # the purge's last delete fails
        with pytest.raises(db.errors()):
            db.retire("old", purge=True)
        assert db.device_ids() == ["old"] and db.message_stats() == (1, 1)  # rolled back
        assert db.retire("old") == (1, 0)  # the next transaction starts
        assert db.store(rec("new", 1), NOW) == 1 and db.device_ids() == ["new"]
    finally:
        db.close()


def test_a_postgresql_migration_waits_for_another_collectors(url: str) -> None:
    """Two collectors starting at once on one PostgreSQL: the second migrates only after the
    first (the advisory lock), never the same version twice."""
    if url.startswith("sqlite:"):
        pytest.skip("SQLite serialises writers by BEGIN IMMEDIATE: no advisory lock")
    first, db = CollectorDb(url), CollectorDb(url)
    done: list[object] = []
    try:
        pid = db._x("SELECT pg_backend_pid()").fetchone()[0]
        first._x("SELECT pg_advisory_lock(?)", (ADVISORY_LOCK,))  # the first collector migrating
        t = threading.Thread(target=lambda: done.append(db.migrate()))
        t.start()
        waits = "SELECT COUNT(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND pid = ?"
        wait_until(
            lambda: done or first._x(waits, (pid,)).fetchone()[0] == 1, 30, "the second migration to wait"
        )
        assert done == []  # it waits for the lock
        first._x("SELECT pg_advisory_unlock(?)", (ADVISORY_LOCK,))
        t.join(60)
        assert done == [db.schema_version()] and first.migrate() == db.schema_version()
    finally:
        first.close()
        db.close()


def test_a_database_opened_on_one_thread_is_written_on_another(url: str) -> None:
    """The collector opens its database at start and stores each round on its writer thread
    (app.collector.overlap)."""
    db = CollectorDb(url)
    failed: list[BaseException] = []

    def write() -> None:
        try:
            db.migrate()
            db.store(rec("d1", 1), NOW, statuses=[st("d1", "running")])
        except (
            db.errors()
        ) as exc:  # SQLite: "objects created in a thread can only be used in that same thread"
            failed.append(exc)

    try:
        t = threading.Thread(target=write)
        t.start()
        t.join(60)
        assert failed == [] and db.message_stats() == (1, 1)
    finally:
        db.close()


def test_postgresql_without_psycopg_is_one_line_naming_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(DbError) as err:
        CollectorDb("postgresql://fleet@127.0.0.1/fleet")
    assert str(err.value) == "PostgreSQL needs psycopg 3: pip install 'onnx-edge-agent[collector]'"


def test_a_postgresql_password_from_a_file_is_used_and_rounds_commit(url: str) -> None:
    """``password_file``'s password goes to libpq as a keyword (the test server trusts loopback, so
    any password is taken): the connection works and commits each round as without one, and a
    read leaves no transaction open (an idle-in-transaction session holds back VACUUM)."""
    if url.startswith("sqlite:"):
        pytest.skip("a password is PostgreSQL's")
    db = CollectorDb(url, password="from-a-file")
    try:
        db.migrate()
        db.store(rec("d1", 1), NOW)
        pid = db._x("SELECT pg_backend_pid()").fetchone()[0]
        assert [d["device"] for d in db.devices()] == ["d1"]
        other = CollectorDb(url)
        try:
            assert other.message_stats() == (1, 1)
            state = other._x("SELECT state FROM pg_stat_activity WHERE pid = ?", (pid,)).fetchone()[0]
            assert state == "idle"
        finally:
            other.close()
    finally:
        db.close()


def test_a_refused_postgresql_connection_names_where_it_failed() -> None:
    pytest.importorskip("psycopg", reason="psycopg 3 absent: pip install 'onnx-edge-agent[collector]'")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    with pytest.raises(DbError) as err:
        CollectorDb(f"postgresql://postgres@127.0.0.1:{port}/postgres?connect_timeout=5")
    # the driver's first line: the server and port, then the reason
    assert f'"127.0.0.1", port {port} failed' in str(err.value)
