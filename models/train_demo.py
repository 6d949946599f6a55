"""Train, export and evaluate edge-agent's own demo models (Apache-2.0; no Ultralytics code or weights).

    python models/train_demo.py --threads 1   # data, both models, samples, metrics, MANIFEST (~11 min)
    python models/train_demo.py --quick       # smoke run into /tmp (does not touch the committed files)
    python models/train_demo.py detector      # one step only: data|detector|classifier|samples|manifest
    python models/train_demo.py quantize      # INT8 copies via `edge-agent quantize`, then metrics again
    python models/train_demo.py eval          # recompute held-out metrics of whatever ONNX files exist

Dev tooling only: needs torch (CPU) and onnx; the agent itself never imports this.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import onnx
import torch
from demo_data import (
    CLASS_NAMES,
    CLS_SIZE,
    CROP_MARGIN,
    FILL_NAMES,
    SEEDS,
    class_names_literal,
    classifier_pool,
    detector_pool,
    write_datasets,
    write_samples,
)
from demo_eval import eval_classifier, eval_detector
from demo_nets import REG_MAX, STRIDES, TinyCls, TinyDet, detector_loss, fuse_bn
from make_manifest import update_manifest

HERE = Path(__file__).resolve().parent
SEED = 20260
IMGSZ = 160
VERSION = "1.0.0"
CLS_MEAN = [0.485, 0.456, 0.406]
CLS_STD = [0.229, 0.224, 0.225]
FULL = {
    "det_scenes": 5000,
    "det_epochs": 8,
    "det_batch": 32,
    "cls_scenes": 4000,
    "cls_epochs": 18,
    "cls_batch": 128,
}
QUICK = {
    "det_scenes": 256,
    "det_epochs": 1,
    "det_batch": 32,
    "cls_scenes": 120,
    "cls_epochs": 1,
    "cls_batch": 64,
}


def dihedral(x: torch.Tensor, boxes: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """One of the 8 flips/transposes of a square batch [B,3,S,S] with its xyxy boxes (labels invariant)."""
    s = x.shape[-1]
    b = boxes.clone()
    if k & 1:  # horizontal flip
        x = x.flip(-1)
        b[..., 0], b[..., 2] = s - boxes[..., 2], s - boxes[..., 0]
    if k & 2:  # vertical flip
        x = x.flip(-2)
        b1, b3 = b[..., 1].clone(), b[..., 3].clone()
        b[..., 1], b[..., 3] = s - b3, s - b1
    if k & 4:  # transpose
        x = x.transpose(-1, -2)
        b = b[..., [1, 0, 3, 2]]
    return x, b


def lr_at(step: int, total: int, base: float, warmup: int) -> float:
    if step < warmup:
        return base * (step + 1) / warmup
    return base * (0.02 + 0.98 * 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, total - warmup))))


def train_detector(cfg: dict[str, int], log: dict[str, object]) -> TinyDet:
    t0 = time.time()
    images, boxes, classes = detector_pool(cfg["det_scenes"], SEEDS["det_train"], IMGSZ)
    print(f"detector pool: {len(images)} scenes in {time.time() - t0:.0f}s", flush=True)
    torch.manual_seed(SEED)  # per model, so either one can be retrained alone with the same result
    model = TinyDet(len(CLASS_NAMES), IMGSZ)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=5e-4)
    gen = np.random.default_rng(SEED)
    steps_per_epoch = len(images) // cfg["det_batch"]
    total = steps_per_epoch * cfg["det_epochs"]
    step = 0
    t1 = time.time()
    for epoch in range(cfg["det_epochs"]):
        order = gen.permutation(len(images))
        running = torch.zeros(3)
        model.train()
        for s in range(steps_per_epoch):
            idx = np.sort(order[s * cfg["det_batch"] : (s + 1) * cfg["det_batch"]])
            x = torch.from_numpy(images[idx]).permute(0, 3, 1, 2).float() / 255.0
            gb = torch.from_numpy(boxes[idx])
            gc = torch.from_numpy(classes[idx])
            x, gb = dihedral(x, gb, int(gen.integers(0, 8)))
            for g in opt.param_groups:
                g["lr"] = lr_at(step, total, 3e-3, 150)
            loss, parts = detector_loss(model, model.levels(x), gb, gc, gc >= 0)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 10.0)
            opt.step()
            running += parts
            step += 1
        r = (running / steps_per_epoch).tolist()
        print(
            f"det epoch {epoch + 1}/{cfg['det_epochs']} box {r[0]:.3f} cls {r[1]:.3f} dfl {r[2]:.3f} "
            f"({time.time() - t1:.0f}s)",
            flush=True,
        )
    log.update(
        train_seconds=round(time.time() - t0, 1),
        epochs=cfg["det_epochs"],
        steps=total,
        batch=cfg["det_batch"],
        train_scenes=len(images),
        optimizer="AdamW lr 3e-3 cosine, wd 5e-4",
    )
    model.eval()
    return model


def train_classifier(cfg: dict[str, int], log: dict[str, object]) -> TinyCls:
    t0 = time.time()
    crops, labels = classifier_pool(cfg["cls_scenes"], SEEDS["cls_train"])
    print(f"classifier pool: {len(crops)} crops in {time.time() - t0:.0f}s", flush=True)
    mean = torch.tensor(CLS_MEAN).view(1, 3, 1, 1)
    std = torch.tensor(CLS_STD).view(1, 3, 1, 1)
    torch.manual_seed(SEED + 1)
    model = TinyCls(len(FILL_NAMES))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=5e-4)
    gen = np.random.default_rng(SEED + 1)
    steps_per_epoch = len(crops) // cfg["cls_batch"]
    total = steps_per_epoch * cfg["cls_epochs"]
    step = 0
    for epoch in range(cfg["cls_epochs"]):
        order = gen.permutation(len(crops))
        correct = seen = 0
        model.train()
        for s in range(steps_per_epoch):
            idx = np.sort(order[s * cfg["cls_batch"] : (s + 1) * cfg["cls_batch"]])
            x = torch.from_numpy(crops[idx]).permute(0, 3, 1, 2).float() / 255.0
            x, _ = dihedral(x, torch.zeros(0, 4), int(gen.integers(0, 8)))
            y = torch.from_numpy(labels[idx])
            for g in opt.param_groups:
                g["lr"] = lr_at(step, total, 3e-3, 50)
            logits = model((x - mean) / std)
            loss = torch.nn.functional.cross_entropy(logits, y, label_smoothing=0.05)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            correct += int((logits.argmax(1) == y).sum())
            seen += len(y)
            step += 1
        print(
            f"cls epoch {epoch + 1}/{cfg['cls_epochs']} train acc {correct / seen:.3f} "
            f"({time.time() - t0:.0f}s)",
            flush=True,
        )
    log.update(
        train_seconds=round(time.time() - t0, 1),
        epochs=cfg["cls_epochs"],
        steps=total,
        batch=cfg["cls_batch"],
        train_crops=len(crops),
        optimizer="AdamW lr 3e-3 cosine, wd 5e-4",
    )
    model.eval()
    return model


def _set_metadata(path: Path, meta: dict[str, str]) -> None:
    model = onnx.load(str(path))
    del model.metadata_props[:]
    for key, value in meta.items():
        model.metadata_props.add(key=key, value=value)
    model.producer_name = "edge-agent models/train_demo.py"
    model.producer_version = VERSION
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def common_meta(description: str) -> dict[str, str]:
    return {
        "description": description,
        "author": "edge-agent",
        "license": "Apache-2.0",
        "version": VERSION,
        "date": "2026-11-29",
    }


def export_detector(model: TinyDet, path: Path) -> None:
    m = fuse_bn(copy.deepcopy(model)).eval()
    m.export = True
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter(
            "ignore", DeprecationWarning
        )  # dynamo=False on purpose: opset 16 (onnxruntime 1.11, Jetson Nano)
        torch.onnx.export(
            m,
            (torch.zeros(1, 3, IMGSZ, IMGSZ),),
            str(path),
            input_names=["images"],
            output_names=["output0"],
            opset_version=16,
            dynamo=False,
        )
    meta = common_meta("edge-agent demo detector: circles, squares, triangles in synthetic cluttered scenes")
    meta.update(
        task="detect",
        stride=str(max(STRIDES)),
        batch="1",
        imgsz=str([IMGSZ, IMGSZ]),
        names=class_names_literal(CLASS_NAMES),
        reg_max=str(REG_MAX),
        preprocess=json.dumps(
            {
                "resize": "letterbox",
                "pad_value": 114,
                "scale": 1 / 255,
                "mean": [0.0, 0.0, 0.0],
                "std": [1.0, 1.0, 1.0],
                "color": "RGB",
                "layout": "NCHW",
            }
        ),
    )
    _set_metadata(path, meta)


def export_classifier(model: TinyCls, path: Path) -> None:
    m = fuse_bn(copy.deepcopy(model)).eval()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.onnx.export(
            m,
            (torch.zeros(1, 3, CLS_SIZE, CLS_SIZE),),
            str(path),
            input_names=["images"],
            output_names=["output0"],
            opset_version=16,
            dynamo=False,
            dynamic_axes={"images": {0: "batch"}, "output0": {0: "batch"}},
        )
    meta = common_meta("edge-agent demo classifier: fill pattern of a detected shape crop (logits)")
    meta.update(
        task="classify",
        imgsz=str([CLS_SIZE, CLS_SIZE]),
        names=class_names_literal(FILL_NAMES),
        preprocess=json.dumps(
            {
                "resize": "stretch",
                "crop": False,
                "size": [CLS_SIZE, CLS_SIZE],
                "interpolation": "linear",
                "scale": 1 / 255,
                "mean": CLS_MEAN,
                "std": CLS_STD,
                "color": "RGB",
                "layout": "NCHW",
                "box_margin": CROP_MARGIN,
                "output": "logits",
            }
        ),
    )
    _set_metadata(path, meta)


def evaluate(root: Path) -> dict[str, dict[str, object]]:
    """Held-out metrics of every demo ONNX file present under root (FP32 and, once made, INT8)."""
    results: dict[str, dict[str, object]] = {}
    for name in ("demo-detector.onnx", "demo-detector-int8.onnx"):
        if (root / name).exists():
            results[name] = dict(eval_detector(root / name, root / "data" / "heldout"))
            print(f"{name}: {results[name]}", flush=True)
    for name in ("demo-classifier.onnx", "demo-classifier-int8.onnx"):
        if (root / name).exists():
            results[name] = dict(eval_classifier(root / name, root / "data" / "heldout-cls"))
            print(f"{name}: {results[name]}", flush=True)
    return results


def quantize(root: Path) -> int:
    """INT8 copies through the project's own ``edge-agent quantize``; stops clearly while it is missing."""
    probe = subprocess.run(
        [sys.executable, "-m", "edge_agent", "quantize", "--help"],
        capture_output=True,
        text=True,
        cwd=HERE.parent,
        check=False,
    )
    if probe.returncode != 0:
        print(
            "train_demo quantize: `python -m edge_agent quantize` is not available on this checkout "
            f"(exit {probe.returncode}); the INT8 demo models are made once that command lands.",
            file=sys.stderr,
        )
        return 2
    jobs = [
        ("demo-detector.onnx", "demo-detector-int8.onnx", "calib"),
        ("demo-classifier.onnx", "demo-classifier-int8.onnx", "calib-cls"),
    ]
    made: dict[str, dict[str, object]] = {}
    for src, dst, calib in jobs:
        cmd = [
            sys.executable,
            "-m",
            "edge_agent",
            "quantize",
            str(root / src),
            "--calib",
            str(root / "data" / calib),
            "-o",
            str(root / dst),
            "--target-ort",  # the bundled demo must load on a Jetson Nano (JetPack 4.6)
            "1.11",
        ]
        print(" ".join(cmd), flush=True)
        subprocess.run(cmd, check=True, cwd=HERE.parent)
        made[dst] = {
            "command": f"python -m edge_agent quantize {src} --calib data/{calib} -o {dst} --target-ort 1.11",
            "source": src,
            "calib": f"data/{calib}",
        }
    update_manifest(root, metrics=evaluate(root), int8_made=made)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    steps = ["all", "data", "detector", "classifier", "samples", "eval", "quantize", "manifest"]
    ap.add_argument("step", nargs="?", default="all", choices=steps)
    ap.add_argument("--quick", action="store_true", help="tiny smoke run (writes to --out, default /tmp)")
    ap.add_argument("--out", type=Path, help="output folder (default: models/; /tmp/demo-quick with --quick)")
    ap.add_argument(
        "--threads",
        type=int,
        default=2,
        help="torch threads (1 is faster than 2 when other jobs share the two cores)",
    )
    args = ap.parse_args(argv)
    root = args.out or (Path("/tmp/demo-quick") if args.quick else HERE)
    root.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)  # denormal weights/activations late in training are very slow on x86
    torch.manual_seed(SEED)
    if args.step == "quantize":
        return quantize(root)
    if args.step == "eval":
        update_manifest(root, metrics=evaluate(root))
        return 0
    if args.step == "manifest":
        update_manifest(root)
        return 0
    if args.step == "samples":
        print(f"samples: seeds {write_samples(root, root / 'demo-detector.onnx')}", flush=True)
        update_manifest(root)
        return 0
    t0 = time.time()
    if args.step in ("all", "data") or not (root / "data" / "heldout").is_dir():
        counts = write_datasets(root, n_heldout=24 if args.quick else 120)
        print(f"data written: {counts} ({time.time() - t0:.0f}s)", flush=True)
    if args.step == "data":
        print(f"samples: seeds {write_samples(root, root / 'demo-detector.onnx')}", flush=True)
        update_manifest(root)
        return 0
    cfg = QUICK if args.quick else FULL
    made: dict[str, dict[str, object]] = {}
    cmd = f"python models/train_demo.py{' --quick' if args.quick else ''} --threads {args.threads}"
    jobs = (
        ("detector", "demo-detector.onnx", train_detector, export_detector),
        ("classifier", "demo-classifier.onnx", train_classifier, export_classifier),
    )
    for step, name, train, export in jobs:
        if args.step not in ("all", step):
            continue
        log: dict[str, object] = {
            "command": cmd,
            "seed": SEED,
            "torch": torch.__version__.split("+")[0],
            "opset": 16,
        }
        model = train(cfg, log)
        export(model, root / name)
        made[name] = log
        if step == "detector":  # demo frames are picked with the fresh detector
            print(f"samples: seeds {write_samples(root, root / name)}", flush=True)
    update_manifest(root, made=made, metrics=evaluate(root))
    print(f"total {time.time() - t0:.0f}s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
