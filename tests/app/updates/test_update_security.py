"""Model updates as an attacker and a careless operator meet them, without a running agent:
anti-rollback, keys, hostile tars, the inbox's owner, modes under umask 000, true refusal reasons."""

from __future__ import annotations

import io
import json
import os
import shutil
import stat
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any, Callable

import pytest
from support import cli
from support.updates import INT8, SAMPLES

from edge_agent.adapters.host import durable
from edge_agent.adapters.updates import package_file, signing
from edge_agent.adapters.updates.store import ModelStore
from edge_agent.app.cli.configfile import load_config
from edge_agent.app.updates.agent_side import ModelUpdates
from edge_agent.app.updates.switch import describe, install, rollback
from edge_agent.core.updates.store_state import StoreState


def _keys(*pubs: str) -> str:
    return "[model_update]\ntrusted_keys = [" + ", ".join(f'"{p}"' for p in pubs) + "]"


def _pub(packages: dict[str, Path]) -> str:
    return packages["pub"].read_text().strip()


def _state(cfg: Any) -> dict[str, Any]:
    return dict(json.loads((Path(cfg.device.state_dir) / "models" / "active.json").read_text()))


# ---- 1. secure by default -------------------------------------------------------------------
def test_config_check_and_doctor_warn_when_updates_have_no_key(
    packages: dict[str, Path], make_config: Callable[..., Path]
) -> None:
    from edge_agent.app.cli.doctor_cmd import checks

    bare = make_config(port=1883)
    r = cli("config", "check", str(bare), quiet=False)
    assert r.returncode == 0 and "no trusted_keys" in r.stderr and "MQTT delivery stays off" in r.stderr
    got = {c["check"]: c for c in checks(load_config(bare), "/", probe=False)}
    assert got["model updates"]["status"] == "warn" and "no trusted_keys" in got["model updates"]["detail"]
    keyed = make_config(port=1883, extra=_keys(_pub(packages)), device="cam-2")
    r = cli("config", "check", str(keyed), quiet=False)
    assert r.returncode == 0 and "trusted_keys" not in r.stderr, r.stderr
    got = {c["check"]: c for c in checks(load_config(keyed), "/", probe=False)}
    assert got["model updates"]["status"] == "ok"


def test_any_one_of_several_trusted_keys_verifies(
    packages: dict[str, Path], make_config: Callable[..., Path]
) -> None:
    """Key rotation: the new key listed first, the old one still trusted."""
    other = signing.public_key(packages["other_key"])
    cfg = load_config(make_config(extra=_keys(other, _pub(packages))))
    res = install(cfg, packages["signed"], origin="test")
    assert res["outcome"] == "switched" and res["signed_by_key"] == 1, res["detail"]


def test_a_package_from_mqtt_must_be_signed_and_force_comes_only_from_a_local_command(
    packages: dict[str, Path], make_config: Callable[..., Path]
) -> None:
    cfg = load_config(make_config())
    updates = ModelUpdates(cfg, lambda: None)
    inbox = updates.inbox
    inbox.mkdir(parents=True)
    for name, pkg, req in (
        ("m", packages["good"], {"origin": "mqtt:m"}),  # unsigned, delivered from outside
        ("f", packages["zero"], {"origin": "inbox:f", "force": True}),  # force not from the CLI
    ):
        shutil.copyfile(pkg, inbox / f"{name}.pkg")
        (inbox / f"{name}.request.json").write_text(json.dumps(req))
        updates.scan_inbox()
        res = json.loads((inbox / f"{name}.result.json").read_text())
        assert res["outcome"] == "refused", res
    assert (
        "unsigned package from mqtt:m refused" in json.loads((inbox / "m.result.json").read_text())["detail"]
    )
    assert "broken-model guard" in json.loads((inbox / "f.result.json").read_text())["detail"]
    assert describe(cfg)["current"]["id"] is None


