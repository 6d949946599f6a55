"""`model pack` / `model push` mistakes (issue 22): one line naming the argument, exit != 0, nothing sent."""

from __future__ import annotations

import os
import pwd
from pathlib import Path
from typing import Callable

import pytest
from support import cli
from support.updates import INT8

from edge_agent.app.cli.configfile import load_config


def test_pack_into_a_missing_folder_is_one_line(tmp_path: Path) -> None:
    r = cli("model", "pack", str(INT8), "-o", "/missing/dir/x.pkg", quiet=False)
    assert r.returncode != 0 and "Traceback" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "/missing/dir" in r.stderr


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--device", "bad/id"], "--device 'bad/id'"),
        (["--device", "cam-1", "--wait", "-1"], "--wait -1"),
        (["--device", "cam-1", "--wait", "nan"], "--wait nan"),
        (["--device", "cam-1", "--wait", "5", "--expect", "3"], "--expect N counts the members of a --group"),
        (["--group", "g1", "--expect", "3"], "--expect N needs --wait"),
        (["--group", "a/#"], "--group 'a/#'"),
        (["--device", "cam-1", "--transfer-id", "../x"], "--transfer-id"),
    ],
)
def test_push_argument_mistakes_are_one_line(packages: dict[str, Path], args: list[str], says: str) -> None:
    # no config needed: the arguments are checked before the config is read or a broker is reached
    r = cli("model", "push", str(packages["good"]), "-c", "/nonexistent.toml", *args, quiet=False)
    assert r.returncode != 0 and "Traceback" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and says in r.stderr, r.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="a state dir owned by another user needs root to set up")
def test_install_as_another_user_than_the_state_owner_refuses_with_the_command_to_run(
    packages: dict[str, Path], make_config: Callable[..., Path]
) -> None:
    cfg_path = make_config()
    state = Path(load_config(cfg_path).device.state_dir)
    state.mkdir()
    os.chown(state, 65534, 65534)  # the service's user ("nobody" here); we are root
    try:
        name = pwd.getpwuid(65534).pw_name
    except KeyError:
        name = "65534"
    for args in (("install", str(packages["good"])), ("rollback",)):
        r = cli("model", *args, "-c", str(cfg_path), quiet=False)
        assert r.returncode != 0 and "Traceback" not in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1
        assert f"sudo -u {name} edge-agent model {args[0]}" in r.stderr, r.stderr
    assert list(state.iterdir()) == []  # nothing root-owned left behind


def test_pack_refuses_a_detector_the_guard_flags(models_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "zero.pkg"
    r = cli("model", "pack", str(models_dir / "zero-score-int8.onnx"), "-o", str(out), quiet=False)
    assert r.returncode != 0 and "cannot produce detection scores" in r.stderr and "not packed" in r.stderr
    assert len([ln for ln in r.stderr.splitlines() if " INFO " not in ln]) == 1 and not out.exists()
    r = cli(
        "model", "pack", str(models_dir / "zero-score-int8.onnx"), "-o", str(out), "--skip-guard", quiet=False
    )
    assert r.returncode == 0 and out.exists() and "warning:" in r.stderr


def test_a_refused_install_is_said_once(tmp_path: Path, packages: dict[str, Path]) -> None:
    """The gate refuses the zero-score model: one "refused: ..." on stdout, not a second copy as a
    log line on stderr."""
    from support.updates import write_config

    cfg = write_config(tmp_path)
    r = cli("model", "install", str(packages["zero"]), "-c", str(cfg), quiet=False)
    assert r.returncode == 1 and r.stdout.startswith("refused: ")
    assert "refused" not in r.stderr, r.stderr
