"""The offline bundle installs and runs on an aarch64 Python with no index to fall back on.

Runs on the host (it drives the emulator itself): cross-build/build-bundle.sh makes the tarball,
its install.sh creates a venv with Debian bookworm's aarch64 python3.11 under qemu (Cortex-A72,
a Pi 4) and installs from the bundled wheels only (`--no-index`). The commands are then run from
that venv. `doctor` and `infer` are exercised as soon as the CLI has them.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from edge_agent import __version__

REPO = Path(__file__).resolve().parents[2]
CROSS = REPO / "cross-build"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        "EDGE_AGENT_QEMU_CPU" in os.environ, reason="runs on the host: it drives the emulator itself"
    ),
]
NEEDS_QEMU = (
    "needs qemu-user-static and mmdebstrap (apt-get install qemu-user-static mmdebstrap)"
    if shutil.which("qemu-aarch64-static") is None or shutil.which("mmdebstrap") is None
    else None
)


def extract(tarball: Path, dest: Path) -> None:
    """Extract refusing members (and links) that would land outside ``dest`` and device nodes.
    ``filter="data"`` does that on Python >= 3.11.4 (and 3.8.17+, 3.9.17+, 3.10.12+); Debian 12's
    /usr/bin/python3 is 3.11.2, so without it the same checks are made here first."""
    with tarfile.open(tarball) as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(dest, filter="data")
            return
        root = dest.resolve()
        for m in tar.getmembers():
            target = (root / m.name).resolve()
            if m.name.startswith("/") or not target.is_relative_to(root):
                raise (
                    tarfile.OutsideDestinationError(m, str(target))
                    if hasattr(tarfile, "OutsideDestinationError")
                    else ValueError(f"{m.name}: outside {root}")
                )
            if m.issym() or m.islnk():
                link = (target.parent / m.linkname) if m.issym() else (root / m.linkname)
                if m.linkname.startswith("/") or not link.resolve().is_relative_to(root):
                    raise ValueError(f"{m.name}: link to {m.linkname} leaves {root}")
            if m.isdev():
                raise ValueError(f"{m.name}: device node in a bundle")
        tar.extractall(dest)


@dataclass(frozen=True)
class Installed:
    tarball: Path
    bundle: Path  # extracted bundle directory
    prefix: Path
    python: str  # the emulated interpreter the venv was made from
    install_log: str

    @property
    def agent(self) -> Path:
        return self.prefix / "venv" / "bin" / "edge-agent"


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)  # the installed venv must stand on its own, not on the clone
    env["QEMU_CPU"] = "cortex-a72"
    return env


def _run(cmd: list[str], timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=_env(), check=False)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    if NEEDS_QEMU:
        pytest.skip(NEEDS_QEMU)
    work = tmp_path_factory.mktemp("bundle")
    built = _run(["bash", str(CROSS / "build-bundle.sh"), "-o", str(work / "dist")])
    assert built.returncode == 0, built.stderr
    tarball = Path(built.stdout.strip().splitlines()[-1])
    extract(tarball, work / "x")
    (bundle,) = (work / "x").iterdir()
    env_py = _run(["bash", str(CROSS / "qemu-env.sh")])
    assert env_py.returncode == 0, env_py.stderr
    python = env_py.stdout.strip().splitlines()[-1]
    prefix = work / "opt"
    inst = _run(
        [
            "bash",
            str(bundle / "install.sh"),
            "--prefix",
            str(prefix),
            "--python",
            python,
            "--no-systemd",
            "--no-user",
            "--no-link",
        ]
    )
    assert inst.returncode == 0, inst.stdout + inst.stderr
    yield Installed(tarball, bundle, prefix, python, inst.stdout)


def test_bundle_is_named_for_the_version_and_holds_only_aarch64_wheels(installed: Installed) -> None:
    assert installed.tarball.name == f"edge-agent-{__version__}-aarch64.tar.gz"
    wheels = sorted(p.name for p in (installed.bundle / "wheels").glob("*.whl"))
    assert f"onnx_edge_agent-{__version__}-py3-none-any.whl" in wheels
    for name in ("onnxruntime", "numpy", "opencv_python_headless", "pydantic_core", "paho_mqtt", "pip"):
        assert any(w.startswith(name + "-") for w in wheels), f"{name} wheel missing: {wheels}"
    for w in wheels:
        tag = w[:-4].split("-")[-1]
        assert tag == "any" or "aarch64" in tag, f"not installable on an aarch64 board: {w}"
    dev_only = ("onnx-", "pytest-", "torch-")
    assert not any(w.startswith(dev_only) for w in wheels), "test/dev-only wheel shipped"
    for name in ("install.sh", "device-smoke.sh"):
        assert os.access(installed.bundle / name, os.X_OK)
    for d in ("systemd", "models"):
        assert (installed.bundle / d).is_dir() == (REPO / d).is_dir()


def test_bundle_manifest_checksums_match_the_wheels(installed: Installed) -> None:
    text = (installed.bundle / "BUNDLE.txt").read_text(encoding="utf-8")
    assert f"version={__version__}\n" in text and "python=3.11\n" in text
    sums = dict(
        (name, digest) for digest, name in re.findall(r"^([0-9a-f]{64})  (\S+\.whl)$", text, flags=re.M)
    )
    wheels = {p.name: p for p in (installed.bundle / "wheels").glob("*.whl")}
    assert set(sums) == set(wheels)
    for name, path in wheels.items():
        assert hashlib.sha256(path.read_bytes()).hexdigest() == sums[name], name


def test_installed_command_reports_the_version(installed: Installed) -> None:
    out = _run([str(installed.agent), "--version"])
    assert (out.returncode, out.stdout.strip()) == (0, f"edge-agent {__version__}")


def test_venv_is_aarch64_self_contained_and_consistent(installed: Installed) -> None:
    py = str(installed.prefix / "venv" / "bin" / "python")
    code = (
        "import platform, sys, numpy, onnxruntime, cv2, PIL, serial, paho.mqtt.client, pydantic\n"
        "print(platform.machine(), sys.prefix == sys.base_prefix, onnxruntime.get_device())\n"
        "import importlib.util; print(importlib.util.find_spec('pytest') is None)"
    )
    out = _run([py, "-c", code])
    assert out.returncode == 0, out.stderr
    # aarch64, a real venv, CPU onnxruntime, and no test-only package leaking in from the sysroot
    assert out.stdout.split() == ["aarch64", "False", "CPU", "True"]
    check = _run([py, "-m", "pip", "check"])
    assert check.returncode == 0, check.stdout + check.stderr


def test_install_refuses_an_interpreter_the_wheels_cannot_serve(installed: Installed, tmp_path: Path) -> None:
    host = shutil.which("python3")
    assert host is not None
    out = _run(
        [
            "bash",
            str(installed.bundle / "install.sh"),
            "--prefix",
            str(tmp_path / "p"),
            "--python",
            host,
            "--no-systemd",
            "--no-user",
            "--no-link",
        ]
    )
    assert out.returncode == 1
    assert "bundle is for aarch64 Python 3.11" in out.stderr
    assert not (tmp_path / "p" / "venv").exists()


def test_reinstall_is_idempotent(installed: Installed) -> None:
    again = _run(
        [
            "bash",
            str(installed.bundle / "install.sh"),
            "--prefix",
            str(installed.prefix),
            "--python",
            installed.python,
            "--no-systemd",
            "--no-user",
            "--no-link",
        ]
    )
    assert again.returncode == 0, again.stdout + again.stderr
    assert "creating venv" not in again.stdout  # reused, not recreated
    out = _run([str(installed.agent), "--version"])
    assert out.stdout.strip() == f"edge-agent {__version__}"


def _command_available(installed: Installed, command: str) -> str:
    """The command's --help text; skip (with the reason) while the CLI does not have it yet."""
    out = _run([str(installed.agent), command, "--help"])
    if out.returncode != 0:
        pytest.skip(
            f"`edge-agent {command}` not implemented yet (exit {out.returncode}); "
            "this test starts checking it as soon as it lands"
        )
    return out.stdout


