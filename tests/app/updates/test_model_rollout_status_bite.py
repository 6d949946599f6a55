"""`model rollout` in process, the survivors of rollout_cmd's `--only` run (issue 36): argument
errors as their whole line (long values cut), and `--status ID`'s lines for a rollout of one
wave: "wave all", a stage's devices, the start and verdict times in the local zone."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.rollout_sim import new_db
from support.updates import packed, write_config

from edge_agent.adapters.collector import rollouts
from edge_agent.adapters.collector.db import CollectorDb
from edge_agent.adapters.collector.rollouts import VerdictRow
from edge_agent.app.cli.main import main
from edge_agent.app.updates import rollout_run
from edge_agent.core.updates.rollout import CanarySpec


@pytest.fixture(scope="module")
def pkg(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return packed(tmp_path_factory.mktemp("rollout-pkg"), {"fleet-a": ["--for-group", "fleet-a"]})[0][
        "fleet-a"
    ]


@pytest.fixture
def utc() -> Iterator[None]:
    """The local zone set to UTC for the test, so a time stamp has one local rendering."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TZ", "UTC0")
        time.tzset()
        yield
    time.tzset()


def ro_main(url: str, *args: str) -> int:
    return main(["-q", "model", "rollout", *args, "--db", url])


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ["--member", "cam-1", "--member", "x/" + "y" * 80],
            f"--member {'x/' + 'y' * 68!r}: expected a device id of 1 to 64 of [A-Za-z0-9_.-]",
        ),
        ([], "model rollout: name the group's members: --broker-dir DIR (enrolled.json) or --member ID ..."),
    ],
)
def test_a_members_mistake_is_exactly_one_line(
    tmp_path: Path, pkg: Path, capsys: pytest.CaptureFixture[str], args: list[str], line: str
) -> None:
    url = new_db(tmp_path)
    cfg = write_config(tmp_path)
    assert ro_main(url, str(pkg), "-c", str(cfg), "--group", "fleet-a", *args) == 1
    assert capsys.readouterr().err == f"edge-agent model: error: {line}\n"


def test_status_of_an_unknown_long_id_is_one_line_cut_at_40(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = new_db(tmp_path)
    rid = "r" + "9" * 60
    assert ro_main(url, "--status", rid) == 1
    assert capsys.readouterr().err == f"edge-agent model: error: --status {rid[:40]!r}: no such rollout\n"


def test_status_of_a_one_wave_rollout_shows_wave_all_its_stages_and_local_times(
    tmp_path: Path,
    pkg: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    utc: None,
) -> None:
    """--wave 0: after the canary every other device in one stage, listed with ", "; the start
    and each verdict's time as the local date and time (UTC here)."""
    url = new_db(tmp_path)
    d = CollectorDb(url)
    try:
        with monkeypatch.context() as mp:
            mp.setattr(time, "time", lambda: 1.7e9)  # started 2023-11-14 22:13:20 UTC
            ro = rollout_run.start(d, pkg, "fleet-a", ["cam-1", "cam-2", "cam-3"], CanarySpec(1, False), 1, 0)
        rollouts.add_verdict(d, VerdictRow(ro.id, "cam-1", 0, f"{ro.id}-s0", "passed", "ok", 1.7e9 + 61))
    finally:
        d.close()
    assert ro_main(url, "--status", ro.id) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1:4] == [
        "  canary 1, halt after 1, wave all; started 2023-11-14 22:13:20",
        "  stage 0 (canaries), not sent: cam-1",
        "  stage 1, not sent: cam-2, cam-3",
    ]
    assert lines[5].startswith("2023-11-14 22:14:21  cam-1  ")


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["PKG", "--status"], "model rollout --status: takes no package and no --resume"),
        ([], "model rollout: give a PACKAGE (a new rollout), --resume ID or --status [ID]"),
        (["PKG"], "model rollout PACKAGE: --group G is required (the group to roll out to)"),
        (["PKG", "--group", "g/" * 40], f"--group {'g/' * 35!r}: expected 1 to 64 of [A-Za-z0-9_.-]"),
    ],
)
def test_a_mode_or_group_mistake_is_exactly_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], line: str
) -> None:
    assert ro_main(new_db(tmp_path), *args) == 1
    assert capsys.readouterr().err == f"edge-agent model: error: {line}\n"


def test_a_broken_enrolled_json_is_the_parsers_reason_after_the_path(
    tmp_path: Path, pkg: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "broker"
    bad.mkdir()
    (bad / "enrolled.json").write_text("{not json")
    cfg = write_config(tmp_path)
    args = [str(pkg), "-c", str(cfg), "--group", "fleet-a", "--broker-dir", str(bad)]
    assert ro_main(new_db(tmp_path), *args) == 1
    assert capsys.readouterr().err == (
        f"edge-agent model: error: {bad / 'enrolled.json'}: not JSON (Expecting property name enclosed "
        "in double quotes: line 1 column 2 (char 1))\n"
    )


@pytest.mark.parametrize("waited", [False, True])
def test_a_running_rollouts_last_line_names_what_each_device_of_its_stage_waits_for(
    tmp_path: Path, pkg: Path, capsys: pytest.CaptureFixture[str], waited: bool
) -> None:
    """Stage 1 sent, cam-2 on trial and cam-3 silent: both named, in order, with the command to go
    on (exit 3 after --wait ran out, else 0); a stage with nothing left to wait for says "-"."""
    from edge_agent.app.updates.rollout_cmd import EXIT_WAITING, _verdict_line

    d = CollectorDb(new_db(tmp_path))
    try:
        ro = rollout_run.start(d, pkg, "fleet-a", ["cam-1", "cam-2", "cam-3"], CanarySpec(1, False), 1, 0)
        rollouts.add_verdict(d, VerdictRow(ro.id, "cam-1", 0, f"{ro.id}-s0", "passed", "ok", 1.7e9))
        rc = EXIT_WAITING if waited else 0
        assert _verdict_line(d, ro, waited) == rc  # stage 0: its canary passed, nothing to wait for
        ro.stage = ro.pushed = 1
        rollouts.add_verdict(d, VerdictRow(ro.id, "cam-2", 1, f"{ro.id}-s1", "switched", "trial", 1.7e9 + 1))
        assert _verdict_line(d, ro, waited) == rc
    finally:
        d.close()
    go_on = f"; go on with `model rollout --resume {ro.id} --wait`"
    assert capsys.readouterr().out.splitlines() == [
        f"rollout {ro.id}: stage 0 waiting for -{go_on}",
        f"rollout {ro.id}: stage 1 waiting for cam-2 (on trial), cam-3 (no answer){go_on}",
    ]
