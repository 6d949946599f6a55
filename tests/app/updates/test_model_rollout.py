"""`edge-agent model rollout` as a child process against a real mosquitto and the collector's
database: one real agent (`edge-agent run`, its real gate and trial) as the canary and simulated
devices (support/rollout_sim.py: the real model receiver, a retained status in the agent's
schema) as the rest of the group, issue 33's acceptance."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
from importlib import resources
from pathlib import Path
from typing import Callable

import pytest
from support import wait_until
from support.fixtures_updates import pack
from support.mqtt import Broker, Collector
from support.rollout_sim import (
    MEMBERS,
    SimDevice,
    members_args,
    new_db,
    pg_db,
    rollout,
    rollout_id,
    start_sims,
)
from support.updates import FP32, INT8, AgentProc, keys, write_config

from edge_agent.adapters.collector import rollouts
from edge_agent.adapters.collector.db import CollectorDb

FP32_SHA = hashlib.sha256(FP32.read_bytes()).hexdigest()
INT8_SHA = hashlib.sha256(INT8.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def zero_signed(packages: dict[str, Path], models_dir: Path) -> Path:
    """The zero-score INT8, signed: every gate refuses it (the broken-model guard)."""
    src = models_dir / "zero-score-int8.onnx"
    return pack(
        src, models_dir / "zero-signed.pkg", "2.2+zero", "--skip-guard", "--sign", str(packages["key"])
    )


def real_canary(
    broker: Broker,
    agents: list[AgentProc],
    packages: dict[str, Path],
    make_config: Callable[..., Path],
    trial: str = "",
) -> AgentProc:
    extra = keys(packages) + f'\ngroups = ["fleet-a"]\n{trial}'
    a = AgentProc(make_config(port=broker.port, device="cam-1", extra=extra))
    agents.append(a.start())

    def receiving() -> bool:
        rec = ((a.status() or {}).get("model_update") or {}).get("receiver") or {}
        return bool(rec.get("alive"))

    wait_until(receiving, what=lambda: f"cam-1's model receiver\n{a.log_text()}")
    return a


@pytest.mark.slow
def test_a_canary_whose_gate_refuses_halts_and_the_four_others_are_unchanged(
    tmp_path: Path,
    broker: Broker,
    agents: list[AgentProc],
    sims: list[SimDevice],
    packages: dict[str, Path],
    zero_signed: Path,
    make_config: Callable[..., Path],
) -> None:
    """Issue 33's acceptance: a group of 5, 1 canary (a real agent, sorted first) whose gate
    refuses: halted, naming it and its verdict; nothing sent to the 4 others; the verdicts stored."""
    a = real_canary(broker, agents, packages, make_config)
    rest = start_sims(
        tmp_path, broker.port, packages["pub"].read_text().strip(), {d: "pass" for d in MEMBERS[1:]}, sims
    )
    seen = Collector(broker.port, "edge/+/model/#", client_id="model-topics")
    url = new_db(tmp_path)
    op = write_config(tmp_path, port=broker.port, device="operator")
    try:
        r = rollout(
            url,
            str(zero_signed),
            "-c",
            str(op),
            "--group",
            "fleet-a",
            "--canary",
            "1",
            *members_args(),
            "--wait",
            "--timeout",
            "180",
        )
    finally:
        seen.close()
    out = r.stdout
    assert r.returncode == 1, out + r.stderr + a.log_text()
    rid = rollout_id(out)
    assert f"rollout {rid}: demo 2.2+zero to group fleet-a, 5 devices; canaries cam-1" in out
    assert "stage 0 (canaries): pushing to cam-1\n" in out
    assert "cam-1: refused: gate on" in out and "broken-model guard" in out
    assert f"rollout {rid}: HALTED at stage 0: canary failed: cam-1 refused; cam-1: gate on" in out
    assert f"rollout {rid}: not sent to 4 devices: cam-2, cam-3, cam-4, cam-5" in out
    # the canary: still its old model, the refusal is its own last event
    assert a.detector_sha() == FP32_SHA
    assert a.last()["outcome"] == "refused" and a.last()["origin"] == f"mqtt:{rid}-s0"
    # the four: not a byte on their topics, nothing received, still the config's model
    assert {t.split("/")[1] for t, _, _ in seen.messages} == {"cam-1"} and seen.messages
    for s in rest.values():
        assert s.received == [] and not any(s.transfers.glob("*/begin.json"))
        assert s.current["id"] is None and s.rx.counters()["messages"] == 0
    # the verdicts in the collector's database
    db = CollectorDb(url)
    try:
        ro = rollouts.get(db, rid)
        assert ro is not None and ro.state == "halted" and ro.pushed == 0
        assert ro.stages == [["cam-1"], ["cam-2", "cam-3", "cam-4", "cam-5"]]
        rows = rollouts.verdicts(db, rid)
        assert [(v.device, v.verdict, v.transfer_id) for v in rows] == [("cam-1", "refused", f"{rid}-s0")]
        assert "broken-model guard" in rows[0].detail
        assert [v.verdict for v in rollouts.device_verdicts(db, "cam-1")] == ["refused"]
    finally:
        db.close()
    st = rollout(url, "--status", rid)
    assert st.returncode == 0, st.stderr
    assert (
        "stage 1, not sent: cam-2, cam-3, cam-4, cam-5" in st.stdout and "halted: canary failed" in st.stdout
    )
    assert any(x.split()[2:6] == ["cam-1", rid, "0", "refused"] for x in st.stdout.splitlines()), st.stdout
    js = json.loads(rollout(url, "--status", rid, "--json").stdout)
    assert js["rollout"]["state"] == "halted" and [v["verdict"] for v in js["verdicts"]] == ["refused"]
    lst = rollout(url, "--status")
    assert lst.returncode == 0 and rid in lst.stdout and "halted" in lst.stdout


@pytest.mark.slow
def test_a_real_canary_passes_its_trial_then_the_rest_gets_it(
    tmp_path: Path,
    broker: Broker,
    agents: list[AgentProc],
    sims: list[SimDevice],
    packages: dict[str, Path],
    make_config: Callable[..., Path],
) -> None:
    a = real_canary(broker, agents, packages, make_config, trial="trial_s = 3\ntrial_min_frames = 5")
    pub = packages["pub"].read_text().strip()
    rest = start_sims(tmp_path, broker.port, pub, {d: "pass" for d in MEMBERS[1:]}, sims)
    url = new_db(tmp_path)
    op = write_config(tmp_path, port=broker.port, device="operator")
    r = rollout(
        url,
        str(packages["signed"]),
        "-c",
        str(op),
        "--group",
        "fleet-a",
        *members_args(),
        "--wait",
        "--timeout",
        "180",
    )
    assert r.returncode == 0, r.stdout + r.stderr + a.log_text()
    rid = rollout_id(r.stdout)
    lines = r.stdout.splitlines()
    # the order: the canary switched, passed its trial, only then the rest was pushed
    at = {
        k: next(i for i, x in enumerate(lines) if x.startswith(k))
        for k in ("cam-1: switched", "cam-1: passed", "stage 1: pushing to cam-2, cam-3, cam-4, cam-5")
    }
    assert at["cam-1: switched"] < at["cam-1: passed"] < at["stage 1: pushing to cam-2, cam-3, cam-4, cam-5"]
    assert (
        lines[-1] == f"rollout {rid}: done: every device of group fleet-a runs {rest['cam-2'].current['id']}"
    )
    assert a.detector_sha() == INT8_SHA
    for s in rest.values():
        assert s.received == [f"{rid}-s1"]
    db = CollectorDb(url)
    try:
        rows = rollouts.verdicts(db, rid)
        assert {(v.device, v.verdict) for v in rows if v.verdict == "passed"} == {
            (d, "passed") for d in MEMBERS
        }
        assert rollouts.get(db, rid).state == "done"  # type: ignore[union-attr]
    finally:
        db.close()
    # the simulated devices spoke the agent's status schema
    jsonschema = pytest.importorskip("jsonschema", reason="dev extra: pip install -e '.[dev]'")
    schema = json.loads(
        resources.files("edge_agent").joinpath("schemas", "status.json").read_text(encoding="utf-8")
    )
    for s in rest.values():
        for body in s.statuses:
            jsonschema.Draft202012Validator(schema).validate(body)


@pytest.mark.slow
@pytest.mark.parametrize("url_kind", ["sqlite", "postgresql"])
def test_halt_after_k_in_waves_stops_before_the_next_wave(
    tmp_path: Path,
    broker: Broker,
    sims: list[SimDevice],
    packages: dict[str, Path],
    url_kind: str,
    request: pytest.FixtureRequest,
) -> None:
    pub = packages["pub"].read_text().strip()
    how = {"cam-1": "pass", "cam-2": "refuse", "cam-3": "rollback", "cam-4": "pass", "cam-5": "pass"}
    devs = start_sims(tmp_path, broker.port, pub, how, sims)
    url = new_db(tmp_path) if url_kind == "sqlite" else pg_db(request)
    op = write_config(tmp_path, port=broker.port, device="operator")
    r = rollout(
        url,
        str(packages["signed"]),
        "-c",
        str(op),
        "--group",
        "fleet-a",
        "--canary",
        "20%",
        "--wave",
        "2",
        "--halt-after",
        "2",
        *members_args(),
        "--wait",
        "--timeout",
        "60",
    )
    assert r.returncode == 1, r.stdout + r.stderr
    rid = rollout_id(r.stdout)
    assert "stage 1: pushing to cam-2, cam-3" in r.stdout and "stage 2" not in r.stdout
    assert (
        "HALTED at stage 1: 2 failed (--halt-after 2): cam-2 refused, cam-3 rolled_back; cam-2: gate on 3 probe images"
        in r.stdout
    )
    assert f"rollout {rid}: not sent to 2 devices: cam-4, cam-5" in r.stdout
    assert devs["cam-4"].received == [] and devs["cam-5"].received == []
    db = CollectorDb(url)
    try:
        got = [(v.device, v.verdict) for v in rollouts.verdicts(db, rid)]
    finally:
        db.close()
    assert sorted(got) == sorted(
        [
            ("cam-1", "switched"),
            ("cam-1", "passed"),
            ("cam-2", "refused"),
            ("cam-3", "switched"),
            ("cam-3", "rolled_back"),
        ]
    )


@pytest.mark.slow
def test_a_rollout_survives_its_process_killed_and_resumes(
    tmp_path: Path, broker: Broker, sims: list[SimDevice], packages: dict[str, Path]
) -> None:
    """kill -9 of `model rollout --wait` while the canary is on trial; `--resume ID --wait` goes on
    from the database and the retained statuses: no verdict twice, each device one transfer."""
    pub = packages["pub"].read_text().strip()
    devs = start_sims(tmp_path, broker.port, pub, {d: "pass" for d in MEMBERS}, sims, trial_s=4.0)
    url = new_db(tmp_path)
    op = write_config(tmp_path, port=broker.port, device="operator")
    cmd = [
        sys.executable,
        "-m",
        "edge_agent",
        "model",
        "rollout",
        str(packages["signed"]),
        "-c",
        str(op),
        "--group",
        "fleet-a",
        *members_args(),
        "--wait",
        "--db",
        url,
    ]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen: list[str] = []
    assert p.stdout is not None
    for line in p.stdout:
        seen.append(line)
        if line.startswith("cam-1: switched"):
            break
    os.kill(p.pid, signal.SIGKILL)
    p.wait(10)
    rid = rollout_id("".join(seen))
    assert devs["cam-2"].received == []  # the canary is on trial: the rest not sent
    r = rollout(url, "--resume", rid, "-c", str(op), "--wait", "--timeout", "60")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "cam-1: switched" not in r.stdout and "cam-1: passed" in r.stdout  # stored once, before the kill
    assert r.stdout.splitlines()[-1].startswith(f"rollout {rid}: done")
    assert all(devs[d].received == [f"{rid}-s0" if d == "cam-1" else f"{rid}-s1"] for d in MEMBERS)
    again = rollout(url, "--resume", rid, "-c", str(op))
    assert again.returncode == 0 and again.stdout == f"rollout {rid}: done\n"


@pytest.mark.slow
def test_a_silent_canary_keeps_the_rollout_waiting_not_halted(
    tmp_path: Path, broker: Broker, sims: list[SimDevice], packages: dict[str, Path]
) -> None:
    pub = packages["pub"].read_text().strip()
    devs = start_sims(tmp_path, broker.port, pub, {"cam-1": "silent", "cam-2": "pass"}, sims)
    url = new_db(tmp_path)
    op = write_config(tmp_path, port=broker.port, device="operator")
    r = rollout(
        url,
        str(packages["signed"]),
        "-c",
        str(op),
        "--group",
        "fleet-a",
        "--member",
        "cam-2",
        "--member",
        "cam-1",
        "--wait",
        "--timeout",
        "3",
    )
    assert r.returncode == 3, r.stdout + r.stderr
    rid = rollout_id(r.stdout)
    assert (
        f"rollout {rid}: stage 0 waiting for cam-1 (no answer); go on with `model rollout --resume {rid} --wait`"
        in r.stdout
    )
    assert devs["cam-1"].received == [f"{rid}-s0"] and devs["cam-2"].received == []
    # without --wait: one step, exit 0, still waiting
    r = rollout(url, "--resume", rid, "-c", str(op))
    assert r.returncode == 0 and "waiting for cam-1 (no answer)" in r.stdout


@pytest.mark.slow
def test_a_push_cut_off_mid_stage_is_resent_under_its_transfer_id(
    tmp_path: Path,
    broker: Broker,
    sims: list[SimDevice],
    packages: dict[str, Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The operator's process dies while stage 1 is being sent (here: the push fails after its
    first device): `pushed` stays at 0, and the resume sends the stage again, under the same
    transfer id, to the devices of it without a verdict; none gets the package twice."""
    from edge_agent.app.cli.configfile import load_config
    from edge_agent.app.updates import rollout_run
    from edge_agent.core.updates.rollout import CanarySpec
    from edge_agent.errors import SyncError

    pub = packages["pub"].read_text().strip()
    devs = start_sims(tmp_path, broker.port, pub, {d: "pass" for d in MEMBERS}, sims)
    cfg = load_config(write_config(tmp_path, port=broker.port, device="operator"))
    db = CollectorDb(new_db(tmp_path))
    real = rollout_run.push_package

    def cut_off(cfg: object, pkg: Path, devices: list[str], group: None, transfer_id: str) -> str:
        if transfer_id.endswith("-s1"):
            real(cfg, pkg, devices[:1], None, transfer_id=transfer_id)  # type: ignore[arg-type]
            raise SyncError("the broker did not acknowledge a chunk within 60 s")
        return real(cfg, pkg, devices, None, transfer_id=transfer_id)  # type: ignore[arg-type]

    try:
        ro = rollout_run.start(db, packages["signed"], "fleet-a", MEMBERS, CanarySpec(1, False), 1, 0)
        monkeypatch.setattr(rollout_run, "push_package", cut_off)
        with pytest.raises(SyncError):
            rollout_run.step(db, cfg, ro, packages["signed"], wait=True, timeout_s=60, say=lambda line: None)
        stored = rollouts.get(db, ro.id)
        assert stored is not None and stored.state == "running" and stored.pushed == 0
        wait_until(
            lambda: devs["cam-2"].received == [f"{ro.id}-s1"], what="cam-2 got the first part of stage 1"
        )
        assert devs["cam-3"].received == []
        monkeypatch.setattr(rollout_run, "push_package", real)
        said: list[str] = []
        done = rollout_run.step(db, cfg, stored, packages["signed"], wait=True, timeout_s=60, say=said.append)
        assert done.state == "done", said
        assert [devs[d].received for d in MEMBERS] == [[f"{ro.id}-s0"]] + [[f"{ro.id}-s1"]] * 4
        pushed = [line for line in said if line.startswith("stage 1: pushing to ")]
        assert pushed == ["stage 1: pushing to cam-3, cam-4, cam-5"]  # cam-2 had answered: not again
    finally:
        db.close()
