"""``model push``'s cancel against a real mosquitto: Ctrl-C after "pushed ... as transfer" (while it
waits for the verdicts) publishes the transfer's cancel, and ``--cancel TRANSFER`` does so later;
the cancel's secret is the one the begin committed to (the receiver's side:
tests/adapters/updates/test_receiver_cancel.py)."""

from __future__ import annotations

import json
import time
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


def test_a_device_drops_the_transfer_its_sender_cancels_over_the_broker(
    tmp_path: Path, broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The receiver over a real mosquitto: begin and one chunk arrive, the cancel follows, the
    transfer is gone; the rest of its chunks, pushed after, land nowhere."""
    from support import wait_until
    from support.updates import with_keys

    from edge_agent.adapters.updates.receiver import ModelReceiver
    from edge_agent.app.cli.configfile import load_config
    from edge_agent.app.updates.push import keep_secret, push_package, send_cancel

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    pkg = package(tmp_path, 5000)
    cfg = load_config(write_config(tmp_path, port=broker.port, extra=with_keys("")))
    root = Path(cfg.device.state_dir)
    events: list[Any] = []
    rec = ModelReceiver(cfg, root / "transfers", root / "inbox", events.append)
    rec.start()
    try:
        assert rec.subscribed.wait(10)
        tid = "c0ffee0123456789"
        push_package(cfg, pkg, ["cam-1"], None, transfer_id=tid, only=[0], cancel_sha256=keep_secret(tid))
        wait_until(lambda: (root / "transfers" / tid / "chunks" / "0").exists(), 10)
        send_cancel(cfg, tid, ["cam-1"], None)
        wait_until(lambda: not (root / "transfers" / tid).exists(), 10)
        # said just after the drop, outside the receiver's lock: waited for, not raced
        wait_until(lambda: {"transfer_id": tid, "cancelled": True} in events, 10)
        push_package(cfg, pkg, ["cam-1"], None, transfer_id=tid, only=range(1, 7))
        time.sleep(1.0)
        assert not (root / "transfers" / tid).exists() and not list((root / "inbox").glob("*.pkg"))
    finally:
        rec.stop()
