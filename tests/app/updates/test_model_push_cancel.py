"""``model push``'s cancel against a real mosquitto: Ctrl-C after "pushed ... as transfer" (while it
waits for the verdicts) publishes the transfer's cancel, and ``--cancel TRANSFER`` does so later;
the cancel's secret is the one the begin committed to (the receiver's side:
tests/adapters/updates/test_receiver_cancel.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.mqtt import Broker, Collector
from support.updates import write_config

from edge_agent.app.cli.main import main
from edge_agent.app.updates.push import OutcomeWatcher
from edge_agent.core.updates import cancel

from .test_model_push import package


def _cancels(c: Collector) -> dict[str, bytes]:
    with c.lock:
        return {t: p for t, p, _ in c.messages if "/cancel/" in t}


def test_ctrl_c_while_waiting_cancels_and_cancel_later_sends_the_same_secret(
    tmp_path: Path, broker: Broker, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    pkg = package(tmp_path, 3000)
    cfg = write_config(tmp_path, port=broker.port)
    c = Collector(broker.port, "edge/#", client_id="watch-cancel")

    def interrupted(self: Any, *a: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(OutcomeWatcher, "wait", interrupted)
    rc = main(["model", "push", str(pkg), "--config", str(cfg), "--device", "cam-1", "--wait", "30"])
    out, err = capsys.readouterr()
    assert rc == 130 and out.startswith(f"pushed {pkg} as transfer ")
    tid = out.split()[-1]
    assert err.splitlines() == [
        f"edge-agent model push: interrupted: sent the cancel of transfer {tid} (a device that already "
        "switched keeps it: `edge-agent model rollback` there)"
    ]
    c.wait_until(lambda col: len(_cancels(col)) == 1, 10, "the cancel")
    with c.lock:
        begin = json.loads(next(p for t, p, _ in c.messages if t.endswith("/begin")))
    secret = _cancels(c)[f"edge/cam-1/model/cancel/{tid}"].decode()
    assert cancel.honours(secret, begin["cancel_sha256"])
    with c.lock:
        c.messages.clear()
    assert main(["model", "push", "--cancel", tid, "--config", str(cfg), "--device", "cam-1"]) == 0
    c.wait_until(lambda col: len(_cancels(col)) == 1, 10, "the second cancel")
    assert _cancels(c)[f"edge/cam-1/model/cancel/{tid}"].decode() == secret
    c.close()
    capsys.readouterr()
    assert main(["model", "push", "--cancel", "0" * 16, "--config", str(cfg), "--device", "cam-1"]) == 1
    assert "only the user and machine that pushed it can cancel it" in capsys.readouterr().err
