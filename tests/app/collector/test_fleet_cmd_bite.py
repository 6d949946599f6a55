"""``edge-agent fleet status|gaps|history`` as an operator reads them, in process (issue 36: made for
the fleet-cmd area's survivors): the status table line by line (left-aligned columns two blanks
apart, no trailing blanks, how long ago a device was heard, the model cut at 24), an empty fleet,
``status --cameras`` as JSON and its figures (one decimal for the rates, whole counts as written,
the last error cut at 60), ``history --limit``'s bounds, ``gaps`` on a database from before the
retention, ``history`` of a purged device still in a rollout, and the whole error lines."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from support.collector import NOW, rec, sqlite_url, status

from edge_agent.adapters.collector.db import CollectorDb
from edge_agent.app.cli.main import main
from edge_agent.core.messages.fleet import DeviceStatus, Record, parse


def _status(dev: str, body: dict[str, object], received: float) -> DeviceStatus:
    full = {"device_id": dev, "state": "running", "ts": received, "queue": {"pending": 0}, **body}
    got = parse("edge", f"edge/{dev}/status", json.dumps(full).encode(), received).status
    assert got is not None
    return got


def test_the_status_table_is_left_aligned_without_trailing_blanks_and_says_how_long_ago(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = sqlite_url(tmp_path / "fleet.db")
    heard = time.time() - 7200  # two hours ago: "2.0 h ago" however long the test takes
    body = {"queue": {"pending": 12}, "models": {"detector": {"id": "yolov8n-traffic-2026-11-30-int8"}}}
    db = CollectorDb(url)
    try:
        db.migrate()
        db.store(
            rec("cam-1", 1) + rec("cam-1", 2) + rec("cam-1", 5) + rec("lobby-cam-22", 1),
            heard,
            statuses=[_status("cam-1", body, heard)],
        )
    finally:
        db.close()
    assert main(["fleet", "status", "--db", url]) == 0
    out = capsys.readouterr()
    assert out.out.splitlines() == [
        "DEVICE        STATE    LAST SEEN  MODEL                     BACKLOG  MESSAGES  GAPS       CONFLICTS",
        "cam-1         running  2.0 h ago  yolov8n-traffic-2026-11-  12       3         1 (2 seq)  0",
        "lobby-cam-22  -        2.0 h ago  -                         -        1         0          0",
    ]
    assert out.err == ""


def test_an_empty_fleet_is_the_head_and_one_line_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = sqlite_url(tmp_path / "fleet.db")
    db = CollectorDb(url)
    db.migrate()
    db.close()
    assert main(["fleet", "status", "--db", url]) == 0
    out = capsys.readouterr()
    assert out.out == "DEVICE  STATE  LAST SEEN  MODEL  BACKLOG  MESSAGES  GAPS  CONFLICTS\n"
    assert out.err == "(no devices yet)\n"
    assert main(["fleet", "status", "--cameras", "--db", url]) == 0
    out = capsys.readouterr()
    assert out.err == "(no device reports cameras: [[cameras]] in its config)\n"
    assert main(["fleet", "status", "--cameras", "--db", url, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"cameras": [], "left_out": {}}


def test_cameras_as_json_and_their_figures_as_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = sqlite_url(tmp_path / "fleet.db")
    error = "rtsp://10.0.0.117/stream: connection refused after 5 attempts (timeout 10 s each)"
    cams = {
        "gate": {"state": "streaming", "fps_in": 10, "fps": 10, "processed": 1234567, "reconnects": 2345678},
        "door": {"state": "reconnecting", "last_error": error},
        "bad/id": {"state": "streaming"},
    }
    db = CollectorDb(url)
    try:
        db.migrate()
        db.store([], NOW, statuses=[_status("cam-3", {"cameras": cams}, NOW)])
    finally:
        db.close()
    assert main(["fleet", "status", "--cameras", "--db", url, "--json"]) == 0
    none = dict.fromkeys(("fps_in", "fps", "processed", "frame_age_ms", "reconnects", "last_error"))
    assert json.loads(capsys.readouterr().out) == {
        "cameras": [
            {"device": "cam-3", "camera": "door", "state": "reconnecting", **none, "last_error": error},
            {
                "device": "cam-3",
                "camera": "gate",
                "state": "streaming",
                **none,
                **{"fps_in": 10.0, "fps": 10.0, "processed": 1234567, "reconnects": 2345678},
            },
        ],
        "left_out": {"cam-3": 1},
    }
    assert main(["fleet", "status", "--cameras", "--db", url]) == 0
    out = capsys.readouterr()
    lines = out.out.splitlines()
    assert lines[1].split() == ["cam-3", "door", "reconnecting", "-", "-", "-", "-", "-", *error[:60].split()]
    assert lines[1].endswith("  " + error[:60])  # cut at 60 characters
    assert lines[2].split() == ["cam-3", "gate", "streaming", "10.0", "10.0", "1234567", "-", "2345678", "-"]
    assert out.err == "cam-3: 1 more camera entries not shown (not a camera id or object, or past 64)\n"


def _history(path: Path) -> str:
    url = sqlite_url(path)
    db = CollectorDb(url)
    try:
        db.migrate()
        for i in range(3):
            db.store([], NOW + 60 * i, statuses=[status("cam-1", "running", NOW + 60 * i, pending=i)])
    finally:
        db.close()
    return url


@pytest.mark.parametrize("limit", ["0", "1000001", "-1"])
def test_history_limit_outside_1_to_a_million_is_a_usage_error(
    tmp_path: Path, limit: str, capsys: pytest.CaptureFixture[str]
) -> None:
    url = _history(tmp_path / "fleet.db")
    with pytest.raises(SystemExit) as exc:
        main(["fleet", "history", "cam-1", "--db", url, "--limit", limit])
    assert exc.value.code == 2
    out = capsys.readouterr()
    assert out.out == ""
    assert out.err.splitlines()[-1].endswith(
        f"argument --limit: {limit} is out of range: expected a whole number from 1 to 1000000"
    )


def test_history_limit_1_and_a_million_are_taken(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = _history(tmp_path / "fleet.db")
    assert main(["fleet", "history", "cam-1", "--db", url, "--json", "--limit", "1"]) == 0
    assert [s["backlog"] for s in json.loads(capsys.readouterr().out)["statuses"]] == [2]  # the newest
    assert main(["fleet", "history", "cam-1", "--db", url, "--json", "--limit", "1000000"]) == 0
    assert [s["backlog"] for s in json.loads(capsys.readouterr().out)["statuses"]] == [0, 1, 2]


def test_history_of_a_database_without_the_history_table_says_what_to_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = _history(tmp_path / "fleet.db")
    db = CollectorDb(url)
    version = db.schema_version()
    db.conn.execute("DROP TABLE status_history")  # a database of an older collector
    db.close()
    assert main(["fleet", "history", "cam-1", "--db", url]) == 1
    assert capsys.readouterr() == (
        "",
        f"edge-agent fleet: error: --db: schema version {version} has no health history (status_history): "
        "run this version's `edge-agent collect` once, it migrates the database\n",
    )


def test_a_purged_device_of_a_rollout_keeps_its_verdicts_in_history(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from edge_agent.adapters.collector import rollouts
    from edge_agent.adapters.collector.rollouts import Rollout, VerdictRow

    url = _history(tmp_path / "fleet.db")
    db = CollectorDb(url)
    try:
        r = Rollout(
            id="r-1", created=NOW, updated=NOW, package="/p.pkg", package_sha256="ab" * 32, name="demo",
            version="2.0", vid="demo-2.0-x", group="g", canary="1", halt_after=1, wave=0,
            stages=[["cam-1"]], state="halted", stage=0, pushed=0,
        )  # fmt: skip
        rollouts.create(db, r)
        assert rollouts.add_verdict(db, VerdictRow("r-1", "cam-1", 0, "r-1-s0", "refused", "gate", NOW + 30))
    finally:
        db.close()
    assert main(["fleet", "retire", "cam-1", "--purge", "--db", url]) == 0
    capsys.readouterr()
    assert main(["fleet", "history", "cam-1", "--db", url, "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["statuses"] == [] and [v["verdict"] for v in got["rollout_verdicts"]] == ["refused"]


def _before_retention(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A database as the collector before the retention (migrations 1-6, no ``expired``) left it."""
    from edge_agent.adapters.collector import db as db_module

    every = db_module.migrations
    with monkeypatch.context() as m:
        m.setattr(db_module, "migrations", lambda dialect: [x for x in every(dialect) if x[0] < 7])
        db = CollectorDb(url)
        try:
            assert db.migrate() == 6
            db.store(rec("cam-1", 1) + rec("cam-1", 3), NOW)
        finally:
            db.close()