# ---- 2. anti-rollback -----------------------------------------------------------------------
def test_a_signed_older_version_is_refused_unless_downgrade_is_asked_locally(
    packages: dict[str, Path], versioned: dict[str, Path], make_config: Callable[..., Path]
) -> None:
    cfg_path = make_config(extra=_keys(_pub(packages)))
    cfg = load_config(cfg_path)
    assert install(cfg, versioned["2.0"], origin="test")["outcome"] == "switched"
    old = install(cfg, versioned["1.0"], origin="test")
    assert old["outcome"] == "refused" and "not newer than 2.0" in old["detail"], old["detail"]
    r = cli("model", "install", str(versioned["1.0"]), "-c", str(cfg_path), quiet=False)
    assert r.returncode == 1 and "anti-rollback" in r.stdout
    r = cli("model", "install", str(versioned["1.0"]), "-c", str(cfg_path), "--allow-downgrade", quiet=False)
    assert r.returncode == 0 and r.stdout.startswith("switched"), r.stdout + r.stderr
    assert _state(cfg)["highest"]["version"] == "2.0"  # the downgrade did not lower the mark
    # the mark survives rollbacks and restarts (each CLI run is a new process reading active.json)
    assert cli("model", "rollback", "-c", str(cfg_path), quiet=False).returncode == 0
    assert describe(cfg)["current"]["version"] == "2.0"
    assert cli("model", "rollback", "-c", str(cfg_path), quiet=False).returncode == 0
    assert describe(cfg)["current"]["id"] is None
    r = cli("model", "install", str(versioned["1.0"]), "-c", str(cfg_path), quiet=False)
    assert r.returncode == 1 and "version 1.0 was rolled back on this device" in r.stdout
    r = cli(
        "model", "install", str(versioned["1.0"]), "-c", str(cfg_path), "--allow-rolled-back", quiet=False
    )
    assert r.returncode == 1 and "not newer than 2.0" in r.stdout  # anti-rollback is a separate decision
    # a version rolled back stays refused (the mark's own package too) until a newer one is in
    again = install(cfg, versioned["2.0"], origin="test")
    assert again["outcome"] == "refused" and "version 2.0 was rolled back on this device" in again["detail"]
    assert install(cfg, versioned["3.0"], origin="test")["outcome"] == "switched"
    assert "rolled_back" not in _state(cfg)  # 3.0 is in: the older rolled-back versions are moot


def test_rollback_goes_to_the_previous_version_not_the_oldest(
    versioned: dict[str, Path], make_config: Callable[..., Path]
) -> None:
    cfg = load_config(make_config())
    for v in ("1.0", "2.0", "3.0"):
        assert install(cfg, versioned[v], origin="test")["outcome"] == "switched"
    assert rollback(cfg, "test")["outcome"] == "rolled_back"
    assert describe(cfg)["current"]["version"] == "2.0"
    assert rollback(cfg, "test")["outcome"] == "rolled_back"
    assert describe(cfg)["current"]["version"] == "1.0"


# ---- 4. hostile tars ------------------------------------------------------------------------
def _manifest_for(path: str, size: int, sha: str = "0" * 64) -> bytes:
    return json.dumps(
        {
            "name": "evil",
            "version": "9.0",
            "created_at": "2026-11-30T00:00:00Z",
            "files": {"detector": {"path": path, "sha256": sha, "size": size}},
        }
    ).encode()