def test_doctor_runs_on_the_emulated_board(installed: Installed, tmp_path: Path) -> None:
    """Healthy (the bundled demo detector, the bundled frames as the camera) is exit 0 with the
    model loaded and a frame grabbed under emulation; a missing model is exit 1 naming it. Any
    other code (SIGILL is 132 via the shell) or a traceback is a defect."""
    _command_available(installed, "doctor")
    models = installed.prefix / "models"
    det, samples = models / "demo-detector.onnx", models / "samples"
    if not det.is_file() or not samples.is_dir():
        pytest.skip(f"bundle has no demo detector + samples under {models}")
    state = tmp_path / "state"

    def doctor(model: Path) -> tuple[int, dict[str, dict[str, str]], str]:
        cfg = tmp_path / "c.toml"
        cfg.write_text(
            f'[device]\nid = "d1"\nstate_dir = "{state}"\n[detector]\nmodel = "{model}"\n'
            f'[camera]\nsource = "{samples}"\n[mqtt]\nenabled = false\n[queue]\npath = "{state}/q.db"\n'
            f'[health]\nstatus_file = "{state}/status.json"\n'
        )
        out = _run([str(installed.agent), "doctor", "--json", "--config", str(cfg)])
        assert "Traceback" not in out.stderr, out.stderr
        checks = {c["check"]: c for c in json.loads(out.stdout)} if out.stdout.strip() else {}
        return out.returncode, checks, out.stdout + out.stderr

    rc, checks, text = doctor(det)
    assert rc == 0, text
    assert checks["detector"]["status"] == "ok" and "loaded and ran" in checks["detector"]["detail"], text
    assert checks["camera"]["status"] == "ok", text
    missing = tmp_path / "nope.onnx"
    rc, checks, text = doctor(missing)
    assert rc == 1, text
    assert checks["models"]["status"] == "FAIL" and str(missing) in checks["models"]["detail"], text