def test_gaps_on_a_database_before_the_retention_count_nothing_expired(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # SQLite: this version's store() writes columns a PostgreSQL database of then lacks
    url = sqlite_url(tmp_path / "fleet.db")
    _before_retention(url, monkeypatch)
    assert main(["fleet", "gaps", "cam-1", "--db", url, "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["expired"] == {"rows": 0, "spans": 0, "newest": None}
    assert [(g["first"], g["last"], g["missing"]) for g in got["gaps"]] == [(2, 2, 1)]
    assert main(["fleet", "gaps", "cam-1", "--db", url]) == 0
    assert capsys.readouterr().out == (
        "cam-1: seq 2..2 (1 missing): not received (still queued, in flight, or lost after the broker)\n"
    )


def _page(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as ei:
        main(["fleet", *argv, "--help"])
    assert ei.value.code == 0
    return " ".join(capsys.readouterr().out.split())  # as read, whatever the terminal's width


DEVICE = "device the device id, as in `fleet status`"
PAGES = {
    "status": (
        "[--cameras] [--db URL] [--json]",
        "every device: state, last seen, model, backlog, gaps",
        [
            "--cameras one line per camera of the devices with [[cameras]]: state, fps, processed, frame age, reconnects"
        ],
    ),
    "gaps": (
        "[--db URL] [--json] [-v] [-q] [device]",
        "seq ranges never received, and why (DEVICE's, or the fleet's)",
        [DEVICE + " (none: every device)"],
    ),
    "history": (
        "[--since WHEN] [--limit N] [--body] [--db URL] [--json] [-v] [-q] device",
        "DEVICE's statuses over time: state, fps, backlog, disk, model",
        [
            DEVICE,
            "--since WHEN from a duration ago (90s, 30m, 6h, 7d, 2w) or an ISO time (2026-12-01T08:00:00Z); "
            "default all",
            "--limit N at most N statuses, the newest (default 1000)",
            "--body with --json: each status's whole body too",
        ],
    ),
    "retire": (
        "[--purge] [--db URL] [--json] [-v] [-q] device",
        "remove DEVICE from the fleet views (it comes back if it publishes again)",
        [DEVICE, "--purge also delete its stored messages and events"],
    ),
}


def test_the_help_pages_say_what_each_command_and_option_does(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    assert " fleet fleet views from the collector's database " in " ".join(capsys.readouterr().out.split())
    top = _page(capsys)
    assert top.startswith(
        "usage: edge-agent fleet [-h] [-v] [-q] COMMAND ... 'edge-agent fleet status|gaps|history': what the "
        "collector's database knows about the fleet. 'status': one line per device"
    )
    assert "'retire DEVICE [--purge]': a device taken out of service leaves the fleet views." in top
    listed = " ".join(f"{name} {says}" for name, (_, says, _) in PAGES.items())
    assert f"positional arguments: COMMAND {listed} enroll " in top
    for name, (usage, says, options) in PAGES.items():
        page = _page(capsys, name)
        assert page.startswith(f"usage: edge-agent fleet {name} [-h] {usage}"), page
        for option in [
            *options,
            "--db URL collector database (default: $EDGE_COLLECTOR_DB, else "
            "sqlite:////var/lib/edge-collector/fleet.db)",
            "--json machine-readable output",
        ]:
            assert f" {option} " in page, (option, page)
        if name != "retire":  # its own description below
            assert f" {says[0].upper()}{says[1:]}. " in page, page
    assert (
        "] device Remove DEVICE's row (state, last seen, loss counters) so that `fleet status`, `fleet gaps` "
        "and the online count no longer show it. Its stored results stay in the messages table unless "
        "--purge deletes them (and its events) too. A device that publishes again reappears with its next "
        "message. positional arguments:" in _page(capsys, "retire")
    )


def test_fleet_without_a_command_is_a_usage_error_naming_it(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as ei:
        main(["fleet"])
    assert ei.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "edge-agent fleet: error: the following arguments are required: COMMAND"
    )


def test_status_as_json_is_every_device_row(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = sqlite_url(tmp_path / "fleet.db")
    db = CollectorDb(url)
    try:
        db.migrate()
        db.store(rec("cam-1", 1) + rec("cam-2", 1), NOW, statuses=[_status("cam-1", {}, NOW)])
        rows = db.devices()
    finally:
        db.close()
    assert main(["fleet", "status", "--db", url, "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got == {"devices": rows} and [d["device"] for d in got["devices"]] == ["cam-1", "cam-2"]
    assert got["devices"][0]["state"] == "running" and got["devices"][1]["state"] is None


def test_gaps_name_the_messages_the_retention_deleted(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    from edge_agent.adapters.collector import purge

    db = CollectorDb(url)
    try:
        db.migrate()
        db.store(rec("cam-1", 1) + rec("cam-1", 2) + rec("cam-1", 3) + rec("cam-1", 6), NOW)
        assert purge.purge_batch(db, "results", NOW + 3.5, 100) == 3  # seq 1-3: one span of 3 rows
    finally:
        db.close()
    assert main(["fleet", "gaps", "cam-1", "--db", url]) == 0
    lost = "not received (still queued, in flight, or lost after the broker)"
    assert capsys.readouterr().out.splitlines() == [
        "cam-1: 3 messages deleted by the retention (not gaps)",
        f"cam-1: seq 4..5 (2 missing): {lost}",
    ]
    assert main(["fleet", "gaps", "cam-1", "--db", url, "--json"]) == 0
    got = json.loads(capsys.readouterr().out)["expired"]
    assert (got["rows"], got["spans"]) == (3, 1)


def _forged(dev: str, seq: int) -> list[Record]:
    """A result taking ``dev``'s seq with another id: a conflict."""
    body = {"id": f"forged-{seq}", "seq": seq, "boot": 1, "device_id": dev, "ts": NOW + seq}
    return parse("edge", f"edge/{dev}/detections", json.dumps(body).encode(), NOW).records


@pytest.mark.parametrize("n", [20, 21])
def test_gaps_show_20_conflicts_and_count_the_rest(
    tmp_path: Path, n: int, capsys: pytest.CaptureFixture[str]
) -> None:
    url = sqlite_url(tmp_path / "fleet.db")
    db = CollectorDb(url)
    try:
        db.migrate()
        db.store([r for s in range(1, n + 1) for r in rec("cam-1", s)], NOW)
        db.store([r for s in range(1, n + 1) for r in _forged("cam-1", s)], NOW + 1)
    finally:
        db.close()
    assert main(["fleet", "gaps", "cam-1", "--db", url]) == 0
    taken = "already taken by another id or body"
    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == [
        "cam-1: no gaps",
        f"cam-1: {n} conflicts (a seq taken twice with another id or body, or far ahead):",
    ]
    assert lines[2:22] == [
        f"cam-1:   boot 1 seq {s} id forged-{s}: seq {s} of boot 1 {taken}" for s in range(1, 21)
    ]
    assert lines[22:] == ([] if n == 20 else ["cam-1:   ... 1 more kept (--json lists them)"])
    assert main(["fleet", "gaps", "cam-1", "--db", url, "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["conflicts_kept"]) == n
