"""Model-update test helpers: the zero-score INT8 maker, the demo models' config (``write_config``,
written by ``support.world.agent_toml``) and in-process packages; the agent subprocess is
``support.world.AgentProc`` (re-exported here), the CLI runner ``support.cli``."""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path
from typing import Any, Optional

import numpy as np
import onnx
from onnx import helper, numpy_helper

from support.world import AgentProc as AgentProc  # the one agent subprocess, re-exported
from support.world import agent_toml, broker_section

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
    """``root/DEVICE.toml``: the demo detector on the sample folder, state in ``root/state-DEVICE``;
    the broker on ``port`` (default host) or none."""
    cfg = root / f"{device}.toml"
    mqtt = {**broker_section(port or 1883), "host": None, "enabled": bool(port)}
    cfg.write_text(
        agent_toml(
            root / f"state-{device}",
            SAMPLES,
            FP32,
            extra=extra,
            device={"id": device},
            camera={"loop": loop, "interval_s": 0.05},
            mqtt=mqtt,
        )
    )
    return cfg


def keys(packages: dict[str, Path]) -> str:
    """The config lines that turn MQTT delivery on: it is off without a trusted key
    (``packages["pub"]``, the public key of the ``packages`` fixture)."""
    return f'[model_update]\ntrusted_keys = ["{packages["pub"].read_text().strip()}"]'


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
    from edge_agent.adapters.updates import signing
    from edge_agent.adapters.updates.package_file import describe_file, write_package
    from edge_agent.core.updates.package import Manifest

    sources = {"detector.onnx": detector}
    files = {"detector": describe_file(detector, "detector.onnx")}
    for role, path in (("classifier", classifier), ("float_source", float_source)):
        if path is not None:
            sources[f"{role}.onnx"] = path
            files[role] = describe_file(path, f"{role}.onnx")
    for p in probe or []:
        sources[f"probe/{p.name}"] = p
    manifest.setdefault("for_devices", [f"cam-{i}" for i in range(1, 5)])
    manifest.setdefault("for_groups", ["fleet-a"])
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
    key = signature_key
    write_package(out, m, sources, signer=(lambda data: signing.sign(data, key)) if key else None)
    return out


def signed_begin(
    key: Path, body: bytes, tid: str = "t1", chunk: int = 1024, **manifest: Any
) -> tuple[bytes, list[bytes]]:
    """A begin carrying a manifest signed by ``key`` whose transfer plan covers ``body`` (any bytes:
    the receiver checks the plan, the install the package), and the chunks of ``body``."""
    import hashlib

    from edge_agent.adapters.updates import signing
    from edge_agent.core.updates.binding import SignedBegin
    from edge_agent.core.updates.package import Manifest, PackageFile, manifest_bytes
    from edge_agent.core.updates.plan import TransferPlan

    chunks = [body[i : i + chunk] for i in range(0, len(body), chunk)]
    plan = TransferPlan(
        size=len(body), chunk_size=chunk, chunks=[hashlib.sha256(c).hexdigest() for c in chunks]
    )
    fields: dict[str, Any] = {
        "name": "demo",
        "version": "9.0",
        "created_at": "2026-11-30T00:00:00Z",
        "files": {"detector": PackageFile(path="detector.onnx", sha256="0" * 64, size=len(body))},
        "for_devices": ["cam-1"],
        "transfer": plan,
        **manifest,
    }
    data = manifest_bytes(Manifest(**fields))
    return SignedBegin(tid, data, signing.sign(data, key)).to_json(), chunks


@functools.lru_cache(maxsize=1)
def trusted_key() -> tuple[Path, str]:
    """A signing key for receiver tests made once per process (its file, its public key)."""
    from edge_agent.adapters.updates import signing

    path = Path(tempfile.mkdtemp(prefix="edge-test-key-")) / "signing.key"
    return path, signing.generate_key(path)


def with_keys(extra: str = "", pub: Optional[str] = None) -> str:
    """``extra`` config with ``trusted_key()`` (or ``pub``) trusted, in its [model_update] table."""
    line = f'trusted_keys = ["{pub or trusted_key()[1]}"]'
    if "[model_update]" in extra:
        return extra.replace("[model_update]", f"[model_update]\n{line}", 1)
    return f"{extra}\n[model_update]\n{line}\n"


def make_begin(body: bytes, tid: str = "t1", chunk: int = 1024, **manifest: Any) -> bytes:
    """:func:`signed_begin` with :func:`trusted_key`."""
    return signed_begin(trusted_key()[0], body, tid, chunk, **manifest)[0]


def inbox_body(pkg: Path, body: bytes) -> bool:
    """The assembled package holds ``body`` and then the tar members of the signed manifest."""
    data = pkg.read_bytes()
    return data[: len(body)] == body and b"manifest.json" in data[len(body) : len(body) + 512]


def packed(d: Path, targets: dict[str, list[str]]) -> tuple[dict[str, Path], str]:
    """The INT8 demo packed in process (version 2.5, name demo) once per entry of ``targets`` (its
    --for-group / --for-device arguments), all signed by one fresh key made in ``d``: the packages
    by name (``d/NAME.pkg``) and the public key."""
    from edge_agent.adapters.updates import signing
    from edge_agent.app.cli.main import main

    key = d / "signing.key"
    pub = signing.generate_key(key)
    args = ["-q", "model", "pack", str(INT8), "--sign", str(key), "--version", "2.5", "--name", "demo"]
    out: dict[str, Path] = {}
    for name, target in targets.items():
        out[name] = d / f"{name}.pkg"
        assert main([*args, *target, "-o", str(out[name])]) == 0
    return out, pub
