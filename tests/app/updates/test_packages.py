"""Packages, signatures, the gate and the store without a running agent (CLI install offline)."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path
from typing import Callable

import pytest
from support import cli
from support.updates import FP32

from edge_agent.adapters.updates.package_file import PackageReader
from edge_agent.app.cli.configfile import load_config
from edge_agent.app.updates.switch import describe, install, rollback
from edge_agent.core.updates.package import missing_ranges, parse_manifest, rate_collapsed, version_tuple
from edge_agent.errors import ModelError


def test_pack_writes_a_manifest_with_hashes_labels_and_versions(packages: dict[str, Path]) -> None:
    with PackageReader(packages["good"]) as r:
        m = r.manifest
        assert r.signature is None
    assert m.name == "demo" and m.version == "2.0+good" and m.task == "detect"
    assert len(m.files["detector"].sha256) == 64 and m.created_at.endswith("Z")
    assert m.labels["detector"]  # class names from the ONNX metadata
    assert version_tuple(m.min_agent_version) >= (0, 1)


def test_manifest_errors_name_the_field() -> None:
    with pytest.raises(ModelError, match="field name"):
        parse_manifest(b'{"name": "a b", "version": "1", "created_at": "x", "files": {}}', "p.pkg")
    with pytest.raises(ModelError, match="no 'detector'"):
        parse_manifest(b'{"name": "a", "version": "1", "created_at": "x", "files": {}}', "p.pkg")
    with pytest.raises(ModelError, match="not JSON"):
        parse_manifest(b"{", "p.pkg")


def test_chunk_ranges_and_collapse_rule() -> None:
    assert missing_ranges({0, 1, 4}, 7) == [[2, 3], [5, 6]]
    assert missing_ranges(set(range(3)), 3) == []
    assert rate_collapsed(3.0, 0.1, 30, 30, 0.2)
    assert not rate_collapsed(3.0, 0.1, 29, 30, 0.2)  # too early to judge
    assert not rate_collapsed(0.2, 0.0, 100, 30, 0.2)  # the old model rarely saw anything
    assert not rate_collapsed(3.0, 2.5, 100, 30, 0.2)


def test_good_int8_switches_and_rollback_returns(
    packages: dict[str, Path], make_config: Callable[..., Path]
) -> None:
    cfg_path = make_config()
    r = cli("model", "install", str(packages["good"]), "-c", str(cfg_path), quiet=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("switched: gate on 6 bundled-probe images")
    cfg = load_config(cfg_path)
    info = describe(cfg)
    assert info["current"]["version"] == "2.0+good"
    assert info["trial"]["running"] is False  # picked up (and put on trial) at the next start
    r = cli("model", "rollback", "-c", str(cfg_path), quiet=False)
    assert r.returncode == 0 and "rolled_back" in r.stdout
    assert describe(cfg)["current"]["id"] is None
    assert rollback(cfg, "again")["outcome"] == "refused"  # nothing left to roll back


def test_zero_score_int8_is_refused_with_the_numbers(
    packages: dict[str, Path], make_config: Callable[..., Path]
) -> None:
    cfg_path = make_config()
    r = cli("model", "install", str(packages["zero"]), "-c", str(cfg_path), quiet=False)
    assert r.returncode == 1
    assert "refused" in r.stdout and "broken-model guard" in r.stdout
    assert "recall_of_reference    0.0" in r.stdout and "candidate max score 0.0" in r.stdout
    cfg = load_config(cfg_path)
    assert describe(cfg)["current"]["id"] is None  # the config's model still runs
    versions = Path(cfg.device.state_dir) / "models" / "versions"
    assert list(versions.iterdir()) == []  # the refused candidate is not kept


def test_force_switches_past_the_gate_and_is_recorded(
    packages: dict[str, Path], make_config: Callable[..., Path]
) -> None:
    cfg = load_config(make_config())
    res = install(cfg, packages["zero"], force=True, origin="test")
    assert res["outcome"] == "switched" and "(forced)" in res["detail"]
    assert describe(cfg)["trial"]["forced"] is True


def test_signatures(packages: dict[str, Path], make_config: Callable[..., Path]) -> None:
    pub = packages["pub"].read_text().strip()
    cfg = load_config(make_config(extra=f'[model_update]\ntrusted_keys = ["{pub}"]'))
    bad = install(cfg, packages["badsig"], origin="test")
    assert bad["outcome"] == "refused" and "bad signature" in bad["detail"]
    unsigned = install(cfg, packages["good"], origin="test")
    assert unsigned["outcome"] == "refused" and "unsigned" in unsigned["detail"]
    ok = install(cfg, packages["signed"], origin="test")
    assert ok["outcome"] == "switched" and ok["signed_by_key"] == 0


def test_a_tampered_model_file_is_refused(
    packages: dict[str, Path], make_config: Callable[..., Path], tmp_path: Path
) -> None:
    """Same manifest (and so the same valid signature), different bytes in detector.onnx."""
    src = packages["signed"]
    out = tmp_path / "tampered.pkg"
    with tarfile.open(src) as tin, tarfile.open(out, "w") as tout:
        for m in tin.getmembers():
            data = tin.extractfile(m).read()  # type: ignore[union-attr]
            if m.name == "detector.onnx":
                data = data[:-64] + bytes(64)
            m.size = len(data)
            tout.addfile(m, io.BytesIO(data))
    pub = packages["pub"].read_text().strip()
    cfg = load_config(make_config(extra=f'[model_update]\ntrusted_keys = ["{pub}"]'))
    res = install(cfg, out, origin="test")
    assert res["outcome"] == "refused" and "corrupt or tampered" in res["detail"]


def test_gate_uses_the_frame_ring_when_it_has_frames(
    packages: dict[str, Path], make_config: Callable[..., Path]
) -> None:
    import cv2

    cfg = load_config(make_config(extra="[model_update]\nring_frames = 4\nring_interval_s = 1"))
    from edge_agent.adapters.updates.frame_ring import FrameRing

    ring = FrameRing(Path(cfg.device.state_dir) / "models" / "ring", 4, 1.0, 1.0)
    samples = sorted((FP32.parent / "samples").glob("*.jpg"))
    for i, s in enumerate(samples):
        assert ring.offer(cv2.imread(str(s)), now=1e9 + 10 * i)
    assert len(ring.files(now=1e9 + 60)) == 4  # bounded by count
    assert ring.files(now=1e9 + 3600 * 2) == []  # and by age
    import time

    for i, s in enumerate(samples[:3]):
        assert ring.offer(cv2.imread(str(s)), now=time.time() + 2 * i)
    res = install(cfg, packages["good"], origin="test")
    assert res["outcome"] == "switched", res["detail"]
    assert res["gate"]["source"] == "ring" and res["gate"]["images"] == 3


def test_pointer_is_json_and_names_a_complete_version(
    packages: dict[str, Path], make_config: Callable[..., Path]
) -> None:
    cfg = load_config(make_config())
    install(cfg, packages["good"], origin="test")
    root = Path(cfg.device.state_dir) / "models"
    state = json.loads((root / "active.json").read_text())
    vdir = root / "versions" / state["current"]
    assert (vdir / "manifest.json").is_file() and (vdir / "detector.onnx").is_file()
    assert list((root / "staging").iterdir()) == []


def test_detector_and_classifier_package_gates_both(make_config: Callable[..., Path], tmp_path: Path) -> None:
    from support.updates import MODELS

    pkg = tmp_path / "cascade.pkg"
    r = cli(
        "model",
        "pack",
        str(MODELS / "demo-detector-int8.onnx"),
        "--classifier",
        str(MODELS / "demo-classifier-int8.onnx"),
        "-o",
        str(pkg),
        "--version",
        "3",
        quiet=False,
    )
    assert r.returncode == 0, r.stderr
    cfg_path = make_config()
    cfg_path.write_text(cfg_path.read_text() + f'[classifier]\nmodel = "{MODELS / "demo-classifier.onnx"}"\n')
    cfg = load_config(cfg_path)
    res = install(cfg, pkg, origin="test")
    assert res["outcome"] == "switched", res["detail"]
    checks = {c["name"]: c for c in res["gate"]["classifier"]["checks"]}
    assert checks["top1_agreement"]["passed"]
    from edge_agent.app.updates.switch import effective_config, store_for

    eff = effective_config(cfg, describe(cfg)["current"]["id"], store_for(cfg))
    assert eff.classifier is not None and eff.classifier.model.endswith("classifier.onnx")
    assert eff.classifier.labels is not None  # names from the package's manifest


def test_inbox_drop_is_installed_and_answered(
    packages: dict[str, Path], make_config: Callable[..., Path]
) -> None:
    """The watched folder without a running loop: the worker's scan installs and writes a result."""
    import shutil

    from edge_agent.app.updates.agent_side import ModelUpdates

    cfg = load_config(make_config())
    up = ModelUpdates(cfg, lambda: None)
    up.inbox.mkdir(parents=True)
    shutil.copyfile(packages["good"], up.inbox / "new.pkg")
    crashed = up.inbox / "crashy.pkg"
    shutil.copyfile(packages["good"], crashed)
    (up.inbox / "crashy.request.json").write_text('{"attempts": 2}')  # it killed the agent twice
    up.scan_inbox()
    res = json.loads((up.inbox / "new.result.json").read_text())
    assert res["outcome"] == "switched" and res["origin"] == "inbox:new.pkg"
    res = json.loads((up.inbox / "crashy.result.json").read_text())
    assert res["outcome"] == "refused" and "died twice" in res["detail"]
    assert list(up.inbox.glob("*.pkg")) == []


