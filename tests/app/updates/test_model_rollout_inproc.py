"""`edge-agent model rollout` in process (mutmut credits only in-process calls; test_model_rollout.py
and test_model_rollout_cli.py run it as a child): each argument mistake one line, the members from
enrolled.json, --status and --resume on a SQLite collector database, and whole rollouts over a
real mosquitto to simulated devices (support/rollout_sim.py)."""

from __future__ import annotations

import argparse
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import wait_until
from support.enrolled import enrolled_broker
from support.rollout_sim import SimDevice, new_db, start_sims, with_login
from support.updates import packed, write_config

from edge_agent.adapters.collector import rollouts
from edge_agent.adapters.collector.db import CollectorDb
from edge_agent.adapters.collector.rollouts import VerdictRow
from edge_agent.app.cli.main import main
from edge_agent.app.updates import rollout_run
from edge_agent.app.updates.rollout_cmd import _check, _members
from edge_agent.core.broker.identity import Enrollment
from edge_agent.core.updates.rollout import CanarySpec, Verdict

MEMBERS = ["cam-1", "cam-2", "cam-3"]


@pytest.fixture(scope="module")
def signed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A package for group fleet-a signed by a fresh key, packed in process; and one for cam-9 only."""
    pkgs, pub = packed(
        tmp_path_factory.mktemp("rollout-pkg"),
        {"fleet-a": ["--for-group", "fleet-a"], "solo": ["--for-device", "cam-9"]},
    )
    return {"pkg": pkgs["fleet-a"], "solo": pkgs["solo"], "pub": pub}


def ro_main(url: str, *args: str) -> int:
    return main(["-q", "model", "rollout", *args, "--db", url])


def one_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "model rollout: give a PACKAGE (a new rollout), --resume ID or --status [ID]"),
        (["PKG"], "model rollout PACKAGE: --group G is required (the group to roll out to)"),
        (["PKG", "--group", "a/#"], "--group 'a/#': expected 1 to 64 of [A-Za-z0-9_.-]"),
        (["PKG", "--group", "g" * 65], f"--group '{'g' * 65}': expected 1 to 64"),
        (["PKG", "--status"], "model rollout --status: takes no package and no --resume"),
        (["--resume", "r1", "--status", "r1"], "model rollout --status: takes no package and no --resume"),
        (
            ["PKG", "--group", "fleet-a", "--halt-after", "0"],
            "--halt-after 0: expected a number of devices >= 1",
        ),
        (["PKG", "--group", "fleet-a", "--wave", "-1"], "--wave -1: expected a number of devices >= 0"),
        (["PKG", "--group", "fleet-a", "--timeout", "0"], "--timeout 0.0: expected seconds > 0"),
        (["PKG", "--group", "fleet-a", "--timeout", "inf"], "--timeout inf: expected seconds > 0"),
        (["PKG", "--group", "fleet-a", "--timeout", "nan"], "--timeout nan: expected seconds > 0"),
        (["PKG", "--group", "fleet-a", "--canary", "x"], "--canary 'x': expected a number of devices (2)"),
        (["PKG", "--group", "fleet-a", "--canary", "0"], "--canary '0': expected 1..N devices or 1%..100%"),
        (
            ["PKG", "--group", "fleet-a"],
            "model rollout: name the group's members: --broker-dir DIR (enrolled.json) or --member ID ...",
        ),
        (
            ["PKG", "--group", "fleet-a", "--member", "cam-1", "--member", "cam/2"],
            "--member 'cam/2': expected a device id of 1 to 64 of [A-Za-z0-9_.-]",
        ),
        (["NOFILE", "--group", "fleet-a", "--member", "cam-1"], "NOFILE: no such package file"),
        (["--resume", "rnone"], "--resume 'rnone': no such rollout (see `model rollout --status`)"),
        (["--status", "rnone"], "--status 'rnone': no such rollout"),
    ],
)
def test_each_argument_mistake_is_one_line_and_nothing_is_recorded(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    signed: dict[str, Any],
    args: list[str],
    message: str,
) -> None:
    url = new_db(tmp_path)
    op = write_config(tmp_path, device="operator")
    nofile = str(tmp_path / "none.pkg")
    args = [str(signed["pkg"]) if a == "PKG" else nofile if a == "NOFILE" else a for a in args]
    assert ro_main(url, *args, "-c", str(op)) == 1
    assert message.replace("NOFILE", nofile) in one_error(capsys)
    db = CollectorDb(url)
    try:
        assert rollouts.listing(db) == []
    finally:
        db.close()


def test_the_limits_of_the_checks_pass(tmp_path: Path, signed: dict[str, Any]) -> None:
    """--halt-after 1, --wave 0, a group of 64 characters: accepted (the run then fails on the
    package not naming that group, after the checks)."""
    ns = dict(package="p", resume=None, status=None, halt_after=1, wave=0, timeout=0.001)
    _check(argparse.Namespace(**ns, group="g" * 64))
    _check(argparse.Namespace(**{**ns, "package": None, "status": ""}, group=None))  # --status alone


def enrolled_dir(tmp_path: Path, devices: dict[str, list[str]]) -> Path:
    d = tmp_path / "broker"
    d.mkdir()
    (d / "enrolled.json").write_text(Enrollment(devices=devices, operators=["op"]).to_json())
    return d


def test_the_members_are_the_devices_enrolled_in_the_group_sorted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], signed: dict[str, Any]
) -> None:
    url = new_db(tmp_path)
    op = write_config(tmp_path, device="operator")
    d = enrolled_dir(
        tmp_path,
        {"cam-3": ["fleet-a"], "cam-1": ["north", "fleet-a"], "cam-2": ["south"], "cam-0": ["fleet-b"]},
    )
    ns = argparse.Namespace(member=None, broker_dir=str(d), group="fleet-a")
    assert _members(ns) == ["cam-1", "cam-3"]
    ns = argparse.Namespace(member=["cam-2", "cam-1", "cam-2"], broker_dir=None, group="fleet-a")
    assert _members(ns) == ["cam-1", "cam-2"]  # given members: sorted, once each
    assert ro_main(url, str(signed["pkg"]), "-c", str(op), "--group", "west", "--broker-dir", str(d)) == 1
    err = one_error(capsys)
    assert f"{d / 'enrolled.json'}: no device is enrolled in group 'west' (`fleet enroll --group`)" in err


def test_an_unreadable_or_broken_enrolled_json_is_one_line_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], signed: dict[str, Any]
) -> None:
    url = new_db(tmp_path)
    op = write_config(tmp_path, device="operator")
    base = [str(signed["pkg"]), "-c", str(op), "--group", "fleet-a", "--broker-dir"]
    missing = tmp_path / "nodir"
    assert ro_main(url, *base, str(missing)) == 1
    err = one_error(capsys)
    assert f"--broker-dir: cannot read {missing / 'enrolled.json'}: No such file or directory" in err
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "enrolled.json").write_text("{not json")
    assert ro_main(url, *base, str(bad)) == 1
    err = one_error(capsys)
    # the file's path once, not followed by the parser's own "enrolled.json: " prefix
    assert f"error: {bad / 'enrolled.json'}: " in err and "enrolled.json: enrolled.json" not in err
    assert err.count("enrolled.json") == 1, err


def test_a_package_that_names_neither_the_group_nor_the_members_is_refused_before_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], signed: dict[str, Any]
) -> None:
    url = new_db(tmp_path)
    op = write_config(tmp_path, device="operator")
    args = ["-c", str(op), "--group", "fleet-a", "--member", "cam-9", "--member", "cam-1"]
    assert ro_main(url, str(signed["solo"]), *args) == 1
    err = one_error(capsys)
    assert (
        f"{signed['solo']}: its signed manifest names neither group 'fleet-a' nor devices ['cam-1']: "
        "they would refuse it (repack with `model pack --for-group fleet-a`)"
    ) in err
    db = CollectorDb(url)
    try:
        assert rollouts.listing(db) == []
        # the devices it names are enough without the group
        ro = rollout_run.start(db, signed["solo"], "fleet-a", ["cam-9"], CanarySpec(1, False), 1, 0)
        assert ro.stages == [["cam-9"]]
    finally:
        db.close()


@pytest.fixture
def db(tmp_path: Path) -> Iterator[tuple[str, CollectorDb]]:
    url = new_db(tmp_path)
    d = CollectorDb(url)
    yield url, d
    d.close()


def test_start_records_the_plan_and_the_package_before_anything_is_sent(
    db: tuple[str, CollectorDb], signed: dict[str, Any]
) -> None:
    _, d = db
    members = ["cam-4", "cam-2", "cam-1", "cam-3", "cam-5"]
    ro = rollout_run.start(d, signed["pkg"], "fleet-a", members, CanarySpec(40, True), 2, 2)
    got = rollouts.get(d, ro.id)
    assert got is not None and got == ro
    assert ro.id.startswith("r") and len(ro.id) == 11
    assert (ro.state, ro.stage, ro.pushed, ro.reason) == ("running", 0, -1, None)
    assert ro.stages == [["cam-1", "cam-2"], ["cam-3", "cam-4"], ["cam-5"]]
    assert (ro.group, ro.canary, ro.halt_after, ro.wave) == ("fleet-a", "40%", 2, 2)
    assert (ro.name, ro.version) == ("demo", "2.5") and ro.vid.startswith("demo-2.5")
    assert ro.package == str(signed["pkg"].resolve())
    assert ro.package_sha256 == hashlib.sha256(signed["pkg"].read_bytes()).hexdigest()
    assert ro.created == ro.updated and ro.created > 1.7e9


def test_the_package_to_resume_with_must_be_the_recorded_one(
    tmp_path: Path, db: tuple[str, CollectorDb], signed: dict[str, Any]
) -> None:
    from edge_agent.errors import ModelError

    _, d = db
    copy = tmp_path / "copy.pkg"
    copy.write_bytes(signed["pkg"].read_bytes())
    ro = rollout_run.start(d, copy, "fleet-a", MEMBERS, CanarySpec(1, False), 1, 0)
    assert rollout_run.package_for(ro, None) == copy.resolve()
    assert rollout_run.package_for(ro, signed["pkg"]) == signed["pkg"]  # the same bytes elsewhere
    with pytest.raises(ModelError) as exc:
        rollout_run.package_for(ro, signed["solo"])
    assert str(exc.value) == (
        f"{signed['solo']}: not the package of rollout {ro.id} (sha256 {ro.package_sha256[:16]}... expected)"
    )
    copy.unlink()
    with pytest.raises(ModelError, match=f"no such package file \\(rollout {ro.id} was started with"):
        rollout_run.package_for(ro, None)


def test_a_file_is_hashed_whole_over_many_blocks(tmp_path: Path) -> None:
    f = tmp_path / "big"
    data = bytes(range(256)) * 9000  # 2.2 MiB: three 1 MiB blocks
    f.write_bytes(data)
    assert rollout_run.sha256_of(f) == hashlib.sha256(data).hexdigest()


def row(dev: str, verdict: str, at: float, stage: int = 0) -> VerdictRow:
    return VerdictRow("r1", dev, stage, f"r1-s{stage}", verdict, "", at)


def test_the_newest_verdict_of_each_device_wins_and_a_final_one_at_the_same_time() -> None:
    rows = [
        row("a", "switched", 1.0),
        row("a", "passed", 2.0),
        row("b", "passed", 5.0),
        row("b", "switched", 5.0),  # same time: the final one wins whatever the order
        row("c", "switched", 3.0),
        row("c", "rolled_back", 3.0),
        row("d", "refused", 4.0),
        row("d", "switched", 1.0),  # an older row read later does not undo it
        row("e", "switched", 7.0),
        row("e", "switched", 7.0),
    ]
    assert rollout_run.newest(rows) == {
        "a": Verdict.PASSED,
        "b": Verdict.PASSED,
        "c": Verdict.ROLLED_BACK,
        "d": Verdict.REFUSED,
        "e": Verdict.SWITCHED,
    }
    # two final rows at the same time: the one read last
    assert rollout_run.newest([row("f", "refused", 1.0), row("f", "passed", 1.0)]) == {"f": Verdict.PASSED}


def status(dev: str, vid: str, trial: bool) -> dict[str, Any]:
    return {
        "device_id": dev,
        "model_update": {"current": {"id": vid}, "trial": {"vid": vid} if trial else None, "last": {}},
    }


def test_record_stores_each_pushed_devices_verdict_once_and_ignores_the_others(
    db: tuple[str, CollectorDb], signed: dict[str, Any]
) -> None:
    _, d = db
    ro = rollout_run.start(d, signed["pkg"], "fleet-a", MEMBERS, CanarySpec(1, False), 1, 0)
    said: list[str] = []
    bodies = [
        ("cam-1", status("cam-1", ro.vid, True)),  # stage 0, not pushed yet, but the current stage
        ("cam-2", status("cam-2", ro.vid, False)),  # stage 1: not sent to it yet
        ("cam-9", status("cam-9", ro.vid, False)),  # no member
        ("cam-3", {"device_id": "cam-3", "model_update": {"current": {"id": "other"}}}),  # no word
    ]
    rollout_run.record(d, ro, bodies, said.append)
    rollout_run.record(d, ro, bodies, said.append)  # the same statuses again: nothing new
    got = rollouts.verdicts(d, ro.id)
    assert [(v.device, v.stage, v.transfer_id, v.verdict) for v in got] == [
        ("cam-1", 0, f"{ro.id}-s0", "switched")
    ]
    assert said == [f"cam-1: switched: {ro.vid} on trial"]
    ro.pushed = 1  # stage 1 sent: its devices count now
    rollout_run.record(d, ro, bodies, said.append)
    assert said[1:] == [f"cam-2: passed: {ro.vid} runs, its trial is over"]
    assert rollout_run.pending(ro, d) == {"cam-1": "on trial"}
    ro.stage = 1
    assert rollout_run.pending(ro, d) == {"cam-3": "no answer"}


def test_status_lists_the_rollouts_and_shows_one_with_its_verdicts(
    db: tuple[str, CollectorDb], signed: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    url, d = db
    assert ro_main(url, "--status") == 0
    out, err = capsys.readouterr()
    assert out.split() == ["ROLLOUT", "STATE", "STAGE", "PACKAGE", "GROUP", "DEVICES", "CREATED"]
    assert err == "(no rollouts yet)\n"
    ro = rollout_run.start(d, signed["pkg"], "fleet-a", MEMBERS, CanarySpec(1, False), 2, 1)
    ro.state, ro.stage, ro.pushed, ro.reason = "halted", 1, 1, "2 failed (--halt-after 2): cam-2 refused"
    rollouts.update(d, ro)
    rollouts.add_verdict(d, VerdictRow(ro.id, "cam-1", 0, f"{ro.id}-s0", "passed", "ok " * 60, 1.7e9))
    rollouts.add_verdict(d, VerdictRow(ro.id, "cam-2", 1, f"{ro.id}-s1", "refused", "gate: no", 1.7e9 + 1))

    assert ro_main(url, "--status") == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert err == "" and len(lines) == 2
    head, line = lines
    assert line.split()[:7] == [ro.id, "halted", "1/2", "demo", "2.5", "fleet-a", "3"]
    assert head.index("STATE") == line.index("halted") and head.index("DEVICES") == line.index(" 3 ") + 1
    assert line == line.rstrip() and head == head.rstrip()

    assert ro_main(url, "--status", "--json") == 0
    js = json.loads(capsys.readouterr().out)
    assert [r["id"] for r in js["rollouts"]] == [ro.id] and js["rollouts"][0]["stages"] == ro.stages

    assert ro_main(url, "--status", ro.id) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == f"rollout {ro.id}: demo 2.5 ({ro.vid}) to group fleet-a: halted, stage 1"
    assert lines[1].startswith("  canary 1, halt after 2, wave 1; started 20")
    assert lines[2:6] == [
        "  stage 0 (canaries), sent: cam-1",
        "  stage 1, sent: cam-2",
        "  stage 2, not sent: cam-3",
        "  halted: 2 failed (--halt-after 2): cam-2 refused",
    ]
    table = lines[6:]
    assert table[0].split() == ["AT", "DEVICE", "ROLLOUT", "STAGE", "VERDICT", "DETAIL"]
    assert [x.split()[2:6] for x in table[1:]] == [
        ["cam-1", ro.id, "0", "passed"],
        ["cam-2", ro.id, "1", "refused"],
    ]
    assert table[1].endswith(("ok " * 40).rstrip())  # the detail cut at 120 characters
    assert table[2].endswith("gate: no") and table[0].index("VERDICT") == table[2].index("refused")

    assert ro_main(url, "--status", ro.id, "--json") == 0
    js = json.loads(capsys.readouterr().out)
    assert js["rollout"]["reason"] == ro.reason
    assert [(v["device"], v["verdict"]) for v in js["verdicts"]] == [
        ("cam-1", "passed"),
        ("cam-2", "refused"),
    ]

    ro.state, ro.reason = "running", None
    rollouts.update(d, ro)
    assert ro_main(url, "--status", ro.id) == 0
    out = capsys.readouterr().out
    assert "halted:" not in out and "wave 1;" in out


def test_resuming_a_finished_rollout_says_its_state_and_sends_nothing(
    tmp_path: Path, db: tuple[str, CollectorDb], signed: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    url, d = db
    op = write_config(tmp_path, device="operator")
    ro = rollout_run.start(d, signed["pkg"], "fleet-a", MEMBERS, CanarySpec(1, False), 1, 0)
    ro.state = "done"
    rollouts.update(d, ro)
    assert ro_main(url, "-c", str(op), "--resume", ro.id) == 0
    assert capsys.readouterr().out == f"rollout {ro.id}: done\n"
    ro.state, ro.reason = "halted", "canary failed: cam-1 refused"
    rollouts.update(d, ro)
    assert ro_main(url, "-c", str(op), "--resume", ro.id) == 1
    assert capsys.readouterr().out == f"rollout {ro.id}: halted: canary failed: cam-1 refused\n"
    ro.reason = None
    rollouts.update(d, ro)
    assert ro_main(url, "-c", str(op), "--resume", ro.id) == 1
    assert capsys.readouterr().out == f"rollout {ro.id}: halted\n"


# ---- whole rollouts over a real broker -------------------------------------------------------
def sims_for(tmp_path: Path, port: int, pub: str, behaviours: dict[str, str], sims: list[SimDevice]) -> None:
    start_sims(tmp_path, port, pub, behaviours, sims, trial_s=0.2)


def test_a_rollout_whose_devices_pass_is_done_stage_by_stage(
    tmp_path: Path,
    broker: Any,
    sims: list[SimDevice],
    signed: dict[str, Any],
    capsys: pytest.CaptureFixture[str],
) -> None:
    sims_for(tmp_path, broker.port, signed["pub"], dict.fromkeys(MEMBERS, "pass"), sims)
    url = new_db(tmp_path)
    op = write_config(tmp_path, port=broker.port, device="operator")
    members = [a for m in MEMBERS for a in ("--member", m)]
    rc = ro_main(
        url,
        str(signed["pkg"]),
        "-c",
        str(op),
        "--group",
        "fleet-a",
        *members,
        "--wave",
        "1",
        "--wait",
        "--timeout",
        "120",
    )
    out = capsys.readouterr().out
    assert rc == 0, out
    rid = out.split()[1].rstrip(":")
    assert out.startswith(f"rollout {rid}: demo 2.5 to group fleet-a, 3 devices; canaries cam-1\n")
    assert "stage 0 (canaries): pushing to cam-1\n" in out
    assert "stage 1: pushing to cam-2\n" in out and "stage 2: pushing to cam-3\n" in out
    assert out.index("cam-1: passed:") < out.index("stage 1: pushing") < out.index("stage 2: pushing")
    assert out.endswith(f"rollout {rid}: done: every device of group fleet-a runs {sims[0].current['id']}\n")
    assert [s.received for s in sims] == [[f"{rid}-s0"], [f"{rid}-s1"], [f"{rid}-s2"]]
    d = CollectorDb(url)
    try:
        ro = rollouts.get(d, rid)
        assert ro is not None and (ro.state, ro.stage, ro.pushed) == ("done", 2, 2)
    finally:
        d.close()


def test_a_refusing_canary_halts_and_names_the_devices_never_sent_to(
    tmp_path: Path,
    broker: Any,
    sims: list[SimDevice],
    signed: dict[str, Any],
    capsys: pytest.CaptureFixture[str],
) -> None:
    behaviours = {"cam-1": "refuse", "cam-2": "pass", "cam-3": "pass"}
    sims_for(tmp_path, broker.port, signed["pub"], behaviours, sims)
    url = new_db(tmp_path)
    op = write_config(tmp_path, port=broker.port, device="operator")
    members = [a for m in MEMBERS for a in ("--member", m)]
    rc = ro_main(
        url,
        str(signed["pkg"]),
        "-c",
        str(op),
        "--group",
        "fleet-a",
        *members,
        "--wave",
        "1",
        "--wait",
        "--timeout",
        "120",
    )
    out = capsys.readouterr().out
    assert rc == 1, out
    rid = out.split()[1].rstrip(":")
    assert (
        f"rollout {rid}: HALTED at stage 0: canary failed: cam-1 refused; "
        "cam-1: gate on 3 probe images: REFUSED: recall 0.0 (sim)\n"
    ) in out
    assert out.endswith(f"rollout {rid}: not sent to 2 devices: cam-2, cam-3\n")
    assert [s.received for s in sims] == [[f"{rid}-s0"], [], []]
    d = CollectorDb(url)
    try:
        ro = rollouts.get(d, rid)
        assert ro is not None and (ro.state, ro.stage, ro.pushed) == ("halted", 0, 0)
        assert ro.reason is not None and ro.reason.startswith("canary failed: cam-1 refused; cam-1: gate on")
    finally:
        d.close()


def test_one_pass_without_wait_pushes_the_canary_and_says_what_it_waits_for(
    tmp_path: Path,
    broker: Any,
    sims: list[SimDevice],
    signed: dict[str, Any],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Without --wait: one pass, exit 0, the resume command; --wait that runs out of time with
    a silent canary: exit 3 (the rollout goes on)."""
    sims_for(tmp_path, broker.port, signed["pub"], {"cam-1": "silent", "cam-2": "pass"}, sims)
    url = new_db(tmp_path)
    op = write_config(tmp_path, port=broker.port, device="operator")
    rc = ro_main(
        url, str(signed["pkg"]), "-c", str(op), "--group", "fleet-a", "--member", "cam-1", "--member", "cam-2"
    )
    out = capsys.readouterr().out
    assert rc == 0, out
    rid = out.split()[1].rstrip(":")
    assert out.endswith(
        f"rollout {rid}: stage 0 waiting for cam-1 (no answer); go on with `model rollout --resume {rid} --wait`\n"
    )
    rc = ro_main(url, "-c", str(op), "--resume", rid, "--wait", "--timeout", "1.5")
    out = capsys.readouterr().out
    assert rc == 3, out
    assert "pushing" not in out  # stage 0 was pushed: the resume waits, it does not re-send
    assert (
        out
        == f"rollout {rid}: stage 0 waiting for cam-1 (no answer); go on with `model rollout --resume {rid} --wait`\n"
    )
    assert sims[1].received == []


