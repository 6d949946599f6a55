"""`edge-agent fleet enroll|revoke` as an operator runs them: what they print, their exit codes,
one line for every bad input, and the device's config snippet that works with the files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import tomllib
from support import cli

from edge_agent.app.cli.configfile import load_config
from edge_agent.core.config.collector import CollectorConfig


def fleet(*args: str) -> tuple[int, str, str]:
    r = cli("fleet", *args)
    return r.returncode, r.stdout, r.stderr


def test_enroll_prints_configs_that_load_and_name_the_kept_password(tmp_path: Path) -> None:
    d = tmp_path / "enroll"
    rc, out, err = fleet(
        "enroll",
        "cam-1",
        "--group",
        "shop",
        "--collector",
        "coll-1",
        "--prefix",
        "site",
        "--broker-dir",
        str(d),
    )
    assert rc == 0 and err == "", err
    device_part = out.split("# collector")[0]
    cfg_file = tmp_path / "config.toml"
    cfg_file.write_text(device_part)
    cfg = load_config(cfg_file)  # the printed snippet is a valid device config
    assert (cfg.device.id, cfg.mqtt.username, cfg.mqtt.role_usernames) == ("cam-1", "cam-1", True)
    assert cfg.mqtt.topic_prefix == "site" and cfg.mqtt.password_file == "mqtt-password"
    assert f"password (new): {d}/secrets/cam-1.password" in out
    col = tomllib.loads(
        "[collector]" + out.split("[collector]")[1].split("# operator")[0].split("# broker:")[0]
    )
    c = CollectorConfig(**col["collector"])
    assert c.client_id == c.username == "coll-1" and c.prefix == "site"
    rc, out, _ = fleet("enroll", "cam-1", "--group", "shop", "--broker-dir", str(d))
    assert rc == 0 and "password (unchanged)" in out  # the same prefix remembered, nothing new
    assert (
        "user cam-1-model\ntopic read site/cam-1/model/#\ntopic read site/groups/shop/model/#"
        in (d / "acl").read_text()
    )


def test_json_output_and_revoke(tmp_path: Path) -> None:
    d = str(tmp_path / "e")
    rc, out, _ = fleet("enroll", "cam-1", "cam-2", "--operator", "ops", "--json", "--broker-dir", d)
    assert rc == 0
    assert json.loads(out) == {
        "broker_dir": d,
        "enrolled": ["cam-1", "cam-2", "ops"],
        "new_passwords": ["cam-1", "cam-2", "ops"],
        "removed": [],
    }
    rc, out, _ = fleet("revoke", "cam-1", "--broker-dir", d)
    assert rc == 0 and out.startswith("cam-1: device revoked")
    enrolled = json.loads((tmp_path / "e" / "enrolled.json").read_text())
    assert list(enrolled["devices"]) == ["cam-2"] and enrolled["operators"] == ["ops"]
    rc, _, err = fleet("revoke", "cam-1", "--broker-dir", d)
    assert (
        rc == 1 and err.strip() == f"edge-agent fleet: error: 'cam-1': not enrolled in {d} (nothing revoked)"
    )


@pytest.mark.parametrize(
    "args, error",
    [
        (["cam/1"], "device 'cam/1': must not contain '/'"),
        (["cam+"], "wildcards"),
        (["$SYS"], "must not start with '$'"),
        (["x" * 65], "expected 1-64 of A-Za-z0-9_.-"),
        (["groups"], "reserved"),
        (["cam-1", "--group", "a#"], "--group 'a#'"),
        ([], "nothing to enroll"),
        (["--group", "g"], "--group needs a DEVICE"),
        (["cam-1", "--collector", "cam-1"], "'cam-1' is named twice"),
        (["cam-1", "cam-1-model"], "already the user of device cam-1"),
        (["cam-1", "--port", "0"], "port '0': expected 1-65535"),
        (["cam-1", "--prefix", "a/+"], "wildcard"),
        (["cam-1", "--deploy-dir", "relative"], "absolute path"),
        (["c\u00e9"], "expected 1-64 of A-Za-z0-9_.-"),
    ],
)
def test_bad_input_is_one_line_and_exit_1(tmp_path: Path, args: list[str], error: str) -> None:
    rc, out, err = fleet("enroll", *args, "--broker-dir", str(tmp_path / "e"))
    assert rc == 1 and out == ""
    assert len(err.strip().splitlines()) == 1 and error in err and "Traceback" not in err, err
    assert not (tmp_path / "e" / "passwd").exists()


def test_a_device_cannot_become_a_collector_without_revoke(tmp_path: Path) -> None:
    d = str(tmp_path / "e")
    assert fleet("enroll", "cam-1", "--broker-dir", d)[0] == 0
    rc, _, err = fleet("enroll", "--collector", "cam-1", "--broker-dir", d)
    assert rc == 1 and "'cam-1' is already enrolled as a device (revoke it first)" in err
