"""``edge-agent fleet retire DEVICE [--purge]`` on SQLite and a real PostgreSQL: a device taken out
of service leaves the fleet views (status, gaps, online count), its results stay unless purged,
the other devices are untouched, and a device that publishes again comes back."""

from __future__ import annotations

import json

from support.collector import NOW, fleet, rec, status

from edge_agent.adapters.collector.db import CollectorDb
from edge_agent.core.messages.fleet import parse


def _seed(url: str) -> None:
    db = CollectorDb(url)
    try:
        db.migrate()
        ev = parse("edge", "edge/old-1/model_progress", b'{"step":"verify"}', NOW).event
        assert ev is not None
        db.store(
            rec("old-1", 1) + rec("old-1", 4) + rec("cam-2", 1) + rec("cam-2", 3),
            NOW,
            statuses=[status("old-1", "running"), status("cam-2", "running")],
            events=[ev],
        )
    finally:
        db.close()


def _counts(url: str, device: str) -> tuple[int, int, int, int]:
    """(device rows, messages, events, gap rows) the database holds for ``device``."""
    db = CollectorDb(url)
    try:
        return tuple(  # type: ignore[return-value]
            int(db._x(f"SELECT COUNT(*) FROM {t} WHERE device = ?", (device,)).fetchone()[0])
            for t in ("devices", "messages", "events", "gaps")
        )
    finally:
        db.close()


def test_retire_keeps_the_results_and_leaves_the_others_alone(url: str) -> None:
    _seed(url)
    out = fleet("retire", "old-1", "--db", url)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "old-1: retired; its 2 messages and 1 events kept (--purge deletes them)"
    assert _counts(url, "old-1") == (0, 2, 1, 1)  # the device row gone, its results kept
    assert _counts(url, "cam-2") == (1, 2, 0, 1)
    st = json.loads(fleet("status", "--db", url, "--json").stdout)
    assert [d["device"] for d in st["devices"]] == ["cam-2"]
    gone = fleet("gaps", "old-1", "--db", url)
    assert gone.returncode == 1 and "not in the collector's database" in gone.stderr
    db = CollectorDb(url)
    try:
        assert db.online() == 1
        # it publishes again: it is back, with its old results
        db.store(rec("old-1", 5), NOW + 60, statuses=[status("old-1", "running", ts=NOW + 60)])
    finally:
        db.close()
    st = json.loads(fleet("status", "--db", url, "--json").stdout)
    back = {d["device"]: d for d in st["devices"]}["old-1"]
    assert (back["state"], back["messages"]) == ("running", 3)


def test_retire_purge_deletes_its_messages_events_and_gaps(url: str) -> None:
    _seed(url)
    out = fleet("retire", "old-1", "--purge", "--db", url, "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"device": "old-1", "purged": True, "messages": 2, "events": 1}
    assert _counts(url, "old-1") == (0, 0, 0, 0)
    assert _counts(url, "cam-2") == (1, 2, 0, 1)
    again = fleet("retire", "old-1", "--db", url)  # nothing left of it: not known any more
    assert again.returncode == 1 and "not in the collector's database" in again.stderr


def test_retire_refuses_in_one_line(url: str) -> None:
    _seed(url)
    for args, why in [
        (["nobody"], "device 'nobody': not in the collector's database (nothing retired)"),
        (["a/b"], "expected 1-64 of A-Za-z0-9_.-"),
        (["cam-2\n"], "expected 1-64 of A-Za-z0-9_.-"),
    ]:
        bad = fleet("retire", *args, "--db", url)
        assert bad.returncode == 1, bad.stdout
        assert why in bad.stderr and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
    assert _counts(url, "cam-2") == (1, 2, 0, 1)
