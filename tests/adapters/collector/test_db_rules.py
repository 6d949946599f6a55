"""CollectorDb's own rules, in process (issue 36, the collector-db mutation area), on SQLite and a
real PostgreSQL: the one-line errors of a database that cannot be opened, which driver errors are
transient (the round is retried) or about the data, a round's statuses raising the seq bound by
their highest report, the events and rejected messages as stored, the dead letters as an operator
reads them back, ``retire`` with and without ``--purge``, and the small reads the fleet views use."""

from __future__ import annotations

import json
import socket
import sqlite3
from pathlib import Path

import pytest
from support.collector import NOW, rec, sqlite_url, status

from edge_agent.adapters.collector.db import CollectorDb, DbError, Rejected
from edge_agent.adapters.collector.trust import Limits
from edge_agent.core.messages.fleet import DeviceStatus, Event, parse


def reported(dev: str, seq: int) -> DeviceStatus:
    body = {"device_id": dev, "state": "running", "ts": NOW, "queue": {"boot": 1, "seq": seq}}
    got = parse("edge", f"edge/{dev}/status", json.dumps(body).encode(), NOW).status
    assert got is not None
    return got


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_sqlite_file_in_a_new_folder_is_made_and_one_that_cannot_be_is_one_line(tmp_path: Path) -> None:
    db = CollectorDb(sqlite_url(tmp_path / "a" / "b" / "fleet.db"))
    try:
        assert db.migrate() > 0 and (tmp_path / "a" / "b" / "fleet.db").is_file()
    finally:
        db.close()
    (tmp_path / "dir.db").mkdir()  # a folder where the file should be
    url = sqlite_url(tmp_path / "dir.db")
    with pytest.raises(DbError) as err:
        CollectorDb(url).migrate()
    assert str(err.value).startswith(f"--db {url!r}: cannot open the SQLite file: ")
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("scheme", ["postgresql", "postgres"])
def test_a_postgresql_server_that_is_not_there_is_one_line(scheme: str) -> None:
    pytest.importorskip("psycopg", reason="psycopg 3 absent: pip install 'onnx-edge-agent[collector]'")
    url = f"{scheme}://postgres@127.0.0.1:{closed_port()}/postgres?connect_timeout=5"
    with pytest.raises(DbError) as err:
        CollectorDb(url)
    msg = str(err.value)
    assert msg.startswith("--db: cannot connect to PostgreSQL: ") and len(msg) > 40
    assert "\n" not in msg and url not in msg  # a URL may carry a password


@pytest.mark.parametrize("url", ["mysql://fleet", "sqlite:/fleet.db", "fleet.db", ""])
def test_a_url_of_no_known_database_is_one_line_naming_it(url: str) -> None:
    with pytest.raises(DbError, match=r"^--db .*expected sqlite:///") as err:
        CollectorDb(url)
    assert repr(url) in str(err.value)


def test_a_locked_or_lost_database_is_transient_a_refused_row_is_not(url: str) -> None:
    db = CollectorDb(url)
    try:
        if db.dialect == "sqlite":
            assert issubclass(sqlite3.OperationalError, db.transient())
            assert not issubclass(sqlite3.IntegrityError, db.transient())
            assert issubclass(sqlite3.IntegrityError, db.errors())
        else:
            import psycopg

            assert issubclass(psycopg.OperationalError, db.transient())
            assert issubclass(psycopg.InterfaceError, db.transient())
            assert not issubclass(psycopg.errors.UniqueViolation, db.transient())
            assert issubclass(psycopg.errors.UniqueViolation, db.errors())
            assert not issubclass(sqlite3.Error, db.errors())
    finally:
        db.close()


def test_the_schema_version_of_an_empty_database_is_0_and_it_stays_usable(url: str) -> None:
    db = CollectorDb(url)
    try:
        assert db.schema_version() == 0  # no schema_version table yet: no traceback, 0
        assert db.migrate() == db.schema_version() > 0
    finally:
        db.close()


def test_the_highest_seq_a_round_reports_is_its_bound_whatever_the_order(url: str) -> None:
    db = CollectorDb(url, limits=Limits(seq_jump_max=10))
    try:
        db.migrate()
        db.store(rec("d1", 1) + rec("d2", 1), NOW)
        # two statuses of d1 in one round, the higher first; d2 reports nothing this round
        got = db.store(
            rec("d1", 1005) + rec("d2", 20), NOW, statuses=[reported("d1", 1000), reported("d1", 3)]
        )
        assert got == 1 and db.last_conflicts == {"d2": 1}
    finally:
        db.close()


def test_events_and_rejected_messages_are_stored_as_received(url: str) -> None:
    db = CollectorDb(url)
    try:
        db.migrate()
        ev = parse("edge", "edge/d1/model_progress", b'{"step":"verify"}', NOW).event
        assert ev is not None
        db.store(
            [],
            NOW + 3,
            events=[ev, Event("d2", "model_progress", '{"step":"done"}')],
            rejected=[Rejected("edge/x/detections", "not JSON", NOW + 1)],
        )
        rows = db._x("SELECT device, kind, body FROM events ORDER BY device").fetchall()
        bodies = [(d, k, json.loads(b) if isinstance(b, str) else b) for d, k, b in rows]
        assert bodies == [("d1", ev.kind, {"step": "verify"}), ("d2", "model_progress", {"step": "done"})]
        (topic, reason), *more = db._x("SELECT topic, reason FROM rejected").fetchall()
        assert (topic, reason, more) == ("edge/x/detections", "not JSON", [])
        # an event makes its device known, heard at the round's receive time
        seen = {d["device"]: d["last_seen"] for d in db.devices()}
        assert seen == {"d1": pytest.approx(NOW + 3, abs=1e-3), "d2": pytest.approx(NOW + 3, abs=1e-3)}
        assert db.store([], NOW + 4) == 0 and db.last_duplicates == 0 and db.confirms == {}
    finally:
        db.close()


