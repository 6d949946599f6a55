"""``edge-agent fleet status|gaps`` in process on SQLite (mutmut credits only in-process calls):
where the database is found, what the table shows for each column, one clear error otherwise.
PostgreSQL and the subprocess runs are in test_fleet_retire.py."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from support.collector import NOW, rec, sqlite_url, status

from edge_agent.adapters.collector.db import CollectorDb
from edge_agent.app.cli.main import main
from edge_agent.app.collector.fleet_cmd import DB_ENV


def seed(path: Path) -> str:
    """cam-1 with seq 1 and 4 (one gap of 2) and a backlog of 0; cam-2 with no status at all."""
    url = sqlite_url(path)
    db = CollectorDb(url)
    try:
        db.migrate()
        db.store(
            rec("cam-1", 1) + rec("cam-1", 4) + rec("cam-2", 1),
            NOW,
            statuses=[status("cam-1", "running", pending=0)],
        )
    finally:
        db.close()
    return url


def table(capsys: pytest.CaptureFixture[str]) -> dict[str, list[str]]:
    lines = capsys.readouterr().out.splitlines()
    head = lines[0].split()
    assert head[:3] == ["DEVICE", "STATE", "LAST"]
    return {ln.split()[0]: ln.split() for ln in lines}


def test_the_database_comes_from_the_environment_unless_db_is_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    url = seed(tmp_path / "fleet.db")
    monkeypatch.setenv(DB_ENV, url)
    assert main(["-q", "fleet", "status"]) == 0
    assert sorted(table(capsys)) == ["DEVICE", "cam-1", "cam-2"]
    other = seed(tmp_path / "other.db")
    db = CollectorDb(other)
    try:
        db.retire("cam-2", True)
    finally:
        db.close()
    assert main(["-q", "fleet", "status", "--db", other]) == 0  # the flag wins over the environment
    assert sorted(table(capsys)) == ["DEVICE", "cam-1"]


def test_status_columns_a_zero_backlog_is_zero_and_gaps_count_their_seqs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = seed(tmp_path / "fleet.db")
    assert main(["-q", "fleet", "status", "--db", url]) == 0
    rows = table(capsys)
    cam1, cam2 = rows["cam-1"], rows["cam-2"]
    # backlog 0 (not "-"), 2 messages, 1 gap of 2 seqs, 0 conflicts
    assert cam1[1] == "running" and cam1[-6:] == ["0", "2", "1", "(2", "seq)", "0"]
    assert cam2[1] == "-" and cam2[-4:] == ["-", "1", "0", "0"]  # no status: no backlog known


def test_a_missing_file_and_a_database_that_is_not_the_collectors_are_one_error_each(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = sqlite_url(tmp_path / "nope.db")
    assert main(["-q", "fleet", "status", "--db", missing]) == 1
    assert f"--db {missing!r}: no such database file" in capsys.readouterr().err
    sqlite3.connect(tmp_path / "other.db").execute("CREATE TABLE t (x)").connection.close()
    other = sqlite_url(tmp_path / "other.db")
    assert main(["-q", "fleet", "gaps", "cam-1", "--db", other]) == 1
    assert f"--db {other!r}: not a collector database" in capsys.readouterr().err


def test_a_fleet_without_cameras_keeps_its_table_and_one_with_them_gets_a_cameras_column(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from edge_agent.core.messages.fleet import parse

    url = seed(tmp_path / "fleet.db")
    assert main(["-q", "fleet", "status", "--db", url]) == 0
    before = capsys.readouterr().out
    assert "CAMERAS" not in before and before.splitlines()[0].split()[-1] == "CONFLICTS"
    assert main(["-q", "fleet", "status", "--cameras", "--db", url]) == 0
    out = capsys.readouterr()
    assert out.out.split() == [
        *("DEVICE", "CAMERA", "STATE", "FPS", "IN", "FPS", "PROCESSED", "FRAME", "AGE", "RECONNECTS"),
        *("LAST", "ERROR"),
    ]
    assert "no device reports cameras" in out.err
    cams = {
        "gate": {
            "state": "streaming",
            "fps_in": 10,
            "fps": 4.5,
            "processed": 9,
            "frame_age_ms": 40.4,
            "reconnects": 0,
        },
        "door": {"state": "failed", "last_error": "no such device"},
        "bad/id": {"state": "streaming"},
    }
    body = {"device_id": "cam-3", "state": "running", "ts": NOW, "queue": {}, "cameras": cams}
    db = CollectorDb(url)
    try:
        db.store(
            [], NOW, statuses=[parse("edge", "edge/cam-3/status", json.dumps(body).encode(), NOW).status]
        )  # type: ignore[list-item]
    finally:
        db.close()
    assert main(["-q", "fleet", "status", "--db", url]) == 0
    rows = table(capsys)
    assert rows["DEVICE"][-1] == "CAMERAS"
    assert rows["cam-1"][-1] == "-" and rows["cam-2"][-1] == "-"
    assert rows["cam-3"][-3:] == ["3", "(2", "down)"]  # door failed, bad/id cannot be shown up
    assert main(["-q", "fleet", "status", "--cameras", "--db", url]) == 0
    out = capsys.readouterr()
    lines = [ln.split() for ln in out.out.splitlines()[1:]]
    assert lines == [
        ["cam-3", "door", "failed", "-", "-", "-", "-", "-", "no", "such", "device"],
        ["cam-3", "gate", "streaming", "10.0", "4.5", "9", "40", "ms", "0", "-"],
    ]
    assert "cam-3: 1 more camera entries not shown" in out.err
