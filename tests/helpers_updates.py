"""Model-update test helpers: the zero-score INT8 maker, the CLI runner, a config writer."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

REPO = Path(__file__).resolve().parents[1]
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


def cli(*args: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "edge_agent", *args], capture_output=True, text=True, timeout=timeout
    )


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
