"""doctor, status and config commands through the real CLI entry point."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support import cli

from edge_agent.adapters.host.statusfile import write_status
from edge_agent.core.config.example import example_config


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


def test_config_example_piped_into_config_check_passes() -> None:
    example = cli("config", "example")
    assert example.returncode == 0 and example.stdout == example_config()
    r = cli("config", "check", "-", input=example.stdout)
    assert r.returncode == 0 and "<stdin>: OK (device edge-0" in r.stdout, r.stderr
    assert "detector.model" in r.stderr and "file not found" in r.stderr  # a warning, not an error


def test_config_check_stdin_not_utf8_is_one_line() -> None:
    r = subprocess.run(
        [sys.executable, "-m", "edge_agent", "-q", "config", "check", "-"],
        input=b'[device]\nid = "\xff"\n',
        capture_output=True,
        timeout=120,
    )
    err = r.stderr.decode()
    assert r.returncode == 1 and "<stdin>: not UTF-8 text" in err and "Traceback" not in err


def test_config_check(tmp_path: Path) -> None:
    good = tmp_path / "good.toml"
    good.write_text(example_config())
    r = cli("config", "check", str(good))
    assert r.returncode == 0 and "OK" in r.stdout
    assert "detector.model" in r.stderr and "file not found" in r.stderr  # a warning, not an error
    bad = tmp_path / "bad.toml"
    bad.write_text(example_config().replace("\n[queue]\n", "\n[queue]\nmax_mesages = 5\n"))
    r = cli("config", "check", str(bad))
    assert r.returncode == 1 and "unknown key 'queue.max_mesages'" in r.stderr


@pytest.mark.parametrize("cmd", ["run", "doctor", "status", "infer", "inspect", "queue", "config", "demo"])
def test_every_command_has_help(cmd: str) -> None:
    r = cli(cmd, "--help")
    assert r.returncode == 0 and "usage: edge-agent" in r.stdout


DETECTOR = '[detector]\nmodel = "det.onnx"\n'


def test_config_check_shows_the_camera_without_its_password() -> None:
    for src, shown in (
        ("rtsp://admin:s3cret@10.0.0.5:554/s1", "'rtsp://***@10.0.0.5:554/s1'"),
        ("rtsp://admin:s3cret@cam:554x/s1", "'rtsp://***@cam:554x/s1'"),  # a port that does not parse
    ):
        r = cli("config", "check", "-", input=f'[camera]\nsource = "{src}"\n{DETECTOR}')
        assert r.returncode == 0 and f"camera {shown}, mqtt" in r.stdout, r.stdout + r.stderr
        assert "s3cret" not in r.stdout + r.stderr
    assert "camera 0, mqtt" in cli("config", "check", "-", input=f"[camera]\nsource = 0\n{DETECTOR}").stdout
