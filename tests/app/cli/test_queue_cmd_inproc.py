"""``edge-agent queue stats|peek|export|purge`` in process (issue 36: test_queue_cli.py runs them as
subprocesses, which mutmut cannot credit): the figures as JSON and as a person reads them, the
oldest messages first and as many as asked, an export that is whole and private, a purge that
asks, refuses without a terminal and says what it did."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from support.mqtt import Broker
from support.outbox import TOPIC, big_limits
from support.ports import free_port

from edge_agent.adapters.outbox.outbox import Outbox
from edge_agent.adapters.outbox.views import read_stats
from edge_agent.app.cli.main import main


def _queue(tmp_path: Path, n: int) -> tuple[Path, Path]:
    q = tmp_path / "q.db"
    with Outbox(q, big_limits(), flush_interval_s=60, flush_batch=10**6) as ob:
        for i in range(n):
            ob.put(TOPIC, {"n": i, "name": "café"})
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[queue]\npath = "{q}"\n')
    return cfg, q


def _lines(text: str) -> list[dict[str, object]]:
    return [json.loads(x) for x in text.splitlines()]


def test_stats_as_json_and_as_a_person_reads_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg, q = _queue(tmp_path, 3)
    assert main(["queue", "stats", "--config", str(cfg), "--json"]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert figures == json.loads(json.dumps(read_stats(q))) and figures["pending"] == 3
    assert main(["queue", "stats", "--config", str(cfg)]) == 0
    human = capsys.readouterr().out.splitlines()
    shown = {None: "-", True: "yes", False: "no"}
    assert human == [
        f"{k}: {shown.get(v, v) if isinstance(v, (bool, type(None))) else v}" for k, v in figures.items()
    ]
    assert "pending: 3" in human and not any(w in " ".join(human) for w in ("None", "True", "False"))


def test_peek_shows_the_oldest_first_ten_by_default_or_n(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg, _ = _queue(tmp_path, 12)
    assert main(["queue", "peek", "--config", str(cfg)]) == 0
    out = capsys.readouterr().out
    msgs = _lines(out)
    assert len(msgs) == 10 and [m["payload"]["n"] for m in msgs] == list(range(10))  # type: ignore[index]
    assert "café" in out and '{"' in out and ", " not in out  # compact, not escaped
    assert main(["queue", "peek", "--config", str(cfg), "-n", "2"]) == 0
    assert [m["payload"]["n"] for m in _lines(capsys.readouterr().out)] == [0, 1]  # type: ignore[index]


def test_export_writes_every_message_to_stdout_or_a_private_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg, _ = _queue(tmp_path, 12)
    assert main(["queue", "export", "--config", str(cfg)]) == 0
    every = capsys.readouterr().out
    assert len(_lines(every)) == 12
    out = tmp_path / "export.jsonl"
    assert main(["queue", "export", "--config", str(cfg), "-o", str(out)]) == 0
    assert capsys.readouterr().err == f"exported 12 messages to {out}\n"
    assert out.read_text(encoding="utf-8") == every
    assert stat.S_IMODE(out.stat().st_mode) == 0o600


def test_export_into_a_missing_folder_is_one_line_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg, _ = _queue(tmp_path, 1)
    out = tmp_path / "absent" / "e.jsonl"
    assert main(["queue", "export", "--config", str(cfg), "--output", str(out)]) == 1
    assert capsys.readouterr().err == (
        f"edge-agent queue: error: -o {out}: cannot write there: no such directory {out.parent}\n"
    )
    assert not out.parent.exists()


def test_purge_without_a_terminal_refuses_and_with_yes_deletes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg, q = _queue(tmp_path, 4)
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)
    assert main(["queue", "purge", "--config", str(cfg)]) == 1
    assert capsys.readouterr().err == (
        "edge-agent queue purge: refusing to delete 4 messages without --yes (no terminal to ask on)\n"
    )
    assert read_stats(q)["pending"] == 4
    assert main(["queue", "purge", "--config", str(cfg), "-y"]) == 0
    assert capsys.readouterr().err == f"purged 4 messages from {q}\n"
    assert read_stats(q)["pending"] == 0


@pytest.mark.parametrize(("answer", "rc", "left"), [("y", 0, 0), (" YES ", 0, 0), ("n", 1, 2), ("", 1, 2)])
def test_purge_on_a_terminal_asks_and_only_yes_deletes(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    answer: str,
    rc: int,
    left: int,
) -> None:
    cfg, q = _queue(tmp_path, 2)
    asked: list[str] = []
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    monkeypatch.setattr("builtins.input", lambda prompt: asked.append(prompt) or answer)
    assert main(["queue", "purge", "--config", str(cfg)]) == rc
    assert asked == [f"Delete 2 queued messages from {q}? [y/N] "]
    err = capsys.readouterr().err
    assert err == (f"purged 2 messages from {q}\n" if rc == 0 else "nothing deleted\n")
    assert read_stats(q)["pending"] == left


def test_drain_without_a_broker_says_so_after_its_timeout_and_keeps_everything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg, q = _queue(tmp_path, 5)
    port = free_port()
    cfg.write_text(
        f'[device]\nid = "dev-1"\n[queue]\npath = "{q}"\n[mqtt]\nhost = "127.0.0.1"\nport = {port}\n'
    )
    assert main(["queue", "drain", "--config", str(cfg), "--timeout", "0.5"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(
        "edge-agent queue drain: timed out after 0.5s with 5 messages still queued (last error: "
    )
    assert f"cannot connect to 127.0.0.1:{port}" in err and err.endswith("; nothing was lost\n")
    assert read_stats(q)["pending"] == 5


def test_drain_to_a_broker_sends_everything_and_says_how_many(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], broker: Broker
) -> None:
    cfg, q = _queue(tmp_path, 5)
    cfg.write_text(
        f'[device]\nid = "dev-1"\n[queue]\npath = "{q}"\n[mqtt]\nhost = "127.0.0.1"\nport = {broker.port}\n'
    )
    assert main(["queue", "drain", "--config", str(cfg), "--timeout", "30"]) == 0
    assert capsys.readouterr().err == f"drained 5 messages to 127.0.0.1:{broker.port}; queue empty\n"
    assert read_stats(q)["pending"] == 0


def test_drain_with_mqtt_disabled_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg, q = _queue(tmp_path, 1)
    cfg.write_text(f'[queue]\npath = "{q}"\n[mqtt]\nenabled = false\n')
    assert main(["queue", "drain", "--config", str(cfg)]) == 1
    assert capsys.readouterr().err == "edge-agent queue: error: mqtt.enabled = false: nothing to drain to\n"
    assert read_stats(q)["pending"] == 1