@pytest.mark.parametrize("fmt", ["gnu", "pax", "default"])
def test_a_sparse_1gib_member_is_refused_before_extraction(
    make_config: Callable[..., Path], tmp_path: Path, fmt: str
) -> None:
    if shutil.which("tar") is None:
        pytest.skip("GNU tar is needed to write a sparse member (Python's tarfile cannot)")
    src = tmp_path / "src"
    src.mkdir()
    (src / "manifest.json").write_bytes(_manifest_for("detector.onnx", 1 << 30))
    with open(src / "detector.onnx", "wb") as f:
        f.truncate(1 << 30)
    pkg = tmp_path / "sparse.pkg"
    subprocess.run(
        [
            "tar",
            "--sparse",
            *([f"--format={fmt}"] if fmt != "default" else []),
            "-cf",
            str(pkg),
            "-C",
            str(src),
            "manifest.json",
            "detector.onnx",
        ],
        check=True,
    )
    assert pkg.stat().st_size < 1 << 20
    cfg = load_config(make_config())
    t0 = time.monotonic()
    res = install(cfg, pkg, origin="test")
    assert res["outcome"] == "refused" and "is a sparse file" in res["detail"], res["detail"]
    assert time.monotonic() - t0 < 10
    store = ModelStore(cfg.device.state_dir)
    written = [p for p in store.root.rglob("*") if p.is_file() and p.stat().st_size > 1 << 20]
    assert written == []


def test_a_member_claiming_more_than_the_package_holds_is_refused_before_writing(
    make_config: Callable[..., Path], tmp_path: Path
) -> None:
    pkg = tmp_path / "liar.pkg"
    big = 50 << 20
    with tarfile.open(pkg, "w") as tar:
        data = _manifest_for("detector.onnx", big)
        info = tarfile.TarInfo("manifest.json")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
        info = tarfile.TarInfo("detector.onnx")
        info.size = big
        tar.addfile(info, io.BytesIO(bytes(big)))
    with open(pkg, "r+b") as f:  # cut the tar: the header still claims 50 MB
        f.truncate(1 << 20)
    cfg = load_config(make_config())
    res = install(cfg, pkg, origin="test")
    assert res["outcome"] == "refused", res["detail"]
    written = [p for p in Path(cfg.device.state_dir).rglob("*") if p.is_file() and p.stat().st_size > 4096]
    assert written == []


def test_a_manifest_path_with_dotdot_writes_nothing_outside(
    make_config: Callable[..., Path], tmp_path: Path
) -> None:
    pkg = tmp_path / "escape.pkg"
    with tarfile.open(pkg, "w") as tar:
        for name, data in (
            ("manifest.json", _manifest_for("../escape.onnx", 4)),
            ("../escape.onnx", b"evil"),
        ):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    cfg = load_config(make_config())
    res = install(cfg, pkg, origin="test")
    assert res["outcome"] == "refused" and "'..'" in res["detail"], res["detail"]
    assert list(Path(cfg.device.state_dir).rglob("escape.onnx")) == []


def test_a_tampered_probe_image_is_refused(make_config: Callable[..., Path], tmp_path: Path) -> None:
    """Every file the manifest lists is hash-checked, the probe images too."""
    probe = tmp_path / "probe"
    probe.mkdir()
    shutil.copyfile(sorted(SAMPLES.glob("*.jpg"))[0], probe / "a.jpg")
    good = tmp_path / "probe.pkg"
    assert (
        cli("model", "pack", str(INT8), "-o", str(good), "--probe", str(probe), quiet=False).returncode == 0
    )
    bad = tmp_path / "bad-probe.pkg"
    with tarfile.open(good) as tin, tarfile.open(bad, "w", format=tarfile.PAX_FORMAT) as tout:
        for m in tin.getmembers():
            data = tin.extractfile(m).read()  # type: ignore[union-attr]
            if m.name == "probe/a.jpg":
                data = data[:-8] + bytes(8)
            tout.addfile(m, io.BytesIO(data))
    res = install(load_config(make_config()), bad, origin="test")
    assert res["outcome"] == "refused" and "probe/a.jpg" in res["detail"] and "tampered" in res["detail"]


def test_the_size_cap_holds_on_the_local_path(
    packages: dict[str, Path], make_config: Callable[..., Path]
) -> None:
    cfg_path = make_config(extra="[model_update]\nmax_package_mb = 0.1")
    r = cli("model", "install", str(packages["good"]), "-c", str(cfg_path), quiet=False)
    assert r.returncode == 1 and "max_package_mb" in r.stdout, r.stdout + r.stderr


