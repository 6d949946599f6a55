"""`edge-agent model rollout`'s arguments (each mistake one line) and where a group's members
come from: enrolled.json, and a rollout over an enrolled broker (`fleet enroll`'s passwd and ACL:
the watcher as `<operator>-watch`, the pushes as `<operator>`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.enrolled import enroll, enrolled_broker
from support.fixtures_updates import pack
from support.rollout_sim import SimDevice, new_db, rollout, rollout_id, start_sims, with_login
from support.updates import INT8, write_config

from edge_agent.core.broker.identity import Enrollment


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


def test_no_broker_is_one_line_and_the_recorded_rollout_can_be_resumed(
    tmp_path: Path, packages: dict[str, Path]
) -> None:
    from support import free_port

    port = free_port()
    url = new_db(tmp_path)
    op = write_config(tmp_path, port=port, device="operator")
    r = rollout(url, str(packages["signed"]), "-c", str(op), "--group", "fleet-a", "--member", "cam-1")
    assert r.returncode == 1 and f"cannot connect to 127.0.0.1:{port}" in r.stderr, r.stdout + r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
    rid = rollout_id(r.stdout)  # recorded before anything was sent: the handle to resume with
    st = rollout(url, "--status", rid)
    assert "running, stage 0" in st.stdout and "stage 0 (canaries), not sent: cam-1" in st.stdout, st.stdout
