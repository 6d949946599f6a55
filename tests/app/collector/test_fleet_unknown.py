"""Fleet commands given a device the database does not know (issue 36), in process on SQLite and
on a real PostgreSQL: one line naming the device on stderr, nothing on stdout, exit 1, and nothing
changed; a name that differs from a known one by a LIKE wildcard (``cam_1`` beside ``cam-1``) is
another device. A known device is never mixed up with another: its own conflicts, its own gaps, a
device with a row but no status history is known."""

from __future__ import annotations

import json

import pytest
from support.collector import NOW, rec, status

from edge_agent.adapters.collector.db import CollectorDb
from edge_agent.app.cli.main import main
from edge_agent.core.messages.fleet import Record, parse


def forged(dev: str, seq: int) -> list[Record]:
    """A result taking ``dev``'s seq with another id: a conflict."""
    body = {"id": f"forged-{seq}", "seq": seq, "boot": 1, "device_id": dev, "ts": NOW + seq}
    return parse("edge", f"edge/{dev}/detections", json.dumps(body).encode(), NOW).records


def seed(url: str) -> None:
    """cam-1: seq 1 and 4 (a gap of 2), a status, a conflict at seq 1; cam-2: seq 1..3, no status."""
    running = status("cam-1", "running")
    assert running is not None
    db = CollectorDb(url)
    try:
        db.migrate()
        db.store(
            rec("cam-1", 1) + rec("cam-1", 4) + rec("cam-2", 1) + rec("cam-2", 2) + rec("cam-2", 3),
            NOW,
            statuses=[running],
        )
        db.store(forged("cam-1", 1), NOW + 1)
    finally:
        db.close()


def snapshot(url: str) -> tuple[list[tuple[str, int, int]], tuple[int, int]]:
    db = CollectorDb(url)
    try:
        devices = sorted((d["device"], d["messages"], d["conflicts"]) for d in db.devices())
        return devices, db.message_stats()
    finally:
        db.close()


COMMANDS = [
    (["gaps"], "device {d!r}: not in the collector's database"),
    (["history"], "device {d!r}: not in the collector's database"),
    (["retire"], "device {d!r}: not in the collector's database (nothing retired)"),
    (["retire", "--purge"], "device {d!r}: not in the collector's database (nothing retired)"),
]


@pytest.mark.parametrize("device", ["nobody", "cam_1", "CAM-1"])
@pytest.mark.parametrize(("args", "line"), COMMANDS)
@pytest.mark.parametrize("as_json", [False, True])
def test_an_unknown_device_is_one_line_exit_1_and_changes_nothing(
    url: str, device: str, args: list[str], line: str, as_json: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    seed(url)
    before = snapshot(url)
    argv = ["fleet", args[0], device, *args[1:], "--db", url, *(["--json"] if as_json else [])]
    assert main(argv) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err == f"edge-agent fleet: error: {line.format(d=device)}\n"
    assert snapshot(url) == before


def test_gaps_of_a_known_device_show_its_own_conflicts_only(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    seed(url)
    assert main(["fleet", "gaps", "cam-2", "--db", url]) == 0
    assert capsys.readouterr().out == "cam-2: no gaps\n"  # cam-1's conflict is not cam-2's
    assert main(["fleet", "gaps", "cam-2", "--db", url, "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert (got["device"], got["gaps"], got["conflicts"], got["conflicts_kept"]) == ("cam-2", [], 0, [])
    assert main(["fleet", "gaps", "cam-1", "--db", url, "--json"]) == 0
    lost = "not received (still queued, in flight, or lost after the broker)"
    taken = "seq 1 of boot 1 already taken by another id or body"
    assert json.loads(capsys.readouterr().out) == {
        "device": "cam-1",
        "gaps": [
            {
                "first": 2,
                "last": 3,
                "boot_before": 1,
                "boot_after": 1,
                "reason": lost,
                "reported": False,
                "missing": 2,
            }
        ],
        "conflicts": 1,
        "conflicts_kept": [{"boot": 1, "seq": 1, "id": "forged-1", "reason": taken}],
        "expired": {"rows": 0, "spans": 0, "newest": None},
    }
    assert main(["fleet", "gaps", "cam-1", "--db", url]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"cam-1: seq 2..3 (2 missing): {lost}",
        "cam-1: 1 conflicts (a seq taken twice with another id or body, or far ahead):",
        f"cam-1:   boot 1 seq 1 id forged-1: {taken}",
    ]


def test_a_device_without_status_history_is_known_to_history(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    seed(url)
    assert main(["fleet", "history", "cam-2", "--db", url, "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["device"] == "cam-2" and got["statuses"] == []
    assert main(["fleet", "history", "cam-2", "--db", url]) == 0
    assert capsys.readouterr() == ("", "cam-2: no status kept\n")


def test_retire_of_a_look_alike_leaves_the_real_device(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    seed(url)
    assert main(["fleet", "retire", "cam_1", "--purge", "--db", url]) == 1
    capsys.readouterr()
    assert main(["fleet", "retire", "cam-1", "--db", url, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "device": "cam-1",
        "purged": False,
        "messages": 2,
        "events": 0,
    }
    devices, _ = snapshot(url)
    assert [d[0] for d in devices] == ["cam-2"]


def test_retire_purge_of_a_known_device_deletes_its_messages_only(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    seed(url)
    assert main(["fleet", "retire", "cam-2", "--purge", "--db", url, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "device": "cam-2",
        "purged": True,
        "messages": 3,
        "events": 0,
    }
    devices, stats = snapshot(url)
    assert [d[0] for d in devices] == ["cam-1"] and stats[0] == 2  # cam-1's 2 results


@pytest.mark.parametrize(
    ("device", "shown"),
    [("bad id!", "'bad id!'"), ("x" * 65, repr("x" * 65)), ("y" * 200, repr("y" * 80)), ("a/b", "'a/b'")],
)
def test_a_device_id_that_cannot_be_one_is_refused_before_the_database(
    device: str, shown: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for cmd in ("gaps", "history", "retire"):
        assert main(["fleet", cmd, device, "--db", "sqlite:////nonexistent/fleet.db"]) == 1
        assert capsys.readouterr() == (
            "",
            f"edge-agent fleet: error: device {shown}: expected 1-64 of A-Za-z0-9_.-\n",
        )


def test_a_db_url_with_a_password_is_refused_without_echoing_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fleet", "status", "--db", "postgresql://u:hunter2@h/db"]) == 1
    assert capsys.readouterr() == (
        "",
        "edge-agent fleet: error: --db: the database URL carries a password (every user sees it in ps): "
        "use libpq's PGPASSFILE (or $EDGE_COLLECTOR_DB)\n",
    )
