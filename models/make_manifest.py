"""Keep models/MANIFEST.json in step with the files: sha256, sizes, I/O shapes, provenance, metrics.

python models/make_manifest.py           # recompute hashes/sizes/shapes (keeps provenance, metrics)
python models/make_manifest.py --check   # exit 1 when a file no longer matches the manifest
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
MODELS = {"demo-detector": "detect", "demo-classifier": "classify"}
ARCH = {
    "demo-detector": "TinyDet (models/demo_nets.py): Conv-BN-SiLU backbone, top-down neck, strides 8/16/32, "
    "decoupled heads, DFL reg_max 8, YOLOv8 TAL assignment + CIoU/BCE/DFL loss; "
    "Ultralytics-compatible export tail (DFL -> dist2bbox -> sigmoid -> Concat)",
    "demo-classifier": "TinyCls (models/demo_nets.py): 4 stride-2 Conv-BN-SiLU stages with residual blocks, "
    "global average pool, linear; logits over fill patterns",
}
DATA_DIRS = ("data/calib", "data/calib-cls", "data/heldout", "data/heldout-cls", "samples")


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _io(path: Path) -> dict[str, Any]:
    import onnx  # tooling dependency, only needed when an ONNX file is (re)described

    graph = onnx.load(str(path), load_external_data=False).graph

    def shape(v: Any) -> list[int | str]:
        return [d.dim_param if d.dim_param else d.dim_value for d in v.type.tensor_type.shape.dim]

    params = 0
    for init in graph.initializer:
        n = 1
        for d in init.dims:
            n *= d
        params += n
    return {
        "inputs": [{"name": v.name, "shape": shape(v)} for v in graph.input],
        "outputs": [{"name": v.name, "shape": shape(v)} for v in graph.output],
        "stored_values": params,
    }


def dir_digest(root: Path, rel: str) -> dict[str, Any]:
    """One sha256 over the sorted (relative path, file sha256) list: any added/changed file shows."""
    base = root / rel
    files = sorted(p for p in base.rglob("*") if p.is_file())
    h = hashlib.sha256()
    for p in files:
        h.update(f"{p.relative_to(base).as_posix()} {sha256(p)}\n".encode())
    return {"files": len(files), "bytes": sum(p.stat().st_size for p in files), "sha256": h.hexdigest()}


def describe(root: Path, shapes: bool = True) -> dict[str, Any]:
    """What the files on disk are now (hashes, sizes, shapes), without provenance or metrics.

    ``shapes=False`` only hashes, so a check also reports files too damaged to parse.
    """
    models: dict[str, Any] = {}
    for stem in MODELS:
        files: dict[str, Any] = {}
        for kind, name in (("fp32", f"{stem}.onnx"), ("int8", f"{stem}-int8.onnx")):
            path = root / name
            files[kind] = (
                None
                if not path.exists()
                else {
                    "path": name,
                    "sha256": sha256(path),
                    "size": path.stat().st_size,
                    **(_io(path) if shapes else {}),
                }
            )
        models[stem] = files
    data = {rel: dir_digest(root, rel) for rel in DATA_DIRS if (root / rel).is_dir()}
    return {"models": models, "data": data}


def _dumps(obj: dict[str, Any]) -> str:
    """Indented JSON with innermost lists (shapes, metric rows) kept on one line for reading."""
    text = json.dumps(obj, indent=2)
    return (
        re.sub(
            r"\[\s+([^\[\]{}]*?)\s+\]",
            lambda m: "[" + ", ".join(p.strip() for p in m.group(1).split(",")) + "]",
            text,
        )
        + "\n"
    )


def update_manifest(
    root: Path = HERE,
    made: dict[str, dict[str, Any]] | None = None,
    metrics: dict[str, dict[str, Any]] | None = None,
    int8_made: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Rewrite root/MANIFEST.json: fresh hashes; provenance/metrics replaced only where given."""
    path = root / "MANIFEST.json"
    old: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    now = describe(root)
    out: dict[str, Any] = {
        "license": "Apache-2.0",
        "note": "Trained from scratch by models/train_demo.py on synthetic scenes from models/synth.py; "
        "no third-party weights or data. Metrics are on models/data/heldout (detector, COCO-style "
        "mAP, conf 0.001, NMS IoU 0.7) and models/data/heldout-cls (classifier top-1).",
        "models": {},
        "data": now["data"],
    }
    for stem, task in MODELS.items():
        prev = old.get("models", {}).get(stem, {})
        entry: dict[str, Any] = {"task": task, "architecture": ARCH[stem], "files": now["models"][stem]}
        entry["made"] = (made or {}).get(f"{stem}.onnx", prev.get("made"))
        prev_metrics = prev.get("metrics", {"fp32": None, "int8": None})
        new_metrics = {
            "fp32": (metrics or {}).get(f"{stem}.onnx", prev_metrics.get("fp32")),
            "int8": (metrics or {}).get(f"{stem}-int8.onnx", prev_metrics.get("int8")),
        }
        if now["models"][stem]["int8"] is None:
            new_metrics["int8"] = None
        entry["metrics"] = new_metrics
        made8 = (int8_made or {}).get(f"{stem}-int8.onnx", prev.get("int8_made"))
        entry["int8_made"] = made8 if now["models"][stem]["int8"] is not None else None
        out["models"][stem] = entry
    path.write_text(_dumps(out))
    return out


def check(root: Path = HERE) -> list[str]:
    """Differences between MANIFEST.json and the files (empty list: everything matches)."""
    manifest = json.loads((root / "MANIFEST.json").read_text())
    now = describe(root, shapes=False)
    problems = []
    for stem, files in now["models"].items():
        for kind, desc in files.items():
            listed = manifest["models"][stem]["files"][kind]
            if (desc is None) != (listed is None) or (desc and listed and desc["sha256"] != listed["sha256"]):
                problems.append(f"{stem} {kind}: file and manifest differ")
    for rel, desc in now["data"].items():
        if manifest["data"].get(rel, {}).get("sha256") != desc["sha256"]:
            problems.append(f"{rel}: content differs from manifest")
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="only compare, exit 1 on any difference")
    ap.add_argument("--root", type=Path, default=HERE)
    args = ap.parse_args(argv)
    if args.check:
        problems = check(args.root)
        for p in problems:
            print(p, file=sys.stderr)
        return 1 if problems else 0
    update_manifest(args.root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