def test_infer_runs_on_a_bundled_sample(installed: Installed) -> None:
    help_text = _command_available(installed, "infer")
    models = installed.prefix / "models"
    files = sorted(models.rglob("*")) if models.is_dir() else []
    # the demo detector (a classifier is no input for `infer`), and a demo frame first
    onnx = sorted((p for p in files if p.suffix == ".onnx"), key=lambda p: ("detector" not in p.name, p.name))
    images = sorted(
        (p for p in files if p.suffix.lower() in (".jpg", ".jpeg", ".png")),
        key=lambda p: ("samples" not in p.parts, str(p)),
    )
    if not onnx or not images:
        pytest.skip(
            f"bundle has no demo model + sample image under models/ (found {len(onnx)} .onnx, "
            f"{len(images)} images)"
        )
    args = ["--model", str(onnx[0])] if "--model" in help_text else [str(onnx[0])]
    out = _run([str(installed.agent), "infer", *args, str(images[0]), "--json"])
    assert out.returncode == 0, out.stdout + out.stderr
    result = json.loads(out.stdout)
    assert result["detections"], "the demo detector found nothing on a demo frame under emulation"


def test_device_smoke_reports_the_installed_runtime(installed: Installed, tmp_path: Path) -> None:
    (ort_wheel,) = (installed.bundle / "wheels").glob("onnxruntime-*.whl")
    ort_version = ort_wheel.name.split("-")[1]
    out = subprocess.run(
        ["bash", str(installed.bundle / "device-smoke.sh"), "--agent", str(installed.agent)],
        capture_output=True,
        text=True,
        timeout=900,
        env=_env(),
        cwd=tmp_path,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    report = out.stdout
    assert f"(edge-agent {__version__})" in report
    assert re.search(r"^python: +3\.11\.\d+ aarch64$", report, flags=re.M), report
    assert f"onnxruntime {ort_version} " in report
    assert "CPUExecutionProvider" in report
    has_model = (installed.prefix / "models").is_dir() and any((installed.prefix / "models").rglob("*.onnx"))
    for command in ("doctor", "bench", "infer"):
        if command != "doctor" and not has_model:
            assert "-- bench, infer: skipped (no .onnx model found" in report
            continue
        # each command either ran and succeeded or is named as missing: never silently absent
        ran = re.search(rf"^-- edge-agent {command}\b.*?^   exit 0 after", report, flags=re.M | re.S)
        missing = f"skipped: this edge-agent has no '{command}' command yet" in report
        assert ran or missing, report
    (saved,) = tmp_path.glob("edge-agent-smoke-*.txt")
    assert saved.read_text(encoding="utf-8") == report


@pytest.mark.parametrize("python_has_filter", [True, False])
def test_extract_keeps_members_inside_and_refuses_escapes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, python_has_filter: bool
) -> None:
    if not python_has_filter:  # what Debian 12's Python 3.11.2 looks like
        monkeypatch.delattr(tarfile, "data_filter", raising=False)
    elif not hasattr(tarfile, "data_filter"):
        pytest.skip(f"this Python ({sys.version.split()[0]}) has no extraction filters")
    good = tmp_path / "good.tar.gz"
    (tmp_path / "src" / "bundle").mkdir(parents=True)
    (tmp_path / "src" / "bundle" / "install.sh").write_text("echo hi\n")
    with tarfile.open(good, "w:gz") as tar:
        tar.add(tmp_path / "src" / "bundle", arcname="bundle")
    extract(good, tmp_path / "x")
    assert (tmp_path / "x" / "bundle" / "install.sh").read_text() == "echo hi\n"
    for name, kind in [("../escape.txt", tarfile.REGTYPE), ("bundle/link", tarfile.SYMTYPE)]:
        bad = tmp_path / f"bad-{kind!r}.tar"
        with tarfile.open(bad, "w") as tar:
            info = tarfile.TarInfo(name)
            info.type = kind
            if kind == tarfile.SYMTYPE:
                info.linkname = "../../outside"
            tar.addfile(info, io.BytesIO(b""))
        with pytest.raises((ValueError, tarfile.TarError)):
            extract(bad, tmp_path / "y")
        assert not (tmp_path / "escape.txt").exists() and not (tmp_path / "y" / "bundle" / "link").exists()