def test_float_source_and_min_agent_version(make_config: Callable[..., Path], tmp_path: Path) -> None:
    from support.updates import INT8

    from edge_agent.app.updates.switch import effective_config, store_for

    pkg = tmp_path / "trt.pkg"
    r = cli(
        "model", "pack", str(INT8), "--float-source", str(FP32), "-o", str(pkg), "--version", "4", quiet=False
    )
    assert r.returncode == 0, r.stderr
    cfg = load_config(make_config())
    assert install(cfg, pkg, origin="test")["outcome"] == "switched"
    eff = effective_config(cfg, describe(cfg)["current"]["id"], store_for(cfg))
    assert eff.detector.float_model is not None and eff.detector.float_model.endswith("float_source.onnx")
    future = tmp_path / "future.pkg"
    r = cli(
        "model",
        "pack",
        str(INT8),
        "-o",
        str(future),
        "--version",
        "5",
        "--min-agent-version",
        "99.0",
        quiet=False,
    )
    assert r.returncode == 0, r.stderr
    res = install(cfg, future, origin="test")
    assert res["outcome"] == "refused" and "needs edge-agent >= 99.0" in res["detail"]


def test_a_clean_stop_mid_install_is_not_counted_as_a_crash(make_config: Callable[..., Path]) -> None:
    from edge_agent.app.updates.agent_side import ModelUpdates

    cfg = load_config(make_config())
    up = ModelUpdates(cfg, lambda: None)
    up.inbox.mkdir(parents=True)
    req = up.inbox / "x.request.json"
    req.write_text('{"attempts": 1, "origin": "cli"}')
    up._in_progress = req  # what _take sets while the gate runs
    up.stop()
    assert json.loads(req.read_text())["attempts"] == 0


