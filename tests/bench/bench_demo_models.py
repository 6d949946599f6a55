"""ORT latency of the demo models at batch 1 (run by hand: python tests/bench/bench_demo_models.py).

Prints median / p90 of N timed runs after warm-up, per model, with intra-op threads given.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort

MODELS = Path(__file__).resolve().parents[2] / "models"


def bench(path: Path, shape: tuple[int, ...], runs: int, threads: int) -> tuple[float, float]:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    x = np.random.default_rng(0).random(shape, dtype=np.float32)
    for _ in range(10):
        sess.run(None, {"images": x})
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        sess.run(None, {"images": x})
        times.append((time.perf_counter() - t) * 1000)
    times.sort()
    return statistics.median(times), times[int(0.9 * (len(times) - 1))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    for name, shape in (
        ("demo-detector.onnx", (1, 3, 160, 160)),
        ("demo-classifier.onnx", (1, 3, 64, 64)),
        ("demo-detector-int8.onnx", (1, 3, 160, 160)),
        ("demo-classifier-int8.onnx", (1, 3, 64, 64)),
    ):
        if (MODELS / name).exists():
            med, p90 = bench(MODELS / name, shape, args.runs, args.threads)
            print(
                f"{name:28s} batch 1  median {med:6.2f} ms  p90 {p90:6.2f} ms  "
                f"({args.runs} runs, {args.threads} thread(s), ORT {ort.__version__})"
            )


if __name__ == "__main__":
    main()
