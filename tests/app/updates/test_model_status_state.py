"""``model status`` after a verdict: the agent's status snapshot is written every 2 s, so for up to
2 s after a switch it still says ``gating``. A verdict recorded after the snapshot was taken wins
(``idle``); a snapshot newer than the last verdict is believed (a new gate is running)."""

from __future__ import annotations

import argparse
import json
from typing import Any

import pytest

from edge_agent.adapters.host import statusfile
from edge_agent.app.updates import model_cmd, switch

NOW = 1796000000.0


def _status(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], verdict_at: float, snap_ts: float
) -> Any:
    info = {"current": {}, "history": [], "last": {"outcome": "switched", "at": verdict_at}}
    monkeypatch.setattr(model_cmd, "agent_pid", lambda cfg: 4242)
    monkeypatch.setattr(switch, "describe", lambda cfg: dict(info))
    snap = statusfile.StatusSnapshot({"ts": snap_ts, "model_update": {"state": "gating"}}, snap_ts, 1.0)
    monkeypatch.setattr(statusfile, "read_status", lambda path: snap)

    class Cfg:
        class health:
            status_file = "/nonexistent"

    monkeypatch.setattr(model_cmd, "_config", lambda path: Cfg())
    assert model_cmd.status(argparse.Namespace(config=None, json=True)) == 0
    return json.loads(capsys.readouterr().out)


def test_a_verdict_newer_than_the_snapshot_reads_as_idle(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _status(monkeypatch, capsys, verdict_at=NOW + 1.5, snap_ts=NOW)
    assert out["state"] == "idle" and out["agent"] == "running"
    out = _status(monkeypatch, capsys, verdict_at=NOW, snap_ts=NOW)  # the same second: the verdict
    assert out["state"] == "idle"


def test_a_snapshot_newer_than_the_verdict_still_says_gating(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _status(monkeypatch, capsys, verdict_at=NOW - 60, snap_ts=NOW)
    assert out["state"] == "gating"