def test_an_extraction_error_is_refused_with_its_true_reason(
    packages: dict[str, Path], make_config: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Today: a disk-full extraction over MQTT is retried and reported as 'the agent died twice'."""

    def full(self: Any, dest: Path) -> None:
        dest.mkdir(parents=True)
        (dest / "partial").write_bytes(b"x")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(package_file.PackageReader, "extract_to", full)
    cfg = load_config(make_config())
    updates = ModelUpdates(cfg, lambda: None)
    updates.inbox.mkdir(parents=True)
    for _ in range(3):  # the same drop, three scans: one verdict, the true one
        shutil.copyfile(packages["good"], updates.inbox / "d.pkg")
        updates.scan_inbox()
        res = json.loads((updates.inbox / "d.result.json").read_text())
        assert "No space left on device" in res["detail"] and "died twice" not in res["detail"]
        assert not (updates.inbox / "d.pkg").exists()
    assert list(updates.store.staging.iterdir()) == []


def test_staging_is_cleaned_of_files_too(make_config: Callable[..., Path]) -> None:
    store = ModelStore(load_config(make_config()).device.state_dir).ensure()
    (store.staging / "escape.onnx").write_bytes(b"x")
    (store.staging / "half.123").mkdir()
    store.clean_staging()
    assert list(store.staging.iterdir()) == []


def test_the_active_pointer_is_written_with_fsync_then_rename(
    make_config: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = ModelStore(load_config(make_config()).device.state_dir).ensure()
    calls: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(durable.os, "fsync", lambda fd: (calls.append("fsync"), real_fsync(fd))[1])
    monkeypatch.setattr(
        durable.os,
        "replace",
        lambda a, b: (calls.append(f"replace {Path(b).name}"), real_replace(a, b))[1],
    )
    store.save(StoreState())
    assert calls == ["fsync", "replace active.json", "fsync"], calls  # data, rename, directory


def test_every_gate_threshold_is_honoured(
    packages: dict[str, Path], make_config: Callable[..., Path]
) -> None:
    cfg = load_config(make_config(extra="[model_update]\nmax_conf_delta = 0.0"))
    res = install(cfg, packages["good"], origin="test")  # INT8 confidences differ a little from FP32
    assert res["outcome"] == "refused" and "mean_abs_conf_delta" in json.dumps(res["gate"]), res["detail"]


# ---- 5. modes and owners --------------------------------------------------------------------
def test_modes_do_not_depend_on_the_umask(
    packages: dict[str, Path], make_config: Callable[..., Path]
) -> None:
    cfg_path = make_config()
    cfg = load_config(cfg_path)
    code = (
        "import os, sys; os.umask(0)\n"
        "from edge_agent.app.cli.configfile import load_config\n"
        "from edge_agent.app.updates.switch import install\n"
        "from edge_agent.app.updates.agent_side import ModelUpdates\n"
        "from edge_agent.adapters.updates.receiver import ModelReceiver\n"
        f"cfg = load_config({str(cfg_path)!r})\n"
        f"assert install(cfg, __import__('pathlib').Path({str(packages['good'])!r}))['outcome'] == 'switched'\n"
        "u = ModelUpdates(cfg, lambda: None); u.start(); u.stop()\n"
        "ModelReceiver(cfg, u.store.root / 'transfers', u.inbox, lambda i: None).load()\n"
        "from edge_agent.adapters.updates.frame_ring import FrameRing; import numpy as np\n"
        "assert FrameRing(u.store.root / 'ring', 3, 1.0, 1.0).offer(np.zeros((8, 8, 3), np.uint8))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    state = Path(cfg.device.state_dir)
    models = state / "models"

    def mode(p: Path) -> int:
        return stat.S_IMODE(p.stat().st_mode)

    assert mode(state) == 0o750 and mode(models) == 0o750
    assert mode(models / "inbox") == 0o700 and mode(models / "transfers") == 0o700
    assert mode(models / "ring") == 0o700  # frames of a site can be personal data
    assert [mode(f) for f in (models / "ring").iterdir()] == [0o600]
    for p in models.rglob("*"):
        assert mode(p) & 0o007 == 0, f"{p} is {oct(mode(p))}: world-accessible under umask 000"
        if p.is_file():
            assert mode(p) & 0o022 == 0, f"{p} is {oct(mode(p))}"


@pytest.mark.skipif(os.geteuid() != 0, reason="making a file owned by another user needs root")
def test_a_package_in_the_inbox_owned_by_another_user_is_refused(
    packages: dict[str, Path], make_config: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = load_config(make_config())
    updates = ModelUpdates(cfg, lambda: None)
    updates.inbox.mkdir(parents=True)
    drop = updates.inbox / "x.pkg"
    shutil.copyfile(packages["good"], drop)
    os.chown(drop, 65534, 65534)  # "nobody" dropped it
    updates.scan_inbox()
    res = json.loads((updates.inbox / "x.result.json").read_text())
    assert res["outcome"] == "refused" and "owned by uid 65534" in res["detail"], res
    assert describe(cfg)["current"]["id"] is None


def test_force_in_a_signed_manifest_is_honoured_and_in_an_unsigned_one_ignored(
    packages: dict[str, Path], models_dir: Path, make_config: Callable[..., Path], tmp_path: Path
) -> None:
    zero = models_dir / "zero-score-int8.onnx"
    signed, unsigned = tmp_path / "zf-signed.pkg", tmp_path / "zf.pkg"
    base = ("model", "pack", str(zero), "--force", "--version", "5.0", "--skip-guard")
    signed_for = ("--sign", str(packages["key"]), "--for-device", "cam-2")
    assert cli(*base, "-o", str(signed), *signed_for, quiet=False).returncode == 0
    r = cli(*base, "-o", str(unsigned), quiet=False)
    assert r.returncode == 0 and "devices ignore force in an unsigned manifest" in r.stderr
    res = install(load_config(make_config()), unsigned, origin="test")
    assert res["outcome"] == "refused" and "broken-model guard" in res["detail"]
    cfg = load_config(make_config(extra=_keys(_pub(packages)), device="cam-2"))
    res = install(cfg, signed, origin="mqtt:x", require_signature=True)
    assert res["outcome"] == "switched" and "(forced)" in res["detail"], res["detail"]


def test_the_bundled_samples_give_no_verdict_for_a_model_that_is_not_the_demo(
    packages: dict[str, Path], make_config: Callable[..., Path], tmp_path: Path
) -> None:
    """Issue 22: a COCO model 'passed' on two spurious detections on the bundled shapes. Any
    detector other than the demo one (here: the demo FP32 with one metadata entry added, so its
    hash differs) gets no bundled-sample gate: no ring, no probe -> refused, saying so."""
    import onnx
    from support.updates import FP32

    model = onnx.load(str(FP32))
    entry = model.metadata_props.add()
    entry.key, entry.value = "site", "not-the-demo"
    other = tmp_path / "site-detector.onnx"
    onnx.save(model, str(other))
    cfg_path = make_config()
    cfg_path.write_text(cfg_path.read_text().replace(f'model = "{FP32}"', f'model = "{other}"'))
    res = install(load_config(cfg_path), packages["good"], origin="test")
    assert res["outcome"] == "refused" and "no verdict: no gate images" in res["detail"], res["detail"]
    assert res["gate"]["source"] == "none"
    # with probe images in the package the gate has something to judge on
    probe = tmp_path / "probe"
    probe.mkdir()
    for f in sorted(SAMPLES.glob("*.jpg"))[:4]:
        shutil.copyfile(f, probe / f.name)
    pkg = tmp_path / "with-probe.pkg"
    assert cli("model", "pack", str(INT8), "-o", str(pkg), "--probe", str(probe), quiet=False).returncode == 0
    res = install(load_config(cfg_path), pkg, origin="test")
    assert res["gate"]["source"] == "probe" and res["outcome"] == "switched", res["detail"]
