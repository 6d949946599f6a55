"""The collector's database on SQLite and on a real PostgreSQL: migrations, idempotent inserts,
status ordering, the gap view, and the fleet commands reading it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.collector import NOW, fleet, rec, sqlite_url, status

from edge_agent.adapters.collector.db import CollectorDb, DbError, Rejected, migrations


def test_migrations_are_applied_once_and_a_newer_schema_is_refused(url: str) -> None:
    db = CollectorDb(url)
    try:
        assert db.schema_version() == 0
        n = len(migrations(db.dialect))  # 0001_init, 0002_trust, 0003_confirm, ...
        assert n >= 3 and db.migrate() == n and db.migrate() == n
        assert db.schema_version() == n
        db._x("INSERT INTO schema_version (version, name) VALUES (99, 'future')")
        with pytest.raises(DbError, match="newer than this collector"):
            db.migrate()
    finally:
        db.close()


def test_redeliveries_are_counted_not_stored_and_gaps_are_seen(url: str) -> None:
    db = CollectorDb(url)
    try:
        db.migrate()
        first = [r for s in (1, 2, 3, 7) for r in rec("d1", s)] + [r for s in (1, 2) for r in rec("d2", s)]
        assert db.store(first, NOW) == 6
        again = rec("d1", 3) + rec("d1", 7) + rec("d1", 8, boot=2)
        assert db.store(again + again, NOW) == 1  # duplicates within one round too
        assert db.message_stats() == (7, 7)
        assert db.gap_rows("d1") == [(4, 6, 1, 1)]
        assert db.gap_rows("d2") == []
        db.store(rec("d3", 5), NOW, rejected=[Rejected("edge/x/y", "bad", NOW)])
        assert db.gap_rows("d3") == [(1, 4, None, 1)]
        by_dev = {d["device"]: d for d in db.devices()}
        assert (by_dev["d1"]["messages"], by_dev["d1"]["gaps"], by_dev["d1"]["missing"]) == (5, 1, 3)
    finally:
        db.close()


def test_the_newest_status_wins_and_a_last_will_counts_at_its_arrival(url: str) -> None:
    db = CollectorDb(url)
    try:
        db.migrate()
        db.store([], NOW + 10, statuses=[status("d1", "running", ts=NOW + 10, crashes=1)])
        db.store([], NOW + 11, statuses=[status("d1", "running", ts=NOW + 5)])  # older, redelivered
        (d,) = db.devices()
        assert d["status_time"] == pytest.approx(NOW + 10, abs=1e-3) and d["counters"]["crashes"] == 1
        assert db.online() == 1
        # the will: the snapshot of the connect (ts NOW), published by the broker at NOW + 30
        db.store([], NOW + 30, statuses=[status("d1", "offline", ts=NOW, dropped=4)])
        db.store([], NOW + 31, statuses=[status("d1", "running", ts=NOW + 20)])  # stale redelivery
        (d,) = db.devices()
        assert (d["state"], d["backlog"], d["model_version"]) == ("offline", 3, "m1")
        assert d["counters"]["dropped"] == 4 and d["last_seen"] == pytest.approx(NOW + 31, abs=1e-3)
        assert db.online() == 0
        db.store([], NOW + 40, statuses=[status("d1", "running", ts=NOW + 40)])  # back again
        assert db.online() == 1
    finally:
        db.close()


def test_fleet_commands_read_the_database(url: str) -> None:
    db = CollectorDb(url)
    try:
        db.migrate()
        db.store(
            rec("d1", 1) + rec("d1", 4, boot=2),
            NOW,
            statuses=[status("d1", "running", crashes=1, seq_skipped=2)],
        )
    finally:
        db.close()
    out = fleet("status", "--db", url)
    assert out.returncode == 0, out.stderr
    assert "d1" in out.stdout and "running" in out.stdout and "1 (2 seq)" in out.stdout
    gaps = fleet("gaps", "d1", "--db", url, "--json")
    assert gaps.returncode == 0, gaps.stderr
    (g,) = json.loads(gaps.stdout)["gaps"]
    assert (g["first"], g["last"], g["missing"], g["reported"]) == (2, 3, 2, True)
    assert "crash window" in fleet("gaps", "d1", "--db", url).stdout
    for args, why in [
        (["gaps", "nobody"], "not in the collector's database"),
        (["gaps", "a/b"], "expected 1-64"),
    ]:
        bad = fleet(*args, "--db", url)
        assert bad.returncode == 1 and why in bad.stderr and "Traceback" not in bad.stderr


def test_fleet_refuses_a_missing_file_and_a_foreign_database(tmp_path: Path) -> None:
    missing = fleet("status", "--db", sqlite_url(tmp_path / "nope.db"))
    assert missing.returncode == 1 and "no such database file" in missing.stderr
    other = tmp_path / "other.db"
    CollectorDb(sqlite_url(other)).close()
    foreign = fleet("status", "--db", sqlite_url(other))
    assert foreign.returncode == 1 and "not a collector database" in foreign.stderr
    bad = fleet("status", "--db", "mysql://x")
    assert bad.returncode == 1 and "expected sqlite:///PATH" in bad.stderr


def test_a_schema_one_version_ahead_is_refused(url: str) -> None:
    """A collector one release older than the database must not write into its newer schema."""
    db = CollectorDb(url)
    try:
        have = db.migrate()
        db._x("INSERT INTO schema_version (version, name) VALUES (?, 'next')", (have + 1,))
        with pytest.raises(
            DbError, match=f"schema version {have + 1} is newer than this collector \\({have}\\)"
        ):
            db.migrate()
    finally:
        db.close()


def test_last_seen_never_goes_back(url: str) -> None:
    """Two group members' clocks differ: a round stored later with an earlier receive time must not
    make a device look silent for longer than it is."""
    db = CollectorDb(url)
    try:
        db.migrate()
        db.store(rec("d1", 1), NOW + 10)
        db.store(rec("d1", 2), NOW + 5)
        (d,) = db.devices()
        assert d["last_seen"] == pytest.approx(NOW + 10, abs=1e-3)
        db.store(rec("d1", 3), NOW + 20)
        (d,) = db.devices()
        assert d["last_seen"] == pytest.approx(NOW + 20, abs=1e-3)
    finally:
        db.close()


def test_a_retired_device_is_still_known_by_its_kept_results(url: str) -> None:
    db = CollectorDb(url)
    try:
        db.migrate()
        db.store(rec("d1", 1) + rec("d1", 2), NOW, statuses=[status("d1", "running")])
        assert db.retire("d1") == (2, 0)
        assert db.retire("d1") == (2, 0)  # no devices row now, but its messages are still there
        assert db.retire("d1", purge=True) == (2, 0)
        assert db.retire("d1") is None
    finally:
        db.close()


def test_a_gap_in_the_migration_numbers_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from edge_agent.adapters.collector import migrations as collector_db

    d = tmp_path / "sqlite"
    d.mkdir()
    (d / "0001_init.sql").write_text("CREATE TABLE a (x INTEGER);")
    (d / "0003_more.sql").write_text("CREATE TABLE b (x INTEGER);")
    (d / "README.txt").write_text("not a migration")
    monkeypatch.setattr(collector_db, "SQL_DIR", tmp_path)
    with pytest.raises(DbError, match=r"0003_more.sql: migration 3 out of order, expected 0002_\*.sql"):
        collector_db.migrations("sqlite")
    (d / "0003_more.sql").rename(d / "0002_more.sql")
    assert [(v, n) for v, n, _ in collector_db.migrations("sqlite")] == [
        (1, "0001_init.sql"),
        (2, "0002_more.sql"),
    ]


def test_a_draining_device_is_online_and_its_newer_status_replaces_every_figure(url: str) -> None:
    """draining = connected and sending its backlog: online for the dashboard; each newer status
    replaces backlog and counters (a device whose backlog shrank must not show the old one)."""
    db = CollectorDb(url)
    try:
        db.migrate()
        db.store([], NOW, statuses=[status("d1", "draining", ts=NOW, pending=900, dropped=1)])
        db.store([], NOW, statuses=[status("d2", "offline", ts=NOW)])
        assert db.online() == 1
        db.store([], NOW + 5, statuses=[status("d1", "running", ts=NOW + 5, pending=2, dropped=7)])
        d1 = {d["device"]: d for d in db.devices()}["d1"]
        assert (d1["state"], d1["backlog"], d1["counters"]["dropped"]) == ("running", 2, 7)
        assert d1["status_time"] == pytest.approx(NOW + 5, abs=1e-3)
    finally:
        db.close()


def test_counters_of_a_device_are_its_last_status_figures(url: str) -> None:
    db = CollectorDb(url)
    try:
        db.migrate()
        assert db.counters("d1") is None
        db.store(rec("d1", 1), NOW)  # heard, but no status yet: every counter 0
        assert db.counters("d1") == {
            k: 0 for k in ("dropped", "expired", "rejected", "lost", "crashes", "seq_skipped", "salvaged")
        }
        db.store([], NOW, statuses=[status("d1", "running", dropped=2, crashes=1, salvaged=5)])
        got = db.counters("d1")
        assert got is not None and (got["dropped"], got["crashes"], got["salvaged"], got["lost"]) == (
            2,
            1,
            5,
            0,
        )
    finally:
        db.close()


def test_a_sqlite_commit_is_durable_before_the_ack(tmp_path: Path) -> None:
    """The collector acks MQTT messages after the commit: SQLite must have synced it (FULL), in WAL
    mode so `fleet` readers never block the writer."""
    db = CollectorDb(sqlite_url(tmp_path / "fleet.db"))
    try:
        assert db.conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
        assert db.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert db.conn.execute("PRAGMA busy_timeout").fetchone()[0] == 60_000
    finally:
        db.close()
