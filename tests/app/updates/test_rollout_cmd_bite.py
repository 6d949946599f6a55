"""`model rollout` in process, the survivors of rollout_cmd's `run` and `register_under` (issue 36):
a refusal of `run` as its whole line, a new rollout's first line with two canaries, the defaults
a plain `model rollout PACKAGE` uses (canary 1, halt after 1, every other device in one wave) as
`--status ID` shows them, and `--resume ID PACKAGE` sending the package given (the recorded path
gone) over a real mosquitto with no device answering."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.rollout_sim import new_db
from support.updates import packed, write_config

from edge_agent.adapters.collector import rollouts
from edge_agent.adapters.collector.db import CollectorDb
from edge_agent.app.cli.main import main
from edge_agent.app.updates import rollout_run
from edge_agent.core.updates.rollout import CanarySpec

MEMBERS = ["cam-1", "cam-2", "cam-3", "cam-4"]


@pytest.fixture(scope="module")
def pkg(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return packed(tmp_path_factory.mktemp("rollout-pkg"), {"fleet-a": ["--for-group", "fleet-a"]})[0][
        "fleet-a"
    ]


def ro_main(url: str, *args: str) -> int:
    return main(["-q", "model", "rollout", *args, "--db", url])


def members(*ids: str) -> list[str]:
    return [a for m in ids for a in ("--member", m)]


def error_line(capsys: pytest.CaptureFixture[str]) -> str:
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("edge-agent model: error: ") and err.count("\n") == 1, err
    return err.removeprefix("edge-agent model: error: ").removesuffix("\n")


def test_a_missing_package_file_is_its_whole_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = new_db(tmp_path)
    cfg = write_config(tmp_path, device="operator")
    nofile = tmp_path / "none.pkg"
    assert ro_main(url, str(nofile), "-c", str(cfg), "--group", "fleet-a", *members("cam-1")) == 1
    assert error_line(capsys) == f"{nofile}: no such package file"


def test_resuming_an_unknown_long_id_is_one_line_cut_at_40(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = new_db(tmp_path)
    cfg = write_config(tmp_path, device="operator")
    rid = "r" + "7" * 60
    assert ro_main(url, "-c", str(cfg), "--resume", rid) == 1
    assert error_line(capsys) == f"--resume {rid[:40]!r}: no such rollout (see `model rollout --status`)"


def test_a_bad_canary_is_the_parsers_whole_line(
    tmp_path: Path, pkg: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = new_db(tmp_path)
    cfg = write_config(tmp_path, device="operator")
    args = [str(pkg), "-c", str(cfg), "--group", "fleet-a", *members("cam-1"), "--canary", "x"]
    assert ro_main(url, *args) == 1
    assert error_line(capsys) == "--canary 'x': expected a number of devices (2) or a percentage (10%)"


def test_resuming_with_another_package_names_it_and_sends_nothing(
    tmp_path: Path, pkg: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--resume ID OTHER.pkg`: the given file is checked against the recorded sha256, not ignored."""
    url = new_db(tmp_path)
    cfg = write_config(tmp_path, device="operator")
    other = tmp_path / "other.pkg"
    other.write_bytes(pkg.read_bytes() + b"x")
    d = CollectorDb(url)
    try:
        ro = rollout_run.start(d, pkg, "fleet-a", MEMBERS, CanarySpec(1, False), 1, 0)
    finally:
        d.close()
    assert ro_main(url, str(other), "-c", str(cfg), "--resume", ro.id) == 1
    assert error_line(capsys) == (
        f"{other}: not the package of rollout {ro.id} (sha256 {ro.package_sha256[:16]}... expected)"
    )


def test_a_new_rollout_with_the_defaults_then_resumed_with_the_package_given(
    tmp_path: Path, broker: Any, pkg: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Four members, `--canary 2`, no device answering: the first line names both canaries, one
    pass pushes them and says what it waits for (exit 0); `--status ID` shows the defaults (halt
    after 1, the other two in one wave); `--resume ID COPY` with the recorded file gone sends the
    copy (no push again: stage 0 was sent) and exits 0."""
    url = new_db(tmp_path)
    cfg = write_config(tmp_path, port=broker.port, device="operator")
    copy = tmp_path / "copy.pkg"
    copy.write_bytes(pkg.read_bytes())
    first = tmp_path / "first.pkg"
    first.write_bytes(pkg.read_bytes())
    assert (
        ro_main(url, str(first), "-c", str(cfg), "--group", "fleet-a", *members(*MEMBERS), "--canary", "2")
        == 0
    )
    out, err = capsys.readouterr()
    assert err == ""
    rid = out.split()[1].rstrip(":")
    waiting = (
        f"rollout {rid}: stage 0 waiting for cam-1 (no answer), cam-2 (no answer); "
        f"go on with `model rollout --resume {rid} --wait`"
    )
    assert out.splitlines() == [
        f"rollout {rid}: demo 2.5 to group fleet-a, 4 devices; canaries cam-1, cam-2",
        "stage 0 (canaries): pushing to cam-1, cam-2",
        waiting,
    ]
    assert ro_main(url, "--status", rid) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith("  canary 2, halt after 1, wave all; started ")
    assert lines[2:4] == ["  stage 0 (canaries), sent: cam-1, cam-2", "  stage 1, not sent: cam-3, cam-4"]

    first.unlink()
    assert ro_main(url, str(copy), "-c", str(cfg), "--resume", rid) == 0
    assert capsys.readouterr().out.splitlines() == [waiting]
    d = CollectorDb(url)
    try:
        ro = rollouts.get(d, rid)
        assert ro is not None and (ro.state, ro.stage, ro.pushed) == ("running", 0, 0)
    finally:
        d.close()


def test_the_help_states_the_documented_defaults(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/model-updates.md promises `--canary` 1, `--halt-after` 1 and `--wait` at most 3600 s
    unless told; `model rollout --help` says so after each option, under the command's own
    description."""
    monkeypatch.setenv("COLUMNS", "200")  # one line per option
    with pytest.raises(SystemExit) as exc:
        main(["model", "rollout", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "'edge-agent model rollout': a package to a group in stages, canaries first" in out
    lines = {ln.split()[0]: ln for ln in out.splitlines() if ln.startswith("  --")}
    assert lines["--canary"].endswith("(default: 1)")
    assert lines["--halt-after"].endswith("(default: 1)")
    assert lines["--timeout"].endswith("with --wait: at most S seconds (default: 3600.0)")
