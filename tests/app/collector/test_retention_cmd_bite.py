"""`edge-agent fleet retention` and `fleet db partition` in process (issue 36: test_retention_cmd.py
runs them as a child, which earns no mutmut credit): every line of the report, the database from
`--config` or `--db` or the environment, a flag's age over the config's, the health history
deleted in batches, the bounds of an age, and partitioning's lines on PostgreSQL and SQLite."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest
from support.collector import sqlite_url

from edge_agent.adapters.collector.db import CollectorDb
from edge_agent.app.cli.main import main
from edge_agent.app.collector.fleet_cmd import DB_ENV
from edge_agent.core.messages.fleet import DeviceStatus, parse

DAY = 86400.0


def status(ts: float, now: float) -> DeviceStatus:
    body = {"device_id": "d1", "state": "running", "ts": ts, "queue": {"pending": 1}}
    s = parse("edge", "edge/d1/status", json.dumps(body).encode(), now).status
    assert s is not None
    return s


def seed(url: str, now: float) -> None:
    """15 results and 6 counts 3 days old, 5 and 2 of now; 25 statuses 3 days old, 5 of now."""
    db = CollectorDb(url)
    db.migrate()
    recs = []
    for s in range(1, 29):
        kind, old = ("detections", s <= 15) if s <= 20 else ("counts", s <= 26)
        body = {"id": f"r{s}", "seq": s, "boot": 1, "device_id": "d1", "ts": now - (3 if old else 0) * DAY}
        recs += parse("edge", f"edge/d1/{kind}", json.dumps(body).encode(), now).records
    olds = [status(now - 3 * DAY + 60 * i, now) for i in range(25)]
    db.store(recs, now, statuses=[*olds, *(status(now - 60 * i, now) for i in range(5))])
    db.close()


def left(url: str) -> tuple[int, int]:
    db = CollectorDb(url)
    try:
        return (
            int(db._x("SELECT COUNT(*) FROM messages").fetchone()[0]),
            int(db._x("SELECT COUNT(*) FROM status_history").fetchone()[0]),
        )
    finally:
        db.close()


def fleet(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = main(["fleet", *args])
    got = capsys.readouterr()
    return rc, got.out, got.err


def config(tmp_path: Path, url: str, extra: str = "") -> str:
    path = tmp_path / "collector.toml"
    path.write_text(
        f'[collector]\ndb = "{url}"\nretention_results_days = 2\nretention_counts_days = 2.5\n'
        f"history_full_days = 1\nhistory_keep_days = 2\nmaintenance_batch = 10\n{extra}"
    )
    return str(path)


def test_the_dry_run_then_the_run_line_by_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = sqlite_url(tmp_path / "fleet.db")
    seed(url, time.time())
    cfg = config(tmp_path, url)
    rc, out, err = fleet(capsys, "retention", "-c", cfg, "--dry-run")  # the db of the config
    assert (rc, err) == (0, "")
    assert out == (
        "results: older than 2 days: would delete 15\n"
        "objects: kept for ever: would delete 0\n"
        "counts: older than 2.5 days: would delete 6\n"
        "statuses: older than 2 days: would delete 25\n"
    )
    assert left(url) == (28, 30)
    rc, out, err = fleet(capsys, "retention", "-c", cfg, "--counts-days", "0", "--dry-run", "--json")
    assert (rc, err) == (0, "")
    assert json.loads(out) == {
        "dry_run": True,
        "ages_days": {"results": 2.0, "objects": 0.0, "counts": 0.0, "statuses": 2.0},
        "rows": {"results": 15, "statuses": 25},
        "partitioned": False,
    }
    rc, out, err = fleet(capsys, "retention", "-c", cfg)
    assert (rc, err) == (0, "")
    assert out == (
        "results: older than 2 days: deleted 15\n"
        "objects: kept for ever: deleted 0\n"
        "counts: older than 2.5 days: deleted 6\n"
        "statuses: older than 2 days: deleted 25\n"  # three batches of 10
    )
    assert left(url) == (7, 5)
    rc, out, _ = fleet(capsys, "retention", "-c", cfg, "--json")
    assert rc == 0 and json.loads(out) == {
        "dry_run": False,
        "ages_days": {"results": 2.0, "objects": 0.0, "counts": 2.5, "statuses": 2.0},
        "rows": {"results": 0, "objects": 0, "counts": 0, "statuses": 0},
        "partitioned": False,
    }


def test_each_flag_overrides_its_age_of_the_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = sqlite_url(tmp_path / "fleet.db")
    seed(url, time.time())
    cfg = config(tmp_path, url, "retention_objects_days = 9\n")
    for flag, age in (("--results-days", "4"), ("--objects-days", "1.5"), ("--counts-days", "5")):
        rc, out, _ = fleet(capsys, "retention", "-c", cfg, flag, age, "--dry-run", "--json")
        got = json.loads(out)["ages_days"]
        want = {"results": 2.0, "objects": 9.0, "counts": 2.5, "statuses": 2.0}
        assert rc == 0 and got == {**want, flag[2:].split("-")[0]: float(age)}
    rc, out, _ = fleet(
        capsys, "retention", "-c", cfg, "--results-days", "4", "--counts-days", "1", "--dry-run"
    )
    assert rc == 0 and out.splitlines()[0] == "results: older than 4 days: would delete 0"
    assert out.splitlines()[2] == "counts: older than 1 days: would delete 6"


def test_db_over_the_config_and_the_environment_without_either(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    url = sqlite_url(tmp_path / "fleet.db")
    seed(url, time.time())
    elsewhere = sqlite_url(tmp_path / "missing.db")
    cfg = config(tmp_path, elsewhere)
    rc, out, err = fleet(capsys, "retention", "-c", cfg, "--db", url, "--dry-run")
    assert (rc, err) == (0, "") and "would delete 15" in out
    rc, out, err = fleet(capsys, "retention", "-c", cfg, "--dry-run")
    assert (rc, out) == (1, "")
    assert (
        err
        == f"edge-agent fleet: error: --db {elsewhere!r}: no such database file (is the collector running there?)\n"
    )
    monkeypatch.setenv(DB_ENV, url)  # no --config, no --db: the variable, never the config's default
    rc, out, err = fleet(capsys, "retention", "--results-days", "1", "--dry-run")
    assert (rc, err) == (0, "") and out.splitlines()[0] == "results: older than 1 days: would delete 15"
    assert out.splitlines()[3] == "statuses: older than 90 days: would delete 0"


@pytest.mark.parametrize(("value", "ok"), [("0", True), ("36500", True), ("-0.5", False), ("36500.5", False)])
def test_an_age_is_from_0_to_36500_days(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str, ok: bool
) -> None:
    url = sqlite_url(tmp_path / "fleet.db")
    seed(url, time.time())
    if ok:
        rc, out, _ = fleet(capsys, "retention", "--db", url, "--results-days", value, "--dry-run")
        assert rc == 0
        assert out.splitlines()[0] == (
            "results: kept for ever: would delete 0"
            if value == "0"
            else "results: older than 36500 days: would delete 0"
        )
        return
    with pytest.raises(SystemExit) as exc:
        main(["fleet", "retention", "--db", url, "--results-days", value])
    assert exc.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"edge-agent fleet retention: error: argument --results-days: {value} is out of range: "
        "expected a number of days from 0 (kept for ever) to 36500"
    )


def test_a_database_before_the_retention_schema_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "old.db"
    c = sqlite3.connect(path)
    c.execute("CREATE TABLE schema_version (version INTEGER PRIMARY KEY, name TEXT NOT NULL)")
    c.execute("INSERT INTO schema_version VALUES (6, '0006_history.sql')")
    c.commit()
    c.close()
    rc, out, err = fleet(capsys, "retention", "--db", f"sqlite:///{path}", "--results-days", "1")
    assert (rc, out) == (1, "")
    assert err == (
        "edge-agent fleet: error: --db: schema version 6 has no retention tables (expired): run this "
        "version's `edge-agent collect` once, it migrates the database\n"
    )


def test_partition_on_postgresql_and_its_refusals(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    now = time.time()
    seed(url, now)
    if url.startswith("sqlite"):
        rc, out, err = fleet(capsys, "db", "partition", "--db", url)
        assert (rc, out) == (1, "")
        assert (
            err
            == "edge-agent fleet: error: fleet db partition: the database is SQLite; partitioning is PostgreSQL's\n"
        )
        return
    rc, out, err = fleet(capsys, "db", "partition", "--db", url, "--timescaledb")
    assert (rc, out) == (1, "")
    assert err == (
        "edge-agent fleet: error: fleet db partition: the timescaledb extension is not installed in this "
        "database (CREATE EXTENSION timescaledb)\n"
    )
    rc, out, err = fleet(capsys, "db", "partition", "--db", url, "--json")
    assert (rc, err) == (0, "")
    got = json.loads(out)
    assert got["rows"] == 28 and got["timescaledb"] is False and got["partitions"] >= 5
    rc, out, err = fleet(capsys, "db", "partition", "--db", url)
    assert (rc, out, err) == (
        1,
        "",
        "edge-agent fleet: error: fleet db partition: messages is partitioned already\n",
    )
    rc, out, err = fleet(capsys, "retention", "--db", url, "--results-days", "2")
    assert (rc, err) == (0, "")
    assert out.splitlines() == [
        "results: older than 2 days: deleted 15",
        "objects: kept for ever: deleted 0",
        "counts: kept for ever: deleted 0",
        "statuses: older than 90 days: deleted 0",
        "messages is partitioned by day: days past every age are dropped whole",
    ]
    rc, out, _ = fleet(capsys, "retention", "--db", url, "--dry-run", "--json")
    assert rc == 0 and json.loads(out)["partitioned"] is True


def test_partition_prints_its_rows_and_partitions(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    if url.startswith("sqlite"):
        pytest.skip("partitioning is PostgreSQL's (the SQLite refusal: the test above)")
    seed(url, time.time())
    rc, out, err = fleet(capsys, "db", "partition", "--db", url)
    assert (rc, err) == (0, "")
    assert out.startswith("messages: 28 rows, now ") and out.endswith(
        " partitions (a day each, and a default)\n"
    )
    parts = int(out[len("messages: 28 rows, now ") :].split(" ", 1)[0])
    assert parts >= 5


def test_the_hypertable_path_reports_its_rows_and_no_partitions(
    url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """No TimescaleDB here: its conversion stood in (28 rows), the command's own lines checked."""
    if url.startswith("sqlite"):
        pytest.skip("the hypertable path is PostgreSQL's (the SQLite refusal: the test above)")
    from edge_agent.adapters.collector import partitions

    seed(url, time.time())
    monkeypatch.setattr(partitions, "hypertable", lambda db: 28)
    rc, out, err = fleet(capsys, "db", "partition", "--db", url, "--timescaledb")
    assert (rc, out, err) == (0, "messages: 28 rows, now a TimescaleDB hypertable\n", "")
    rc, out, _ = fleet(capsys, "db", "partition", "--db", url, "--timescaledb", "--json")
    assert rc == 0 and json.loads(out) == {"rows": 28, "partitions": 0, "timescaledb": True}


def test_db_without_its_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["fleet", "db"])
    assert exc.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "edge-agent fleet db: error: the following arguments are required: COMMAND"
    )


@pytest.mark.parametrize(
    ("argv", "options"),
    [
        (
            ["retention"],
            ["--config FILE, -c FILE", "--results-days D", "--objects-days D", "--counts-days D", "--db URL"],
        ),
        (["db", "partition"], ["--timescaledb", "--db URL", "--json"]),
    ],
)
def test_help_shows_the_placeholders_and_what_the_commands_do(
    capsys: pytest.CaptureFixture[str], argv: list[str], options: list[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["fleet", *argv, "-h"])
    assert exc.value.code == 0
    text = capsys.readouterr().out
    words = " ".join(text.split())
    assert "'--dry-run': how many rows each would delete, nothing deleted." in words
    assert "'db partition' (PostgreSQL): make 'messages' partitioned by day of the device time" in words
    listed = [ln.strip().split("  ")[0] for ln in text.splitlines() if ln.startswith("  -")]
    assert set(options) <= set(listed), listed
