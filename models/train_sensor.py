"""Train, export and evaluate edge-agent's demo sensor model on the BasicMotions recordings.

    python models/train_sensor.py data --wheel aeon-1.6.0-py3-none-any.whl  # the CSVs from the aeon wheel
    python models/train_sensor.py train      # models/demo-sensor.onnx, and FP32 vs static INT8 accuracy
    python models/train_sensor.py train --int8 /tmp/demo-sensor-int8.onnx   # keep the INT8 copy
    python models/train_sensor.py eval [MODEL.onnx ...]   # test-split accuracy of ONNX files
    python models/train_sensor.py train --out /tmp/sensor-repro   # reproduce elsewhere, compare sha256

Dev tooling only: numpy, onnx and onnxruntime (for INT8 and the check); no torch, and aeon is never
imported: ``data`` reads ``aeon/datasets/data/BasicMotions/*.ts`` out of the aeon wheel (a zip) or an
installed aeon's folder with the standard library (``pip download aeon==1.6.0 --no-deps``).

The model: the agent feeds it one window ``[1, 6, 50]`` (5 s at 10 Hz) of readings already
normalised with the per-channel mean/std in its metadata. The graph computes four features per
channel (mean, standard deviation, max - min, mean absolute first difference) and a 24-16-4 MLP
(ReLU) with a softmax: ``probs [1, 4]``. The MLP is trained by plain full-batch gradient descent
(Adam) in numpy from a fixed seed, so a rerun writes the same bytes.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import importlib.util
import io
import json
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any, Optional

import numpy as np

HERE = Path(__file__).resolve().parent
DATA = HERE / "data" / "basicmotions"
CHANNELS = ["acc_x", "acc_y", "acc_z", "gyr_x", "gyr_y", "gyr_z"]
LABELS = ["Standing", "Running", "Walking", "Badminton"]  # order of @classLabel in the .ts files
RATE_HZ = 10.0
WINDOW = 50
HOP = 25
TRAIN_HOP = 5  # training windows: every 5th offset of each 100-reading series (augmentation)
SEED = 20261
HIDDEN = 16
STEPS = 1500
LR = 0.01
WEIGHT_DECAY = 1e-3
OPSET = 13  # onnxruntime 1.11 (JetPack 4.6, Jetson Nano) loads up to 15
VERSION = "1.0.0"


# ---- data ---------------------------------------------------------------------------------------
def _ts_text(source: Path, split: str) -> str:
    member = f"aeon/datasets/data/BasicMotions/BasicMotions_{split}.ts"
    if source.is_file():
        with zipfile.ZipFile(source) as whl:
            return whl.read(member).decode("utf-8")
    return (source / member).read_text(encoding="utf-8")


def parse_ts(text: str) -> list[tuple[list[list[str]], str]]:
    """``(channels x readings as the file's text, label)`` per series of a .ts file (equal length)."""
    series: list[tuple[list[list[str]], str]] = []
    in_data = False
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.lower() == "@data":
            in_data = True
            continue
        if not in_data or line.startswith("@"):
            continue
        *dims, label = line.split(":")
        series.append(([d.split(",") for d in dims], label))
    return series


def write_data(source: Path) -> None:
    """models/data/basicmotions/{train,test}.csv: one row per reading, values as the .ts file has them."""
    DATA.mkdir(parents=True, exist_ok=True)
    for split in ("TRAIN", "TEST"):
        rows = parse_ts(_ts_text(source, split))
        out = io.StringIO()
        w = csv.writer(out, lineterminator="\n")
        w.writerow(["t", "series", "label", *CHANNELS])
        n = 0
        for idx, (dims, label) in enumerate(rows):
            assert len(dims) == len(CHANNELS) and label in LABELS, (len(dims), label)
            for i in range(len(dims[0])):
                w.writerow([f"{n / RATE_HZ:.1f}", idx, label, *(d[i] for d in dims)])
                n += 1
        path = DATA / f"{split.lower()}.csv"
        path.write_text(out.getvalue(), encoding="utf-8")
        print(f"{path}: {len(rows)} series, {n} readings")


def load_split(split: str) -> tuple[np.ndarray, np.ndarray]:
    """``x [series, C, 100]`` float32 and ``y [series]`` label indices of train or test."""
    with open(DATA / f"{split}.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    by_series: dict[int, list[dict[str, str]]] = {}
    for r in rows:
        by_series.setdefault(int(r["series"]), []).append(r)
    xs, ys = [], []
    for idx in sorted(by_series):
        rs = by_series[idx]
        xs.append([[float(r[c]) for r in rs] for c in CHANNELS])
        ys.append(LABELS.index(rs[0]["label"]))
    return np.asarray(xs, dtype=np.float32), np.asarray(ys, dtype=np.int64)


def windows(x: np.ndarray, y: np.ndarray, hop: int) -> tuple[np.ndarray, np.ndarray]:
    """Every window of WINDOW readings at offsets 0, hop, ... inside each series."""
    offsets = range(0, x.shape[2] - WINDOW + 1, hop)
    xw = np.stack([s[:, o : o + WINDOW] for s in x for o in offsets])
    yw = np.repeat(y, len(offsets))
    return xw, yw


# ---- features (the same arithmetic as the graph) -------------------------------------------------
def features(xw: np.ndarray) -> np.ndarray:
    mean = xw.mean(axis=2)
    std = np.sqrt(((xw - mean[:, :, None]) ** 2).mean(axis=2))
    rng = xw.max(axis=2) - xw.min(axis=2)
    diff = np.abs(xw[:, :, 1:] - xw[:, :, :-1]).mean(axis=2)
    return np.concatenate([mean, std, rng, diff], axis=1).astype(np.float32)


def train_mlp(f: np.ndarray, y: np.ndarray) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(SEED)
    n_in, n_out = f.shape[1], len(LABELS)
    p = {
        "w1": (rng.standard_normal((n_in, HIDDEN)) * np.sqrt(2.0 / n_in)).astype(np.float64),
        "b1": np.zeros(HIDDEN),
        "w2": (rng.standard_normal((HIDDEN, n_out)) * np.sqrt(1.0 / HIDDEN)).astype(np.float64),
        "b2": np.zeros(n_out),
    }
    m = {k: np.zeros_like(v) for k, v in p.items()}
    v = {k: np.zeros_like(val) for k, val in p.items()}
    onehot = np.eye(n_out)[y]
    x = f.astype(np.float64)
    for step in range(1, STEPS + 1):
        h_pre = x @ p["w1"] + p["b1"]
        h = np.maximum(h_pre, 0.0)
        logits = h @ p["w2"] + p["b2"]
        logits -= logits.max(axis=1, keepdims=True)
        prob = np.exp(logits)
        prob /= prob.sum(axis=1, keepdims=True)
        d_logits = (prob - onehot) / len(x)
        g = {"w2": h.T @ d_logits + WEIGHT_DECAY * p["w2"], "b2": d_logits.sum(axis=0)}
        d_h = (d_logits @ p["w2"].T) * (h_pre > 0)
        g["w1"] = x.T @ d_h + WEIGHT_DECAY * p["w1"]
        g["b1"] = d_h.sum(axis=0)
        for k in p:
            m[k] = 0.9 * m[k] + 0.1 * g[k]
            v[k] = 0.999 * v[k] + 0.001 * g[k] ** 2
            p[k] -= LR * (m[k] / (1 - 0.9**step)) / (np.sqrt(v[k] / (1 - 0.999**step)) + 1e-8)
        if step % 500 == 0:
            loss = -np.log(prob[np.arange(len(x)), y] + 1e-12).mean()
            print(f"step {step}: loss {loss:.4f}, train accuracy {(prob.argmax(1) == y).mean():.4f}")
    return {k: val.astype(np.float32) for k, val in p.items()}


# ---- ONNX ---------------------------------------------------------------------------------------
def build_onnx(p: dict[str, np.ndarray], mean: np.ndarray, std: np.ndarray) -> Any:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    c = len(CHANNELS)
    n = helper.make_node
    nodes = [
        n("ReduceMean", ["window"], ["mean"], axes=[2], keepdims=1),
        n("Sub", ["window", "mean"], ["centred"]),
        n("Mul", ["centred", "centred"], ["sq"]),
        n("ReduceMean", ["sq"], ["var"], axes=[2], keepdims=1),
        n("Sqrt", ["var"], ["std"]),
        n("ReduceMax", ["window"], ["max"], axes=[2], keepdims=1),
        n("ReduceMin", ["window"], ["min"], axes=[2], keepdims=1),
        n("Sub", ["max", "min"], ["range"]),
        n("Slice", ["window", "s1", "send", "s_axis"], ["later"]),
        n("Slice", ["window", "s0", "s_last", "s_axis"], ["earlier"]),
        n("Sub", ["later", "earlier"], ["step"]),
        n("Abs", ["step"], ["abs_step"]),
        n("ReduceMean", ["abs_step"], ["diff"], axes=[2], keepdims=1),
        n("Concat", ["mean", "std", "range", "diff"], ["feat3"], axis=2),  # [1, C, 4]
        n("Transpose", ["feat3"], ["feat_t"], perm=[0, 2, 1]),  # [1, 4, C]: feature-major like numpy
        n("Reshape", ["feat_t", "flat_shape"], ["feat"]),
        n("MatMul", ["feat", "w1"], ["h_mm"]),
        n("Add", ["h_mm", "b1"], ["h_pre"]),
        n("Relu", ["h_pre"], ["h"]),
        n("MatMul", ["h", "w2"], ["l_mm"]),
        n("Add", ["l_mm", "b2"], ["logits"]),
        n("Softmax", ["logits"], ["probs"], axis=1),
    ]
    inits = [
        numpy_helper.from_array(np.asarray([1], np.int64), "s1"),
        numpy_helper.from_array(np.asarray([WINDOW], np.int64), "send"),
        numpy_helper.from_array(np.asarray([0], np.int64), "s0"),
        numpy_helper.from_array(np.asarray([WINDOW - 1], np.int64), "s_last"),
        numpy_helper.from_array(np.asarray([2], np.int64), "s_axis"),
        numpy_helper.from_array(np.asarray([1, 4 * c], np.int64), "flat_shape"),
    ] + [numpy_helper.from_array(p[k], k) for k in ("w1", "b1", "w2", "b2")]
    graph = helper.make_graph(
        nodes,
        "demo_sensor",
        [helper.make_tensor_value_info("window", TensorProto.FLOAT, [1, c, WINDOW])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [1, len(LABELS)])],
        inits,
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="edge-agent"
    )
    model.ir_version = 7  # onnxruntime 1.11 reads IR <= 8
    meta = {
        "task": "classify",
        "kind": "sensor",
        "labels": json.dumps(LABELS),
        "names": repr(dict(enumerate(LABELS))),
        "channels": json.dumps(CHANNELS),
        "window": str(WINDOW),
        "hop": str(HOP),
        "rate_hz": str(RATE_HZ),
        "layout": "[1,C,T]",
        "mean": json.dumps([round(float(x), 6) for x in mean]),
        "std": json.dumps([round(float(x), 6) for x in std]),
        "output": "probs",
        "description": "BasicMotions activity (smart watch accelerometer + gyroscope, 10 Hz): 5 s windows",
        "author": "edge-agent",
        "license": "Apache-2.0 (model); data: UEA/UCR time series classification archive, BasicMotions",
        "version": VERSION,
    }
    for key, value in meta.items():
        model.metadata_props.add(key=key, value=value)
    onnx.checker.check_model(model)
    return model


def run_onnx(path: Path, xw: np.ndarray) -> np.ndarray:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    return np.stack([sess.run(None, {"window": w[None]})[0][0] for w in xw])


def quantize_int8(fp32: Path, out: Path, calib: np.ndarray) -> None:
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class Reader(CalibrationDataReader):  # type: ignore[misc]
        def __init__(self) -> None:
            self._it = iter([{"window": w[None]} for w in calib])

        def get_next(self) -> Any:
            return next(self._it, None)

    quantize_static(
        str(fp32),
        str(out),
        Reader(),
        quant_format=QuantFormat.QDQ,
        activation_type=QuantType.QUInt8,
        weight_type=QuantType.QInt8,
        op_types_to_quantize=["MatMul"],
    )
    import onnx

    m = onnx.load(str(out))
    for op in m.opset_import:
        if op.domain in ("", "ai.onnx") and op.version > OPSET:
            op.version = OPSET
    m.ir_version = 7
    onnx.save(m, str(out))


def accuracy(path: Path, xw: np.ndarray, yw: np.ndarray) -> float:
    return float((run_onnx(path, xw).argmax(1) == yw).mean())


def train(out: Path, int8: Optional[Path] = None) -> dict[str, Any]:
    """FP32 into ``out``; the static INT8 copy into ``int8`` (default: a temporary folder, measured
    and left out of the repository: it is no faster than FP32 for this model, docs/models.md)."""
    import onnx

    x, y = load_split("train")
    xt, yt = load_split("test")
    mean = x.mean(axis=(0, 2))
    std = x.std(axis=(0, 2))
    norm = lambda a: ((a - mean[None, :, None]) / std[None, :, None]).astype(np.float32)  # noqa: E731
    xw, yw = windows(norm(x), y, TRAIN_HOP)
    p = train_mlp(features(xw), yw)
    out.mkdir(parents=True, exist_ok=True)
    fp32 = out / "demo-sensor.onnx"
    onnx.save(build_onnx(p, mean, std), str(fp32))
    cw, _ = windows(norm(x), y, HOP)  # calibration: the train split's windows at the agent's hop
    with tempfile.TemporaryDirectory() as tmp:
        q = int8 or Path(tmp) / "demo-sensor-int8.onnx"
        quantize_int8(fp32, q, cw)
        return evaluate([fp32, q], norm(xt), yt)


def evaluate(paths: list[Path], xt_norm: np.ndarray, yt: np.ndarray) -> dict[str, Any]:
    tw, tyw = windows(xt_norm, yt, HOP)
    report: dict[str, Any] = {"test_windows": int(len(tw)), "window": WINDOW, "hop": HOP}
    for path in paths:
        if path.exists():
            report[path.name] = {
                "test_accuracy": round(accuracy(path, tw, tyw), 4),
                "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
                "size": path.stat().st_size,
            }
    print(json.dumps(report, indent=2))
    return report


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("step", choices=["data", "train", "eval"])
    ap.add_argument("--wheel", type=Path, help="data: the aeon wheel (or an aeon install's parent folder)")
    ap.add_argument("--out", type=Path, default=HERE, help="train: where the FP32 model goes")
    ap.add_argument(
        "--int8", type=Path, help="train: keep the static INT8 copy here (default: measured, dropped)"
    )
    ap.add_argument(
        "models", nargs="*", type=Path, help="eval: ONNX files (default: models/demo-sensor.onnx)"
    )
    args = ap.parse_args(argv)
    if args.step == "data":
        source = args.wheel
        if source is None:
            spec = importlib.util.find_spec("aeon")  # finds the folder without importing aeon
            if spec is None or not spec.submodule_search_locations:
                print("data: give --wheel aeon-*.whl (pip download aeon==1.6.0 --no-deps)", file=sys.stderr)
                return 2
            source = Path(next(iter(spec.submodule_search_locations))).parent
        write_data(source)
        return 0
    if args.step == "train":
        train(args.out, args.int8)
        return 0
    x, _ = load_split("train")
    xt, yt = load_split("test")
    mean, std = x.mean(axis=(0, 2)), x.std(axis=(0, 2))
    evaluate(
        args.models or [HERE / "demo-sensor.onnx"],
        ((xt - mean[None, :, None]) / std[None, :, None]).astype(np.float32),
        yt,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
