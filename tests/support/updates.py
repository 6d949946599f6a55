"""Model-update test helpers: the zero-score INT8 maker, a config writer, an agent subprocess
(`edge-agent run`) to start, kill -9 and read; the CLI runner is `support.cli`."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, Optional

import numpy as np
import onnx
from onnx import helper, numpy_helper

from edge_agent.app.configfile import load_config
from support import wait_until

REPO = Path(__file__).resolve().parents[2]
MODELS = REPO / "models"
FP32 = MODELS / "demo-detector.onnx"
INT8 = MODELS / "demo-detector-int8.onnx"
SAMPLES = MODELS / "samples"


def make_zero_score(src: Path, out: Path) -> Path:
    """The classic broken INT8 detector: its output goes through a QDQ pair with scale 8.0, so every
    class score (0..1) rounds to 0 while the boxes (pixels) survive on an 8-px grid."""
    model = onnx.load(str(src))
    g = model.graph
    name = g.output[0].name
    inner = f"{name}_float"
    for node in g.node:
        for i, o in enumerate(node.output):
            if o == name:
                node.output[i] = inner
    g.initializer.extend(
        [
            numpy_helper.from_array(np.array(8.0, np.float32), "zs_scale"),
            numpy_helper.from_array(np.array(0, np.uint8), "zs_zero"),
        ]
    )
    g.node.extend(
        [
            helper.make_node("QuantizeLinear", [inner, "zs_scale", "zs_zero"], ["zs_q"]),
            helper.make_node("DequantizeLinear", ["zs_q", "zs_scale", "zs_zero"], [name]),
        ]
    )
    onnx.checker.check_model(model)
    onnx.save(model, str(out))
    return out


def write_config(
    root: Path, *, port: int = 0, extra: str = "", device: str = "cam-1", loop: bool = True
) -> Path:
    cfg = root / f"{device}.toml"
    state = root / f"state-{device}"
    cfg.write_text(
        f"""
[device]
id = "{device}"
state_dir = "{state}"
[camera]
source = "{SAMPLES}"
loop = {str(loop).lower()}
interval_s = 0.05
[detector]
model = "{FP32}"
[mqtt]
enabled = {str(bool(port)).lower()}
port = {port or 1883}
status_interval_s = 1.0
reconnect_min_s = 0.2
reconnect_max_s = 1.0
[queue]
path = "{state}/outbox.db"
[output]
mode = "every_frame"
[health]
status_file = "{state}/status.json"
{extra}
"""
    )
    return cfg


def make_dim_scores(src: Path, out: Path, factor: float = 0.1) -> Path:
    """A detector whose class scores are multiplied by ``factor``: it loads, passes the guard (its
    scores are small, not zero) and finds almost nothing at conf 0.25 -- a detection-rate collapse."""
    model = onnx.load(str(src))
    g = model.graph
    name = g.output[0].name
    dims = [d.dim_value for d in g.output[0].type.tensor_type.shape.dim]  # [1, 4+nc, N]
    inner = f"{name}_undimmed"
    for node in g.node:
        for i, o in enumerate(node.output):
            if o == name:
                node.output[i] = inner
    scale = np.ones((1, dims[1], 1), np.float32)
    scale[:, 4:] = factor
    g.initializer.append(numpy_helper.from_array(scale, "dim_scale"))
    g.node.append(helper.make_node("Mul", [inner, "dim_scale"], [name]))
    onnx.checker.check_model(model)
    onnx.save(model, str(out))
    return out


class AgentProc:
    def __init__(self, cfg: Path) -> None:
        self.cfg_path = cfg
        self.cfg = load_config(cfg)
        self.state = Path(self.cfg.device.state_dir)
        self.log = cfg.with_suffix(".log")
        self.proc: Optional[subprocess.Popen[bytes]] = None

    def start(self) -> AgentProc:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "edge_agent", "run", "-c", str(self.cfg_path)], stdout=out, stderr=out
            )
        wait_until(
            lambda: (self.status() or {}).get("frames", 0) > 0,
            what=lambda: f"agent running\n{self.log_text()}",
        )
        return self

    def status(self) -> Optional[dict[str, Any]]:
        try:
            data: dict[str, Any] = json.loads((self.state / "status.json").read_text())
        except (OSError, ValueError):
            return None
        return data if data.get("state") == "running" and self.proc and self.proc.poll() is None else None

    def detector_sha(self) -> Optional[str]:
        s = self.status()
        return s["models"]["detector"]["sha256"] if s and s.get("models") else None

    def last(self) -> dict[str, Any]:
        try:
            return dict(json.loads((self.state / "models" / "active.json").read_text()).get("last") or {})
        except FileNotFoundError:
            return {}

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        (self.state / "status.json").unlink(missing_ok=True)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        (self.state / "status.json").unlink(missing_ok=True)

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


def pack_in_process(
    out: Path,
    detector: Path,
    *,
    version: str = "1.0",
    name: str = "demo",
    probe: Optional[list[Path]] = None,
    signature_key: Optional[Path] = None,
    force: bool = False,
    classifier: Optional[Path] = None,
    float_source: Optional[Path] = None,
    labels: Optional[dict[str, list[str]]] = None,
    **manifest: Any,
) -> Path:
    """A package written in this process (``write_package``, as `model pack` does, without its
    model checks): mutmut credits only in-process calls, and the subprocess pack costs seconds."""
    from edge_agent.adapters import signing
    from edge_agent.adapters.package_file import describe_file, write_package
    from edge_agent.core.model_package import Manifest, manifest_bytes

    sources = {"detector.onnx": detector}
    files = {"detector": describe_file(detector, "detector.onnx")}
    for role, path in (("classifier", classifier), ("float_source", float_source)):
        if path is not None:
            sources[f"{role}.onnx"] = path
            files[role] = describe_file(path, f"{role}.onnx")
    for p in probe or []:
        sources[f"probe/{p.name}"] = p
    m = Manifest(
        name=name,
        version=version,
        task="detect+classify" if classifier is not None else "detect",
        created_at="2026-11-30T00:00:00Z",
        files=files,
        labels=labels or {},
        probe=[describe_file(p, f"probe/{p.name}") for p in probe or []],
        force=force,
        **manifest,
    )
    sig = signing.sign(manifest_bytes(m), signature_key) if signature_key else None
    write_package(out, m, sources, sig)
    return out
