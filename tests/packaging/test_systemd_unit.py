"""The systemd unit and sysusers file, checked with the real systemd tools (skipped where absent)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
UNIT = REPO / "systemd" / "edge-agent.service"
SYSUSERS = REPO / "systemd" / "edge-agent.sysusers"
SYSTEM_UNITS = Path("/lib/systemd/system")

needs_analyze = pytest.mark.skipif(
    shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed (Debian package: systemd)"
)


def unit_settings(text: str) -> dict[str, list[str]]:
    """``Key=value`` lines (all sections) -> key: values in order; comments/sections skipped."""
    out: dict[str, list[str]] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;[":
            continue
        key, _, value = line.partition("=")
        out.setdefault(key.strip(), []).append(value.strip())
    return out


def test_unit_has_the_service_contract() -> None:
    s = unit_settings(UNIT.read_text())
    assert s["Type"] == ["notify"] and s["NotifyAccess"] == ["main"] and s["WatchdogSec"] == ["30s"]
    assert s["ExecStart"] == ["/opt/edge-agent/venv/bin/edge-agent run --config /etc/edge-agent/config.toml"]
    assert s["Restart"] == ["on-failure"] and "TimeoutStopSec" in s
    assert s["User"] == ["edge-agent"] and s["Group"] == ["edge-agent"]
    assert s["SupplementaryGroups"] == ["video dialout"]
    for d in ("StateDirectory", "ConfigurationDirectory", "RuntimeDirectory"):
        assert s[d] == ["edge-agent"]
    assert s["LoadCredential"] == ["mqtt-password:/etc/edge-agent/mqtt-password"]
    # cameras and serial ports stay visible: a device allow-list, never PrivateDevices=
    assert "PrivateDevices" not in s and "PrivateUsers" not in s
    assert s["DevicePolicy"] == ["closed"]
    allowed = {v.split()[0] for v in s["DeviceAllow"]}
    assert {"char-video4linux", "char-ttyUSB", "char-ttyACM", "char-ttyAMA", "/dev/serial0"} <= allowed
    assert s["CapabilityBoundingSet"] == [""] and s["NoNewPrivileges"] == ["yes"]
    assert s["ProtectSystem"] == ["strict"] and s["SystemCallFilter"][0] == "@system-service"


@needs_analyze
def test_security_exposure_score_at_most_2_5() -> None:
    proc = subprocess.run(
        ["systemd-analyze", "security", "--offline=true", "--no-pager", str(UNIT)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    m = re.search(r"Overall exposure level for edge-agent\.service: (\d+(?:\.\d+)?)", proc.stdout)
    assert m is not None, proc.stdout[-2000:] + proc.stderr
    score = float(m.group(1))
    assert score <= 2.5, f"exposure {score} > 2.5"


def _verify(unit_text: str, root: Path) -> subprocess.CompletedProcess[str]:
    """``systemd-analyze verify --root`` on a throw-away root holding the unit, the distro's units
    (sysinit.target, network-online.target ...) and an executable at the ExecStart path: verify
    insists that ExecStart exists, and the venv is not installed on a test machine."""
    (root / "etc/systemd/system").mkdir(parents=True, exist_ok=True)
    (root / "etc/systemd/system/edge-agent.service").write_text(unit_text)
    lib = root / "usr/lib/systemd/system"
    if not lib.exists():
        shutil.copytree(SYSTEM_UNITS, lib, symlinks=True)
        exe = root / "opt/edge-agent/venv/bin/edge-agent"
        exe.parent.mkdir(parents=True)
        exe.write_text("#!/bin/sh\nexit 0\n")
        exe.chmod(0o755)
    return subprocess.run(
        ["systemd-analyze", "verify", "--man=no", f"--root={root}", "edge-agent.service"],
        capture_output=True,
        text=True,
        timeout=60,
    )


@needs_analyze
@pytest.mark.skipif(
    not SYSTEM_UNITS.is_dir(), reason=f"{SYSTEM_UNITS} absent: no distro units to verify against"
)
def test_unit_verifies_without_warnings(tmp_path: Path) -> None:
    text = UNIT.read_text()
    proc = _verify(text, tmp_path)
    assert proc.returncode == 0 and proc.stderr.strip() == "", proc.stderr
    # verify exits 0 on "ignoring" warnings, so the empty stderr above is the real check; show that a
    # typo does produce one
    broken = _verify(text.replace("Type=notify", "Type=notifyy"), tmp_path)
    assert "Failed to parse service type" in broken.stderr


@pytest.mark.skipif(shutil.which("systemd-sysusers") is None, reason="systemd-sysusers not installed")
def test_sysusers_creates_user_in_video_and_dialout(tmp_path: Path) -> None:
    (tmp_path / "etc").mkdir()
    proc = subprocess.run(
        ["systemd-sysusers", f"--root={tmp_path}", str(SYSUSERS)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    passwd = (tmp_path / "etc/passwd").read_text().splitlines()
    user = [line.split(":") for line in passwd if line.startswith("edge-agent:")]
    assert len(user) == 1 and user[0][5:] == ["/var/lib/edge-agent", "/usr/sbin/nologin"]
    assert int(user[0][2]) < 1000  # a system user
    groups = {g.split(":")[0]: g.split(":")[3] for g in (tmp_path / "etc/group").read_text().splitlines()}
    assert groups["video"] == "edge-agent" and groups["dialout"] == "edge-agent" and "edge-agent" in groups


@pytest.mark.shared
@pytest.mark.slow
@pytest.mark.parametrize("model", ["yolov8n-coco-fp32.onnx", "yolov8n-coco-int8-dynamic.onnx"])
def test_inference_works_under_write_xor_execute(shared_dir: Path, model: str) -> None:
    """Backs MemoryDenyWriteExecute=yes: the CPU inference path needs no W+X memory."""
    proc = subprocess.run(
        [
            sys.executable,
            str(Path(__file__).with_name("mdwe_probe.py")),
            str(shared_dir / "models" / model),
            str(shared_dir / "images/bus.jpg"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if proc.returncode == 77:
        pytest.skip(f"kernel without prctl(PR_SET_MDWE) (Linux < 6.3): {proc.stdout.strip()}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "MDWE active" in proc.stdout and "inference ok (1, 84, 8400)" in proc.stdout
    assert "ctypes callback ok 42" in proc.stdout and "sqlite ok 42" in proc.stdout
