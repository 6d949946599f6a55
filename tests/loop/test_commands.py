"""doctor, status and config commands through the real CLI entry point."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from edge_agent.adapters.statusfile import write_status
from edge_agent.app.config_cmd import EXAMPLE
from edge_agent.core.config import Config, parse_config


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "edge_agent", "-q", *args], capture_output=True, text=True, timeout=120
    )


def test_status_reads_fresh_file_and_flags_stale_or_missing(tmp_path: Path) -> None:
    f = tmp_path / "status.json"
    r = cli("status", "--file", str(f))
    assert r.returncode == 1 and "no status file" in r.stderr
    write_status(
        f,
        {
            "device_id": "d1",
            "state": "running",
            "fps": 7.5,
            "queue": {"pending": 3},
            "camera": {"state": "streaming"},
            "broker": "connected",
        },
    )
    r = cli("status", "--file", str(f), "--json")
    assert r.returncode == 0
    assert json.loads(r.stdout)["fps"] == 7.5
    assert "7.5 fps" in cli("status", "--file", str(f)).stdout
    write_status(f, {"device_id": "d1", "state": "running"}, now=time.time() - 600)
    r = cli("status", "--file", str(f), "--max-age", "30")
    assert r.returncode == 1 and "may be hung" in r.stderr


def test_config_example_is_valid_and_documents_every_section() -> None:
    cfg = parse_config(EXAMPLE, "example")
    assert cfg.device.id == "pi-entrance-01"
    for section in Config.model_fields:
        assert f"[{section}]" in EXAMPLE or f"# [{section}]" in EXAMPLE, section
    r = cli("config", "example")
    assert r.returncode == 0 and r.stdout == EXAMPLE


def test_config_check(tmp_path: Path) -> None:
    good = tmp_path / "good.toml"
    good.write_text(EXAMPLE)
    r = cli("config", "check", str(good))
    assert r.returncode == 0 and "OK" in r.stdout
    assert "detector.model" in r.stderr and "file not found" in r.stderr  # a warning, not an error
    bad = tmp_path / "bad.toml"
    bad.write_text(EXAMPLE.replace("[queue]", "[queue]\nmax_mesages = 5"))
    r = cli("config", "check", str(bad))
    assert r.returncode == 1 and "unknown key 'queue.max_mesages'" in r.stderr


@pytest.mark.parametrize("cmd", ["run", "doctor", "status", "infer", "inspect", "queue", "config", "demo"])
def test_every_command_has_help(cmd: str) -> None:
    r = cli(cmd, "--help")
    assert r.returncode == 0 and "usage: edge-agent" in r.stdout
