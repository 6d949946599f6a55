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
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any, Callable

import pytest
from support import cli, wait_until
from support.collector import sqlite_url
from support.enrolled import enroll, enrolled_broker
from support.fixtures_updates import pack
from support.mqtt import Broker, Collector
from support.rollout_sim import SimDevice, with_login
from support.updates import FP32, INT8, AgentProc, keys, write_config

from edge_agent.adapters.collector import rollouts
from edge_agent.adapters.collector.db import CollectorDb
from edge_agent.core.broker.identity import Enrollment

FP32_SHA = hashlib.sha256(FP32.read_bytes()).hexdigest()
INT8_SHA = hashlib.sha256(INT8.read_bytes()).hexdigest()
MEMBERS = [f"cam-{i}" for i in range(1, 6)]


@pytest.fixture(scope="module")
def zero_signed(packages: dict[str, Path], models_dir: Path) -> Path:
    """The zero-score INT8, signed: every gate refuses it (the broken-model guard)."""
    src = models_dir / "zero-score-int8.onnx"
    return pack(
        src, models_dir / "zero-signed.pkg", "2.2+zero", "--skip-guard", "--sign", str(packages["key"])
    )


@pytest.fixture
def sims() -> Iterator[list[SimDevice]]:
    made: list[SimDevice] = []
    yield made
    for s in made:
        s.stop()


def new_db(tmp_path: Path) -> str:
    url = sqlite_url(tmp_path / "fleet.db")
    db = CollectorDb(url)
    db.migrate()  # what `edge-agent collect` does at its start
    db.close()
    return url


def pg_db(request: pytest.FixtureRequest) -> str:
    """An emptied, migrated database of the module's PostgreSQL (skips without PostgreSQL)."""
    pg = request.getfixturevalue("postgres")
    db = CollectorDb(pg.url)
    db.conn.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public")
    db.migrate()
    db.close()
    return str(pg.url)


def rollout(url: str, *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return cli("model", "rollout", *args, "--db", url, quiet=False, timeout=timeout)


def members_args(members: list[str] = MEMBERS) -> list[str]:
    return [a for m in members for a in ("--member", m)]


def start_sims(
    tmp_path: Path, port: int, pub: str, behaviours: dict[str, str], sims: list[SimDevice], **kw: Any
) -> dict[str, SimDevice]:
    out = {}
    for dev, how in behaviours.items():
        s = SimDevice(tmp_path / f"sim-{dev}", port, dev, pub, how, **kw)
        sims.append(s)
        out[dev] = s
    wait_until(
        lambda: all(s.rx.subscribed.is_set() for s in out.values()), what="the simulated receivers subscribed"
    )
    for s in out.values():
        s.publish()  # its first retained status: running the config's model
    return out


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


def rollout_id(out: str) -> str:
    line = next(x for x in out.splitlines() if x.startswith("rollout r"))
    return line.split()[1].rstrip(":")


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
    assert any(x.split()[:3] == ["cam-1", "0", "refused"] for x in st.stdout.splitlines()), st.stdout
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


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "give a PACKAGE (a new rollout), --resume ID or --status [ID]"),
        (
            ["PKG", "--group", "fleet-a"],
            "name the group's members: --broker-dir DIR (enrolled.json) or --member ID",
        ),
        (["PKG", "--member", "cam-1"], "model rollout PACKAGE: --group G is required"),
        (
            ["PKG", "--group", "fleet-a", "--member", "cam-1", "--canary", "0"],
            "--canary '0': expected 1..N devices or 1%..100%",
        ),
        (["PKG", "--group", "fleet-a", "--member", "cam 1"], "--member 'cam 1': expected a device id"),
        (
            ["PKG", "--group", "fleet-a", "--member", "cam-1", "--halt-after", "0"],
            "--halt-after 0: expected a number of devices >= 1",
        ),
        (["--status", "r-none"], "--status 'r-none': no such rollout"),
        (["--resume", "r-none"], "--resume 'r-none': no such rollout"),
        (["--status", "r1", "--resume", "r1"], "--status: takes no package and no --resume"),
        (
            ["PKG", "--group", "fleet-a", "--broker-dir", "NODIR"],
            "--broker-dir: cannot read NODIR/enrolled.json",
        ),
    ],
)
def test_bad_arguments_are_one_line(
    tmp_path: Path, packages: dict[str, Path], args: list[str], message: str
) -> None:
    url = new_db(tmp_path)
    op = write_config(tmp_path, device="operator")
    args = [
        str(packages["signed"]) if a == "PKG" else str(tmp_path / "nodir") if a == "NODIR" else a
        for a in args
    ]
    r = rollout(url, *args, "-c", str(op))
    message = message.replace("NODIR", str(tmp_path / "nodir"))
    assert r.returncode != 0 and message in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_members_from_enrolled_json_and_a_package_not_for_the_group(
    tmp_path: Path, packages: dict[str, Path], models_dir: Path
) -> None:
    url = new_db(tmp_path)
    op = write_config(tmp_path, device="operator")
    d = tmp_path / "broker"
    d.mkdir()
    enrolled = Enrollment(devices={"cam-1": ["north"], "cam-2": ["south"]}, operators=["op"])
    (d / "enrolled.json").write_text(enrolled.to_json())
    r = rollout(url, str(packages["signed"]), "-c", str(op), "--group", "west", "--broker-dir", str(d))
    assert r.returncode == 1 and "no device is enrolled in group 'west'" in r.stderr, r.stderr
    other = pack(
        INT8, models_dir / "north-only.pkg", "2.3", "--for-group", "north", "--sign", str(packages["key"])
    )
    r = rollout(url, str(other), "-c", str(op), "--group", "south", "--broker-dir", str(d))
    assert r.returncode == 1 and "names neither group 'south' nor devices ['cam-2']" in r.stderr, r.stderr