def test_an_automatic_rollback_never_hits_a_newer_install(
    packages: dict[str, Path], make_config: Callable[..., Path]
) -> None:
    cfg = load_config(make_config())
    assert install(cfg, packages["good"], origin="test")["outcome"] == "switched"
    res = rollback(cfg, "collapse of an older version", origin="agent", only_if_current="demo-1.0-00000000")
    assert res["outcome"] == "unchanged"
    assert describe(cfg)["current"]["version"] == "2.0+good"


def test_nothing_to_compare_is_refused(
    packages: dict[str, Path], make_config: Callable[..., Path], tmp_path: Path
) -> None:
    """Gate images on which the current model finds nothing (blank frames in the ring): no verdict
    is no pass."""
    import time

    import numpy as np

    from edge_agent.adapters.updates.frame_ring import FrameRing

    cfg = load_config(make_config(extra="[model_update]\nring_frames = 3\nring_interval_s = 1"))
    ring = FrameRing(Path(cfg.device.state_dir) / "models" / "ring", 3, 1.0, 1.0)
    for i in range(3):
        assert ring.offer(np.zeros((120, 160, 3), np.uint8), now=time.time() - 10 + i * 2)
    res = install(cfg, packages["good"], origin="test")
    assert res["outcome"] == "refused" and "nothing to compare" in res["detail"], res["detail"]
    assert describe(cfg)["current"]["id"] is None


def test_a_package_this_onnxruntime_cannot_load_is_refused_before_the_gate(
    make_config: Callable[..., Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import onnx
    from support.toolchain import toy_detector_model
    from support.updates import INT8

    from edge_agent.app.updates import switch as model_switch

    nano = tmp_path / "nano.pkg"
    assert cli("model", "pack", str(INT8), "-o", str(nano), "--version", "6", quiet=False).returncode == 0
    with PackageReader(nano) as r:
        assert r.manifest.min_onnxruntime == "1.11"  # the bundled demo INT8 loads on a Jetson Nano
    new = tmp_path / "opset20.onnx"
    onnx.save(toy_detector_model(opset=20), str(new))
    pkg = tmp_path / "new.pkg"
    r = cli("model", "pack", str(new), "-o", str(pkg), "--version", "7", quiet=False)
    assert r.returncode == 0, r.stderr
    with PackageReader(pkg) as rd:
        assert rd.manifest.min_onnxruntime == "1.17"  # IR 9, opset 20
    cfg = load_config(make_config())
    monkeypatch.setattr(model_switch, "_ort_version", lambda: "1.11.1")
    staged = list(model_switch.store_for(cfg).root.rglob("*.onnx"))
    res = install(cfg, pkg, origin="test")
    assert res["outcome"] == "refused"
    assert (
        "need onnxruntime >= 1.17, this device has 1.11.1" in res["detail"]
        and "--target-ort 1.11.1" in res["detail"]
    )
    assert list(model_switch.store_for(cfg).root.rglob("*.onnx")) == staged  # nothing staged, no gate run