def test_a_halt_names_what_each_refused_or_rolled_back_device_said(
    db: tuple[str, CollectorDb], signed: dict[str, Any]
) -> None:
    """The operator reads why in the HALTED line: every failed device's own words, cut at 300
    characters, sorted by device; a device that passed is not named."""
    _, d = db
    ro = rollout_run.start(d, signed["pkg"], "fleet-a", MEMBERS, CanarySpec(1, False), 2, 0)
    for dev, verdict, detail in (
        ("cam-3", "rolled_back", "detection rate collapsed " + "x" * 400),
        ("cam-1", "passed", "fine"),
        ("cam-2", "refused", "gate: recall 0.0"),
    ):
        rollouts.add_verdict(d, VerdictRow(ro.id, dev, 0, f"{ro.id}-s0", verdict, detail, 1.7e9))
    why = rollout_run._why(d, ro, "2 failed (--halt-after 2): cam-2 refused, cam-3 rolled_back")
    assert why == (
        "2 failed (--halt-after 2): cam-2 refused, cam-3 rolled_back; cam-2: gate: recall 0.0; "
        f"cam-3: {('detection rate collapsed ' + 'x' * 400)[:300]}"
    )


def test_on_an_enrolled_broker_the_watcher_logs_in_as_its_own_user(
    tmp_path: Path, sims: list[SimDevice], signed: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    """`fleet enroll`'s broker makes the user name the client id: the statuses are read as
    `<operator>-watch` beside the pushes as `<operator>`, or each login would close the other."""
    b = enrolled_broker(tmp_path, "cam-1", "cam-2", "--group", "fleet-a", "--operator", "ops")
    b.start()
    try:
        secrets = tmp_path / "enroll" / "secrets"
        for dev in ("cam-1", "cam-2"):
            start_sims(
                tmp_path,
                b.port,
                signed["pub"],
                {dev: "pass"},
                sims,
                trial_s=0.2,
                password_file=secrets / f"{dev}.password",
            )
        url = new_db(tmp_path)
        op = with_login(
            write_config(tmp_path, port=b.port, device="operator"), "ops", secrets / "ops.password"
        )
        rc = ro_main(
            url,
            str(signed["pkg"]),
            "-c",
            str(op),
            "--group",
            "fleet-a",
            "--broker-dir",
            str(tmp_path / "enroll"),
            "--wait",
            "--timeout",
            "60",
        )
        out = capsys.readouterr().out
        assert rc == 0, out
        assert out.splitlines()[-1].endswith(f"every device of group fleet-a runs {sims[0].current['id']}")
        assert [len(s.received) for s in sims] == [1, 1]
    finally:
        b.stop()


def test_the_watch_keeps_only_members_on_their_own_topic_and_drains_in_order(
    tmp_path: Path, broker: Any
) -> None:
    """A device cannot answer for another (a body claiming cam-1 on cam-2's topic is dropped), a
    non-member, a body that is no JSON object or no UTF-8 is ignored; drain gives every new body
    in arrival order, then the newest of each device, and nothing new the second time."""
    import paho.mqtt.client as mqtt

    from edge_agent.app.cli.configfile import load_config

    cfg = load_config(write_config(tmp_path, port=broker.port, device="operator"))
    watch = rollout_run.StatusWatch(cfg, {"cam-1", "cam-2"})
    pub = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="sender")
    pub.connect("127.0.0.1", broker.port)
    pub.loop_start()
    try:
        watch.settle()
        for topic, payload in (
            ("edge/cam-2/status", json.dumps({"device_id": "cam-1", "n": 0})),  # cam-2 speaking for cam-1
            ("edge/cam-9/status", json.dumps({"device_id": "cam-9", "n": 0})),  # no member
            ("edge/cam-1/status", b"\xff\xfe"),
            ("edge/cam-1/status", b"{not json"),
            ("edge/cam-1/status", json.dumps(["device_id", "cam-1"])),
            ("edge/cam-1/status", json.dumps({"device_id": "cam-1", "n": 1})),
            ("edge/cam-2/status", json.dumps({"device_id": "cam-2", "n": 2})),
            ("edge/cam-1/status", json.dumps({"device_id": "cam-1", "n": 3})),
        ):
            pub.publish(topic, payload, qos=1).wait_for_publish(10)
        wait_until(lambda: watch.bodies.get("cam-1", {}).get("n") == 3, what="cam-1's last status")
        got = [(d, b["n"]) for d, b in watch.drain()]
        assert got == [("cam-1", 1), ("cam-2", 2), ("cam-1", 3), ("cam-1", 3), ("cam-2", 2)]
        assert [(d, b["n"]) for d, b in watch.drain()] == [("cam-1", 3), ("cam-2", 2)]
    finally:
        pub.disconnect()
        pub.loop_stop()
        watch.close()