@pytest.mark.slow
def test_on_an_enrolled_broker_the_members_come_from_enrolled_json(
    tmp_path: Path, sims: list[SimDevice], packages: dict[str, Path]
) -> None:
    """`fleet enroll`'s files (no anonymous clients, an ACL per user): the rollout's watcher reads
    the statuses as `<operator>-watch`, pushes as `<operator>`, and takes the group's members
    from enrolled.json; a device enrolled in another group is not part of it."""
    b = enrolled_broker(tmp_path, "cam-1", "cam-2", "cam-3", "--group", "fleet-a", "--operator", "ops")
    d = tmp_path / "enroll"
    enroll(d, "cam-9", "--group", "fleet-b")
    b.start()
    try:
        pub = packages["pub"].read_text().strip()
        secrets = d / "secrets"
        devs = {
            dev: start_sims(
                tmp_path, b.port, pub, {dev: "pass"}, sims, password_file=secrets / f"{dev}.password"
            )[dev]
            for dev in ("cam-1", "cam-2", "cam-3", "cam-9")
        }
        url = new_db(tmp_path)
        op = with_login(
            write_config(tmp_path, port=b.port, device="operator"), "ops", secrets / "ops.password"
        )
        r = rollout(
            url,
            str(packages["signed"]),
            "-c",
            str(op),
            "--group",
            "fleet-a",
            "--broker-dir",
            str(d),
            "--wait",
            "--timeout",
            "60",
        )
        assert r.returncode == 0, r.stdout + r.stderr
        rid = rollout_id(r.stdout)
        assert f"rollout {rid}: demo 2.1+signed to group fleet-a, 3 devices; canaries cam-1" in r.stdout
        assert "stage 1: pushing to cam-2, cam-3" in r.stdout and r.stdout.splitlines()[-1].startswith(
            f"rollout {rid}: done"
        )
        assert [devs[x].received for x in ("cam-1", "cam-2", "cam-3", "cam-9")] == [
            [f"{rid}-s0"],
            [f"{rid}-s1"],
            [f"{rid}-s1"],
            [],
        ]
    finally:
        b.stop()
