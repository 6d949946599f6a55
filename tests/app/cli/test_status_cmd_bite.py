"""``edge-agent status`` whole (issue 36, the survivors of cli-status): every line of the view for an
agent with every figure set and for one with nothing to say, each loss counter under its own
name, the command in process (its file, its config, its JSON, its exit codes and lines), and the
default status file for an operator who may not read the 0640 config."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

import pytest
from support.users import ROOT, as_user, open_dir

from edge_agent.adapters.host.statusfile import write_status
from edge_agent.app.cli.main import main
from edge_agent.app.cli.status_cmd import age, render
from edge_agent.core.config.outputs import HealthConfig
from edge_agent.core.messages.status import build_status

NOW = 1_800_000_000.0


def _clock(ts: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(ts))


def busy(state: str = "running", ts: float = NOW - 2) -> dict[str, Any]:
    """A snapshot with every figure the view shows set, each to its own value."""
    d = build_status(
        device_id="cam-1",
        version="1.2.3",
        state=state,
        ts=ts,
        started_at=NOW - 3600,
        uptime_s=3600,
        ready_s=1.5,
        pid=42,
        counters={"frames": 10, "results": 4, "errors": 1},
        fps=5.0,
        latency_ms={"infer": 40.0, "total": 52.25},
        queue={
            "pending": 3,
            "bytes": 900,
            "oldest": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(NOW - 300)),
            **{
                k: n
                for n, k in enumerate(("dropped", "rejected", "expired", "lost", "crashes", "seq_skipped"), 1)
            },
            "disk_full": False,
        },
        broker={"state": "connected", "last_sync": NOW - 12, "last_error": "timed out", "thread_restarts": 2},
        camera={
            "state": "streaming",
            "source": "/dev/video0",
            "dropped": 7,
            "reconnects": 8,
            "skipped": 9,
            "last_error": "eof",
        },
        sensor=None,
        provider="CPUExecutionProvider",
        models={},
        clock_synced=False,
    )
    d["warnings"] = ["disk 95 % full", "camera slow"]
    return d


def test_every_line_of_a_busy_agent() -> None:
    assert render(busy(), age_s=2, max_age=30, now=NOW).splitlines() == [
        "device     cam-1  v1.2.3  running  (reported 2 s ago)",
        f"started    {_clock(NOW - 3600)} (60 min ago)",
        "throughput 5.0 fps, 10 frames, 4 results, 1 errors",
        "latency    infer 40.0 ms, total 52.25 ms (median, recent frames)",
        "camera     streaming  /dev/video0  dropped 7, reconnects 8, skipped 9, last_error eof",
        f"queue      3 pending (900 bytes), oldest {_clock(NOW - 300)} (5 min ago)",
        "           dropped 1, rejected 2, expired 3, lost 4, crashes 5, seq_skipped 6",
        f"broker     connected  last ack {_clock(NOW - 12)} (12 s ago)  last error: timed out  sync restarts 2",
        "provider   CPUExecutionProvider  clock synced: no (NTP not synchronised)",
        "WARNING    disk 95 % full",
        "WARNING    camera slow",
    ]


def test_every_line_of_an_agent_with_nothing_to_say() -> None:
    d = busy(state="stopped")
    d.update(latency_ms=None, provider=None, clock_synced=None, warnings=[], started_at=None)
    d["queue"] = {"pending": 0, "bytes": 0, "oldest": None}
    d["broker"] = {"state": "disabled", "last_sync": None}
    d["camera"] = {"state": "stopped"}
    text = render(d, age_s=5, max_age=30, now=NOW)
    assert text.endswith("\n") and not text.endswith("\n\n")
    assert text.splitlines() == [
        "device     cam-1  v1.2.3  stopped  (reported 5 s ago)",
        "started    never",
        "throughput 5.0 fps, 10 frames, 4 results, 1 errors",
        "latency    - (median, recent frames)",
        "camera     unknown (agent stopped)    ",
        "queue      0 pending (0 bytes), oldest never",
        "           nothing lost",
        "broker     disabled  last ack never",
        "provider   -  clock synced: -",
    ]


@pytest.mark.parametrize("key", ["dropped", "rejected", "expired", "lost", "crashes", "seq_skipped"])
def test_each_loss_of_the_queue_is_shown_alone_under_its_name(key: str) -> None:
    d = busy()
    d["queue"] = {"pending": 0, "bytes": 0, key: 3}
    lines = render(d, age_s=2, max_age=30, now=NOW).splitlines()
    assert lines[6] == f"           {key} 3"


@pytest.mark.parametrize("key", ["dropped", "reconnects", "skipped", "last_error"])
def test_each_figure_of_the_camera_is_shown_alone_under_its_name(key: str) -> None:
    d = busy()
    d["camera"] = {"state": "streaming", key: 3}
    lines = render(d, age_s=2, max_age=30, now=NOW).splitlines()
    assert lines[4] == f"camera     streaming    {key} 3"


def test_a_full_disk_a_synced_clock_and_an_old_agents_bare_broker_string() -> None:
    d = busy()
    d["queue"] = {**d["queue"], "disk_full": True}
    d.update(clock_synced=True, broker="connected")  # an older agent wrote the state alone
    lines = render(d, age_s=2, max_age=30, now=NOW).splitlines()
    assert lines[5].endswith("(5 min ago)  DISK FULL")
    assert lines[7] == "broker     connected  last ack never"
    assert lines[8] == "provider   CPUExecutionProvider  clock synced: yes"
    stale = render(d, age_s=60, max_age=30, now=NOW).splitlines()
    assert stale[7] == "broker     unknown  last ack never"


def test_a_named_camera_without_a_source_shows_none() -> None:
    d = busy()
    d["cameras"] = {"gate": {"state": "streaming", "fps": 2.0, "fps_in": 4.0, "frame_age_ms": 0.0}}
    lines = [ln for ln in render(d, age_s=2, max_age=30, now=NOW).splitlines() if ln.startswith("camera")]
    assert lines == ["camera gate: streaming    2.0 fps of 4.0 in, frame age 0.0 ms  "]


def test_hours_and_days_are_seconds_over_3600_and_86400() -> None:
    # 5580 s is 1.55 h, 302400 s is 3.5 d: a divisor off by one second rounds the other way
    assert [age(5580), age(302400), age(172800 * 2)] == ["1.6 h ago", "4 d ago", "4 d ago"]


def test_the_command_shows_the_file_and_exits_0_while_fresh(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "status.json"
    write_status(f, busy(ts=time.time() - 29))
    assert main(["status", "--file", str(f)]) == 0  # --max-age 30 by default
    out, err = capsys.readouterr()
    assert out.startswith("device     cam-1  v1.2.3  running  (reported 29 s ago)\n") and err == ""
    assert "WARNING    camera slow\n" in out


def test_a_running_agent_silent_past_max_age_exits_1_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "status.json"
    write_status(f, busy(ts=time.time() - 30.6))
    assert main(["status", "--file", str(f)]) == 1  # --max-age 30 by default
    out, err = capsys.readouterr()
    assert "NOT REPORTING" in out
    assert err == "edge-agent status: last report 31 s ago: the agent may be hung or stopped\n"
    assert main(["status", "--file", str(f), "--max-age", "40"]) == 0


def test_json_is_the_snapshot_plus_its_age_for_scripts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "status.json"
    d = busy(ts=time.time() - 12.345)
    write_status(f, d)
    assert main(["status", "--file", str(f), "--json"]) == 0
    out = capsys.readouterr().out
    got = json.loads(out)
    assert got == {**json.loads(json.dumps(d)), "age_s": got["age_s"]}
    assert 12.3 <= got["age_s"] < 20 and re.search(r'\n  "age_s": \d+\.\d,?\n', out)  # to 0.1 s
    assert out.startswith('{\n  "') and out.endswith("\n}\n")  # indented for a person too


def test_no_status_file_names_the_path_and_the_way_to_look(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "absent.json"
    assert main(["status", "--file", str(f)]) == 1
    assert capsys.readouterr().err == (
        f"edge-agent status: error: {f}: no status file (is the agent running? `systemctl status edge-agent`)\n"
    )


def test_the_status_file_is_the_one_the_config_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "elsewhere" / "status.json"
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[health]\nstatus_file = "{f}"\n')
    write_status(f, busy(ts=time.time()))
    assert main(["status", "--config", str(cfg)]) == 0
    assert capsys.readouterr().out.startswith("device     cam-1  ")


@pytest.mark.skipif(
    Path(HealthConfig().status_file).exists(), reason="a real agent's status file is on this machine"
)
def test_an_operator_who_may_not_read_the_config_is_shown_the_default_status_file(
    capsys: pytest.CaptureFixture[str],
) -> None:
    default = HealthConfig().status_file
    with open_dir() as d:
        cfg = d / "c.toml"
        cfg.write_text(f'[health]\nstatus_file = "{d}/status.json"\n')
        cfg.chmod(0o600 if ROOT else 0o000)  # root's own: nobody else reads it
        with as_user(65534 if ROOT else os.getuid()):
            rc = main(["status", "--config", str(cfg)])
    assert rc == 1
    assert capsys.readouterr().err.splitlines() == [
        f"edge-agent status: {cfg} is readable by the edge-agent group only; reading the default {default} "
        "(join the group or pass --file for another one)",
        f"edge-agent status: error: {default}: no status file (is the agent running? `systemctl status edge-agent`)",
    ]


def test_status_help_says_what_it_shows(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["status", "--help"])
    assert done.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "what the running service last reported (fps, latencies, queue, broker...)" in out
