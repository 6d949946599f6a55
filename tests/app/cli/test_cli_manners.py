"""How the CLI behaves at its edges: flags anywhere, pipes, ranges, names, help, one config path."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest
from support import cli

from edge_agent.app.cli.main import _all_subparsers, build_parser

REPO = Path(__file__).resolve().parents[3]
SAMPLES = REPO / "models" / "samples"


def test_global_flags_work_after_the_subcommand() -> None:
    sample = str(next(SAMPLES.glob("*.jpg")))
    loud = cli("infer", sample, "-v", quiet=False)
    quiet = cli("infer", sample, "-q", quiet=False)
    assert loud.returncode == quiet.returncode == 0, loud.stderr + quiet.stderr
    assert " INFO " in loud.stderr
    assert " INFO " not in quiet.stderr
    args = build_parser().parse_args(["-q", "infer", "x.jpg"])  # before the command still works
    assert args.quiet is True and args.verbose == 0
    args = build_parser().parse_args(["queue", "stats", "-vv"])  # nested subcommands too
    assert args.verbose == 2


def test_a_closed_pipe_ends_quietly() -> None:
    """`edge-agent infer DIR --json | head -1`: no traceback when the reader goes away."""
    p = subprocess.Popen(
        [sys.executable, "-m", "edge_agent", "-q", "infer", str(SAMPLES), "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert p.stdout is not None and p.stderr is not None
    first = p.stdout.readline()
    p.stdout.close()
    err = p.stderr.read().decode()
    p.wait(timeout=120)
    assert first.startswith(b"{")
    assert "Traceback" not in err and "BrokenPipe" not in err, err


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["infer", "--conf", "2"], "--conf: 2 is out of range: expected a number from 0 to 1"),
        (["infer", "--iou", "-1"], "--iou: -1 is out of range: expected a number from 0 to 1"),
        (["infer", "--conf", "abc"], "--conf: 'abc' is not a number from 0 to 1"),
        (["bench", "m.onnx", "--runs", "0"], "--runs: 0 is out of range: expected a whole number >= 1"),
        (["validate", "a", "b", "--images", ".", "--min-recall", "1.5"], "--min-recall: 1.5 is out of range"),
        (["run", "--max-frames", "0"], "--max-frames: 0 is out of range"),
    ],
)
def test_out_of_range_values_are_refused_with_the_range(args: list[str], expected: str) -> None:
    r = cli(*args, quiet=False)
    assert r.returncode == 2 and expected in r.stderr, r.stderr


def test_a_bad_provider_lists_the_valid_names() -> None:
    r = cli("infer", "--provider", "cudda", quiet=False)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "unknown provider 'cudda'" in r.stderr
    for name in ("cpu", "cuda", "tensorrt", "xnnpack"):
        assert name in r.stderr


def _all_parsers() -> list[argparse.ArgumentParser]:
    top = build_parser()
    return [top, *_all_subparsers(top)]


def test_every_option_of_every_command_has_help() -> None:
    missing = [
        f"{p.prog} {a.option_strings or a.dest}"
        for p in _all_parsers()
        for a in p._actions
        if not a.help and not isinstance(a, argparse._SubParsersAction)
    ]
    assert missing == []


def test_help_shows_defaults_and_no_markup() -> None:
    for p in _all_parsers():
        text = p.format_help()
        assert "``" not in text, p.prog
        assert "(default: None)" not in text, p.prog
    infer = next(p for p in _all_parsers() if p.prog == "edge-agent infer").format_help()
    assert "confidence threshold (default: 0.25)" in " ".join(infer.split())


def test_queue_and_status_read_the_config_named_by_the_environment(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        f'[device]\nstate_dir = "{tmp_path}"\n[queue]\npath = "{tmp_path}/q.db"\n'
        f'[health]\nstatus_file = "{tmp_path}/status.json"\n'
    )
    env = {"EDGE_AGENT_CONFIG": str(cfg)}
    status = cli("status", env=env, quiet=False)
    assert status.returncode == 1 and f"{tmp_path}/status.json: no status file" in status.stderr
    queue = cli("queue", "stats", "--json", env=env, quiet=False)
    assert queue.returncode == 1 and f"{tmp_path}/q.db: no queue file there" in queue.stderr
    missing = {"EDGE_AGENT_CONFIG": str(tmp_path / "absent.toml")}
    for args in (("status",), ("queue", "stats"), ("run",), ("config", "check")):
        r = cli(*args, env=missing, quiet=False)
        assert r.returncode == 1 and "absent.toml: config file not found" in r.stderr, (args, r.stderr)
        assert "Traceback" not in r.stderr


@pytest.mark.parametrize(
    ("exc", "line"),
    [
        (
            OSError(28, "No space left on device", "/var/lib/edge-agent/models/active.json"),
            "edge-agent inspect: error: /var/lib/edge-agent/models/active.json: No space left on device\n",
        ),
        (PermissionError(13, "Permission denied"), "edge-agent inspect: error: Permission denied\n"),
    ],
)
def test_an_os_error_no_command_named_is_still_one_line_and_exit_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], exc: OSError, line: str
) -> None:
    """The last line of defence: a disk that fills between two steps of a command that names its
    own errors otherwise (model install after a passed gate) gave a traceback."""
    from edge_agent.app.cli import main as cli_mod
    from edge_agent.app.workbench import inspect_cmd

    def boom(path: str) -> dict[str, object]:
        raise exc

    monkeypatch.setattr(inspect_cmd, "runtime_compat", boom)
    assert cli_mod.main(["inspect", "m.onnx"]) == 1
    assert capsys.readouterr().err == line