def test_a_dead_letter_keeps_its_payload_readable_and_counts_each_failure(url: str) -> None:
    db = CollectorDb(url)
    try:
        db.migrate()
        payload = b'{"id": "p1"}\x00\xff' + b"x" * 5000
        db.dead_letter("edge/p/detections" + "t" * 2000, "boom " + "r" * 2000, payload, NOW)
        db.dead_letter("edge/p/detections" + "t" * 2000, "boom again", payload, NOW + 7)
        (topic, reason, text, count, first, last), *more = db._x(
            "SELECT topic, reason, payload, count, first_seen, last_seen FROM dead_letters"
        ).fetchall()
        assert more == [] and count == 2 and reason == "boom again"
        assert len(topic) == 1024 and topic.startswith("edge/p/detections")
        # the first 4 KiB, the NUL and the byte that is no UTF-8 spelt out (text columns refuse them)
        assert text == '{"id": "p1"}\\x00\\xff' + "x" * (4096 - 14)
        if db.dialect == "postgresql":
            first, last = first.timestamp(), last.timestamp()
        assert (first, last) == (pytest.approx(NOW), pytest.approx(NOW + 7))
        db.dead_letter("edge/p/detections", "r" * 2000, b"other", NOW + 8)  # another message
        (n,), (long_reason,) = (
            db._x("SELECT COUNT(*) FROM dead_letters").fetchone(),
            db._x("SELECT reason FROM dead_letters WHERE payload = 'other'").fetchone(),
        )
        assert n == 2 and long_reason == "r" * 1024
    finally:
        db.close()


def test_retire_counts_what_it_keeps_or_purges_and_forgets_only_that_device(url: str) -> None:
    db = CollectorDb(url)
    try:
        db.migrate()
        ev = parse("edge", "edge/old/model_progress", b'{"step":"verify"}', NOW).event
        assert ev is not None
        db.store(
            rec("old", 1) + rec("old", 2) + rec("old", 5) + rec("keep", 1),
            NOW,
            statuses=[status("old", "running"), status("keep", "running")],
            events=[ev],
        )
        db._x(
            db._ts_sql(
                "INSERT INTO expired (device, boot, lo, hi, rows, newest) VALUES (?, 1, 1, 1, 1, {t})"
            ),
            ("old", NOW),
        )
        assert db.retire("nobody") is None and db.retire("nobody", purge=True) is None
        assert db.retire("old") == (3, 1)  # kept
        assert db.device_ids() == ["keep"] and db.online() == 1
        assert db.retire("old", purge=True) == (3, 1)  # known by its kept rows: now deleted
        for table in ("messages", "events", "status_history", "expired"):
            n = db._x(f"SELECT COUNT(*) FROM {table} WHERE device = 'old'").fetchone()[0]
            assert n == 0, table
        assert db.retire("old") is None
        assert db.message_stats() == (1, 1) and db.counters("keep") is not None
        assert db._x("SELECT COUNT(*) FROM status_history WHERE device = 'keep'").fetchone()[0] == 1
    finally:
        db.close()


def test_the_small_reads_of_the_fleet_views(url: str) -> None:
    db = CollectorDb(url, limits=Limits(seq_jump_max=1000))
    try:
        db.migrate()
        db.store(rec("d1", 1) + rec("d1", 4) + rec("d1", 2, boot=2) + rec("d1", 9, boot=2), NOW)
        db.store(rec("d0", 3) + rec("d0", 5), NOW)
        # (first, last, boot before, boot after): seqs are the device's, across its boots
        assert db.gap_rows("d1") == [(3, 3, 2, 1), (5, 8, 1, 2)]
        assert db.gap_rows("d0") == [(1, 2, None, 1), (4, 4, 1, 1)]  # nothing before seq 3
        assert db.gap_rows("nobody") == []
        forged = [
            r
            for s in (4, 1)
            for r in parse(
                "edge",
                "edge/d1/detections",
                json.dumps({"id": f"f{s}", "seq": s, "boot": 1, "device_id": "d1", "ts": NOW}).encode(),
                NOW,
            ).records
        ]
        db.store(forged, NOW)
        rows = db.conflict_rows("d1")
        assert [(b, q, m) for b, q, m, _ in rows] == [(1, 1, "f1"), (1, 4, "f4")]  # by seq
        assert db.conflict_rows("d1", limit=1) == rows[:1]
        assert db.conflict_rows("other") == []
        db.store(
            [], NOW, statuses=[status("d1", "running"), status("d2", "offline"), status("d3", "draining")]
        )
        assert sorted(db.device_ids()) == ["d0", "d1", "d2", "d3"] and db.online() == 2
        assert db.message_stats() == (6, 6)
        assert db.many("SELECT 1", []) == []
    finally:
        db.close()
