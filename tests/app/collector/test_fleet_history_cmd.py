"""``edge-agent fleet history DEVICE`` and ``fleet gaps`` without a device, in process on SQLite:
the statuses over time (text and JSON, --since, --limit), one clear error for a bad --since, an
unknown device, a database without the history table; every device's gaps at once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.collector import NOW, rec, sqlite_url, status

from edge_agent.adapters.collector.db import CollectorDb
from edge_agent.app.cli.main import main


def seed(path: Path) -> str:
    url = sqlite_url(path)
    db = CollectorDb(url)
    try:
        db.migrate()
        for i in range(5):
            db.store(
                rec("cam-1", 1 + i * 3),
                NOW + 60 * i,
                statuses=[status("cam-1", "running", NOW + 60 * i, pending=i)],
            )
        db.store(rec("cam-2", 2), NOW, statuses=[status("cam-2", "offline", NOW)])
    finally:
        db.close()
    return url


def test_history_as_json_and_as_a_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = seed(tmp_path / "fleet.db")
    assert main(["fleet", "history", "cam-1", "--db", url, "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["device"] == "cam-1" and [s["backlog"] for s in got["statuses"]] == [0, 1, 2, 3, 4]
    assert got["statuses"][0]["model_id"] == "m1" and "body" not in got["statuses"][0]
    assert main(["fleet", "history", "cam-1", "--db", url, "--json", "--limit", "2", "--body"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert [s["backlog"] for s in got["statuses"]] == [3, 4] and got["statuses"][1]["body"]["queue"][
        "pending"
    ] == 4
    since = "2026-11-30T00:55:20Z"  # NOW + 120
    assert main(["fleet", "history", "cam-1", "--db", url, "--since", since]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("TIME (UTC)") and len(lines) == 4
    assert lines[1].split()[:5] == ["2026-11-30", "00:55:20", "running", "-", "2"]


def test_history_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = seed(tmp_path / "fleet.db")
    assert main(["fleet", "history", "cam-1", "--db", url, "--since", "yesterday"]) == 1
    assert "--since 'yesterday': expected a duration (90s, 30m, 6h, 7d, 2w)" in capsys.readouterr().err
    assert main(["fleet", "history", "cam-9", "--db", url]) == 1
    assert "device 'cam-9': not in the collector's database" in capsys.readouterr().err
    assert main(["fleet", "history", "cam-1", "--db", url, "--since", "1m"]) == 0
    assert "cam-1: no status since 1m" in capsys.readouterr().err
    db = CollectorDb(url)
    db.conn.execute("DROP TABLE status_history")  # a database of an older collector
    db.close()
    assert main(["fleet", "history", "cam-1", "--db", url]) == 1
    assert "has no health history (status_history)" in capsys.readouterr().err


def test_gaps_without_a_device_lists_the_fleet(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = seed(tmp_path / "fleet.db")
    assert main(["fleet", "gaps", "--db", url]) == 0
    out = capsys.readouterr().out.splitlines()
    assert (
        out[0]
        == "cam-1: seq 2..3 (2 missing): not received (still queued, in flight, or lost after the broker)"
    )
    assert len([ln for ln in out if ln.startswith("cam-1:")]) == 4
    assert out[-1].startswith("cam-2: seq 1..1 (1 missing): before the first message received")
    assert main(["fleet", "gaps", "--db", url, "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert [(d["device"], len(d["gaps"])) for d in got["devices"]] == [("cam-1", 4), ("cam-2", 1)]
    assert got["devices"][1]["gaps"][0]["missing"] == 1
    empty = sqlite_url(tmp_path / "empty.db")
    db = CollectorDb(empty)
    db.migrate()
    db.close()
    assert main(["fleet", "gaps", "--db", empty]) == 0
    assert capsys.readouterr().out == "fleet: no gaps\n"


def test_history_shows_the_devices_rollout_verdicts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from edge_agent.adapters.collector import rollouts
    from edge_agent.adapters.collector.rollouts import Rollout, VerdictRow

    url = seed(tmp_path / "fleet.db")
    db = CollectorDb(url)
    try:
        r = Rollout(
            id="r-1", created=NOW, updated=NOW, package="/p.pkg", package_sha256="ab" * 32, name="demo",
            version="2.0", vid="demo-2.0-x", group="g", canary="1", halt_after=1, wave=0,
            stages=[["cam-1"], ["cam-2"]], state="halted", stage=0, pushed=0,
        )  # fmt: skip
        rollouts.create(db, r)
        assert rollouts.add_verdict(
            db, VerdictRow("r-1", "cam-1", 0, "r-1-s0", "refused", "gate: 0.2 < 0.9", NOW + 30)
        )
    finally:
        db.close()
    assert main(["fleet", "history", "cam-1", "--db", url, "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert [(v["rollout"], v["verdict"], v["detail"]) for v in got["rollout_verdicts"]] == [
        ("r-1", "refused", "gate: 0.2 < 0.9")
    ]
    assert main(["fleet", "history", "cam-1", "--db", url]) == 0
    out = capsys.readouterr().out
    assert "refused" in out and "r-1" in out
    assert main(["fleet", "history", "cam-2", "--db", url, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rollout_verdicts"] == []
