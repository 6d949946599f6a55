"""README's service steps that run without systemd: install-service.sh into a scratch root."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "systemd" / "install-service.sh"


def fake_venv(tmp_path: Path) -> Path:
    """A venv whose edge-agent runs this checkout (the real CLI, not a stub)."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    shim = venv / "bin" / "edge-agent"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m edge_agent "$@"\n')
    shim.chmod(0o755)
    return venv


def install(root: Path, venv: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        ["bash", str(SCRIPT), "--venv", str(venv), "--root", str(root)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


@pytest.mark.skipif(
    shutil.which("systemd-sysusers") is None, reason="needs systemd-sysusers (Debian: systemd)"
)
def test_install_service_lays_out_user_config_credentials_and_unit(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    venv = fake_venv(tmp_path)
    r = install(root, venv)
    assert r.returncode == 0, r.stderr
    # the user, from the sysusers.d file, in the scratch root's passwd/group
    passwd = (root / "etc" / "passwd").read_text()
    assert passwd.startswith("edge-agent:") or "\nedge-agent:" in passwd
    assert "/usr/sbin/nologin" in passwd
    cfg = root / "etc" / "edge-agent" / "config.toml"
    assert stat.S_IMODE(cfg.stat().st_mode) == 0o640
    gid = int(
        next(
            line for line in (root / "etc/group").read_text().splitlines() if line.startswith("edge-agent:")
        ).split(":")[2]
    )
    if os.geteuid() == 0:
        assert cfg.stat().st_gid == gid
    # the config it wrote is the example, and it is valid
    check = subprocess.run(
        [str(venv / "bin" / "edge-agent"), "config", "check", str(cfg)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert check.returncode == 0, check.stderr
    pw = root / "etc" / "edge-agent" / "mqtt-password"
    assert pw.read_bytes() == b"" and stat.S_IMODE(pw.stat().st_mode) == 0o600
    assert (root / "var/lib/edge-agent/models").is_dir()
    unit = (root / "etc/systemd/system/edge-agent.service").read_text()
    assert f"ExecStart={venv}/bin/edge-agent run --config /etc/edge-agent/config.toml" in unit
    assert "LoadCredential=mqtt-password:/etc/edge-agent/mqtt-password" in unit
    assert (root / "etc/modules-load.d/edge-agent.conf").is_file()
    # idempotent, and a user's config is never overwritten
    cfg.write_text(cfg.read_text() + "\n# edited\n")
    again = install(root, venv)
    assert again.returncode == 0, again.stderr
    assert cfg.read_text().endswith("# edited\n") and "kept the existing" in again.stdout


def test_install_service_refuses_a_venv_without_edge_agent(tmp_path: Path) -> None:
    r = install(tmp_path, tmp_path / "no-venv")
    assert r.returncode == 1 and "install the package first" in r.stderr


@pytest.mark.skipif(
    shutil.which("systemd-sysusers") is None, reason="needs systemd-sysusers (Debian: systemd)"
)
@pytest.mark.parametrize("version", [237, 238, 239, 245, 246, 247, 252, "abc", "237; touch x"])
def test_older_systemd_gets_a_drop_in_that_keeps_the_service_working(
    tmp_path: Path, version: int | str
) -> None:
    """Ubuntu 18.04 (JetPack 4, the Jetson Nano) has systemd 237, 20.04 (JetPack 5) 245: no
    @system-service group before 239 (the allow-list would hold only @default: the agent could not
    load its libraries) and no LoadCredential= before 247 (the password would not arrive)."""
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    venv = fake_venv(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    args = ["bash", str(SCRIPT), "--venv", str(venv), "--root", str(root), "--systemd-version", str(version)]
    r = subprocess.run(args, capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    dropin = root / "etc/systemd/system/edge-agent.service.d/10-older-systemd.conf"
    pw = root / "etc/edge-agent/mqtt-password"
    if isinstance(version, str):  # not a version: said, and treated as a new systemd (no drop-in)
        assert "systemd version unknown" in r.stdout
        version = 999
    if version >= 247:
        assert not dropin.exists()
        assert stat.S_IMODE(pw.stat().st_mode) == 0o600
        return
    lines = [x for x in dropin.read_text().splitlines() if x and not x.startswith("#")]
    deny = next(
        x
        for x in (REPO / "systemd/edge-agent.service").read_text().splitlines()
        if x.startswith("SystemCallFilter=~")
    )
    expected = ["[Service]"]
    if version < 239:
        expected += ["SystemCallFilter=", deny]  # reset the allow-list, keep the deny-list
    expected += ["Environment=CREDENTIALS_DIRECTORY=/etc/edge-agent"]
    assert lines == expected
    # the service's group reads the password file in place (no credential copy before 247)
    assert stat.S_IMODE(pw.stat().st_mode) == 0o640
    if os.geteuid() == 0:
        gid = int(
            next(
                x for x in (root / "etc/group").read_text().splitlines() if x.startswith("edge-agent:")
            ).split(":")[2]
        )
        assert pw.stat().st_gid == gid
    # a later run on a newer systemd removes it again
    r = subprocess.run([*args[:-1], "252"], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0 and not dropin.exists(), r.stderr


def test_the_password_file_resolves_under_the_drop_ins_credentials_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from edge_agent.adapters.mqtt.connect import read_password
    from edge_agent.core.config.schema import MqttConfig

    (tmp_path / "mqtt-password").write_text("s3cret\n")
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(tmp_path))
    cfg = MqttConfig(host="localhost", username="dev", password_file="mqtt-password")
    assert read_password(cfg) == "s3cret"


@pytest.mark.skipif(
    shutil.which("systemd-sysusers") is None, reason="needs systemd-sysusers (Debian: systemd)"
)
def test_an_empty_root_gets_its_etc_and_a_missing_one_is_one_line(tmp_path: Path) -> None:
    """systemd-sysusers on a root without etc/ ended the install in its raw "Failed to take
    /etc/passwd lock"; a --root that does not exist ended in bash's cd error."""
    root = tmp_path / "empty"
    root.mkdir()
    venv = fake_venv(tmp_path)
    r = install(root, venv)
    assert r.returncode == 0, r.stderr
    assert "lock" not in r.stderr and "edge-agent:" in (root / "etc" / "passwd").read_text()
    r = install(tmp_path / "nowhere", venv)
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.splitlines() == [
        f"install-service: error: --root {tmp_path / 'nowhere'}: not a folder (create it first: it becomes "
        "the installed system's /)"
    ]
