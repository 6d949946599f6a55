"""Latency of models side by side: bare ``session.run`` and the whole pipeline (pre/infer/post).

* Runs are **interleaved** (model A, B, C, A, B, C, ...) so machine drift (thermal throttling,
  other processes) hits every model alike; the ratios are taken from medians of the same run.
* **Peak RSS per model** is measured in a fresh subprocess per model (``ru_maxrss`` is a
  process-lifetime high-water mark, so with several models loaded in one process it can't be
  attributed): ``peak_rss_mb`` is that process's peak, ``model_rss_mb`` the peak minus the
  resident size just before loading (after onnxruntime/numpy/cv2 are imported), i.e. what the
  model's weights, session and activation buffers add.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional

import numpy as np
import numpy.typing as npt

from edge_agent.errors import EdgeAgentError

if TYPE_CHECKING:
    from edge_agent.adapters.runtime.onnx_model import OnnxModel

    Image = npt.NDArray[np.uint8]  # BGR

STAGES = ("pre", "infer", "post", "total")


def percentiles(xs: Sequence[float]) -> dict[str, float]:
    a = np.asarray(xs, np.float64)
    p50, p90, p99 = np.percentile(a, [50, 90, 99]) if a.size else (float("nan"),) * 3
    return {
        "p50": float(p50),
        "p90": float(p90),
        "p99": float(p99),
        "mean": float(a.mean()) if a.size else 0.0,
    }


@dataclass
class ModelBench:
    path: str
    kind: str
    quantization: str
    load_ms: float = 0.0
    peak_rss_mb: float = float("nan")
    model_rss_mb: float = float("nan")
    session_ms: list[float] = field(default_factory=list)
    stages_ms: dict[str, list[float]] = field(default_factory=lambda: {s: [] for s in STAGES})

    def summary(self) -> dict[str, Any]:
        total = self.stages_ms["total"]
        return {
            "path": self.path,
            "kind": self.kind,
            "quantization": self.quantization,
            "load_ms": round(self.load_ms, 1),
            "peak_rss_mb": round(self.peak_rss_mb, 1),
            "model_rss_mb": round(self.model_rss_mb, 1),
            "session_run_ms": {k: round(v, 3) for k, v in percentiles(self.session_ms).items()},
            "pipeline_ms": {
                s: {k: round(v, 3) for k, v in percentiles(self.stages_ms[s]).items()} for s in STAGES
            },
            "images_per_s": round(1000.0 / float(np.mean(total)), 2) if total else None,
        }


def synthetic_image(h: int = 480, w: int = 640, seed: int = 0) -> npt.NDArray[np.uint8]:
    """A deterministic textured image with a few filled shapes (used when no sample is bundled)."""
    import cv2

    rng = np.random.default_rng(seed)
    img = rng.integers(60, 200, (h, w, 3), dtype=np.uint8)
    img = np.asarray(cv2.GaussianBlur(img, (7, 7), 0), np.uint8)
    side = max(4, min(h, w) // 6)
    for _ in range(6):
        x, y = int(rng.integers(0, max(1, w - side))), int(rng.integers(0, max(1, h - side)))
        color = tuple(int(c) for c in rng.integers(0, 255, 3))
        bw, bh = int(rng.integers(side // 2, side + 1)), int(rng.integers(side // 2, side + 1))
        cv2.rectangle(img, (x, y), (x + bw, y + bh), color, -1)
    return img


def default_image(folder: Optional[Path] = None) -> tuple[npt.NDArray[np.uint8], str]:
    """The first image of ``folder`` (the caller passes the bundled samples: tools never import app/)."""
    from edge_agent.adapters.camera.images import IMAGE_SUFFIXES, read_image

    if folder is None or not folder.is_dir():
        return synthetic_image(), "synthetic 640x480"
    files = sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
    if not files:
        return synthetic_image(), "synthetic 640x480"
    return read_image(files[0]), str(files[0])


def _pipeline(
    model: OnnxModel, kind: str
) -> tuple[Callable[[Image], npt.NDArray[np.generic]], Callable[[Image], dict[str, float]]]:
    """(preprocess for the bare run, full pipeline returning stage timings) for one model."""
    from edge_agent.core.vision.classify import to_probabilities, top_k
    from edge_agent.core.vision.preprocess import preprocess_classifier, preprocess_detector
    from edge_agent.inference.pipeline import Detector, classifier_preprocess_for

    if kind == "detect":
        det = Detector(model)

        def detect(img: Image) -> dict[str, float]:
            t = det.detect(img).timings_ms
            return {**t, "total": t["pre"] + t["infer"] + t["post"]}

        stretch = det.format.fmt.stretch_input
        return (lambda img: preprocess_detector(img, det.input_hw, det.dtype, stretch=stretch)[0]), detect
    pp = classifier_preprocess_for(model)
    names = model.info.names

    def classify(img: Image) -> dict[str, float]:
        t0 = time.perf_counter()
        x = preprocess_classifier([img], pp, model.input.dtype)
        t1 = time.perf_counter()
        out = model.run_single(x)[0]
        t2 = time.perf_counter()
        top_k(to_probabilities(np.asarray(out)), names, 5)
        t3 = time.perf_counter()
        ms = {"pre": (t1 - t0) * 1e3, "infer": (t2 - t1) * 1e3, "post": (t3 - t2) * 1e3}
        return {**ms, "total": (t3 - t0) * 1e3}

    return (lambda img: preprocess_classifier([img], pp, model.input.dtype)), classify


def synthetic_feeds(
    model: OnnxModel, seq_len: int = 128, seed: int = 0
) -> dict[str, npt.NDArray[np.generic]]:
    """Inputs for a model that takes no image (:func:`edge_agent.inference.task.input_kind`): a
    dynamic batch axis is 1, any other dynamic axis ``seq_len`` (a sequence length or a window);
    integer inputs are token ids in 1..99 (inside any vocabulary), ``*mask*`` ones, ``*type*`` /
    ``*segment*`` zeros, ``*position*`` 0..n-1; float inputs uniform in -1..1."""
    rng = np.random.default_rng(seed)
    feeds: dict[str, npt.NDArray[np.generic]] = {}
    for t in model.info.inputs:
        shape = tuple(
            d if isinstance(d, int) and d > 0 else (1 if i == 0 else seq_len) for i, d in enumerate(t.shape)
        )
        dtype = np.dtype(t.dtype)
        name = t.name.lower()
        if dtype.kind == "f":
            feeds[t.name] = rng.uniform(-1, 1, shape).astype(dtype)
        elif dtype.kind == "b" or "mask" in name:
            feeds[t.name] = np.ones(shape, dtype)
        elif "type" in name or "segment" in name:
            feeds[t.name] = np.zeros(shape, dtype)
        elif "position" in name and shape:
            feeds[t.name] = np.broadcast_to(np.arange(shape[-1], dtype=dtype), shape).copy()
        else:
            feeds[t.name] = rng.integers(1, 100, shape).astype(dtype)
    return feeds


def _tensor_pipeline(
    model: OnnxModel, feeds: dict[str, npt.NDArray[np.generic]]
) -> Callable[[Image], dict[str, float]]:
    """A model fed generated tensors: its whole pipeline is the run (no image pre/post-processing)."""

    def run(_img: Image) -> dict[str, float]:
        t0 = time.perf_counter()
        model.run(feeds)
        ms = (time.perf_counter() - t0) * 1e3
        return {"pre": 0.0, "infer": ms, "post": 0.0, "total": ms}

    return run


def probe_memory(
    path: str, provider: Optional[str], threads: Optional[int], runs: int = 3, seq_len: int = 128
) -> dict[str, float]:
    """Load + run ``path`` in a fresh interpreter; its peak RSS and load time."""
    cmd = [sys.executable, "-m", "edge_agent.tools.bench", "--probe", path, "--runs", str(runs)]
    cmd += ["--seq-len", str(seq_len)]
    if provider:
        cmd += ["--provider", provider]
    if threads:
        cmd += ["--threads", str(threads)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise EdgeAgentError(f"{path}: memory probe failed: {last}")
    result: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


def _current_rss_mb() -> float:
    """Resident set now (``VmRSS``); the peak so far when /proc is unavailable."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return _peak_rss_mb()


def _probe_main(argv: Sequence[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--probe", required=True)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--provider")
    ap.add_argument("--threads", type=int)
    ap.add_argument("--seq-len", type=int, default=128)
    a = ap.parse_args(argv)
    import cv2  # noqa: F401 - imported before the baseline so it isn't counted as the model's
    import onnxruntime  # noqa: F401

    from edge_agent.adapters.runtime.onnx_model import OnnxModel

    base = _current_rss_mb()
    t0 = time.perf_counter()
    model = OnnxModel(a.probe, provider=a.provider, threads=a.threads, warmup=False)
    load_ms = (time.perf_counter() - t0) * 1e3
    from edge_agent.inference.task import input_kind

    feeds = model.dummy_inputs() if input_kind(model) == "image" else synthetic_feeds(model, a.seq_len)
    for _ in range(a.runs):
        model.run(feeds)
    peak = _peak_rss_mb()
    sys.stdout.write(
        json.dumps({"load_ms": load_ms, "peak_rss_mb": peak, "model_rss_mb": peak - base}) + "\n"
    )
    return 0


def bench_models(
    paths: Sequence[str],
    image: npt.NDArray[np.uint8],
    runs: int = 50,
    warmup: int = 5,
    threads: Optional[int] = None,
    provider: Optional[str] = None,
    measure_memory: bool = True,
    show_progress: bool = True,
    seq_len: int = 128,
) -> list[ModelBench]:
    from edge_agent.adapters.runtime.onnx_model import OnnxModel
    from edge_agent.inference.task import input_kind
    from edge_agent.tools.progress import Progress
    from edge_agent.tools.quantize import model_kind

    benches: list[ModelBench] = []
    runners = []
    for p in paths:
        model = OnnxModel(p, provider=provider, threads=threads)
        kind = model_kind(model) if input_kind(model) == "image" else "tensor"
        b = ModelBench(str(p), kind, model.info.quant_kind, load_ms=model.info.load_ms)
        if measure_memory:
            mem = probe_memory(str(p), provider, threads, seq_len=seq_len)
            b.load_ms, b.peak_rss_mb, b.model_rss_mb = mem["load_ms"], mem["peak_rss_mb"], mem["model_rss_mb"]
        if kind == "tensor":
            feeds = synthetic_feeds(model, seq_len)
            pipe = _tensor_pipeline(model, feeds)
        else:
            pre, pipe = _pipeline(model, kind)
            feeds = {model.input.name: pre(image)}
        model.run(feeds)  # a model that cannot run these inputs: one line (ModelError), before timing
        runners.append((b, model.session, feeds, pipe))
        benches.append(b)
    bar = Progress(warmup + runs, "benchmarking") if show_progress else None
    for it in range(warmup + runs):
        for b, sess, feeds, pipe in runners:
            t0 = time.perf_counter()
            sess.run(None, feeds)
            dt = (time.perf_counter() - t0) * 1e3
            stages = pipe(image)
            if it >= warmup:
                b.session_ms.append(dt)
                for s in STAGES:
                    b.stages_ms[s].append(stages[s])
        if bar:
            bar.update()
    if bar:
        bar.close()
    return benches


def report_json(benches: Sequence[ModelBench], meta: dict[str, Any]) -> dict[str, Any]:
    rows = [b.summary() for b in benches]
    base = rows[0]
    for r in rows:
        r["speedup_vs_first"] = {
            "session_run_p50": round(base["session_run_ms"]["p50"] / r["session_run_ms"]["p50"], 3),
            "pipeline_p50": round(base["pipeline_ms"]["total"]["p50"] / r["pipeline_ms"]["total"]["p50"], 3),
        }
    return {**meta, "models": rows}


def format_table(report: dict[str, Any]) -> str:
    head = (
        f"{'model':<34} {'quant':<12} {'run p50':>8} {'p90':>7} {'p99':>7} {'pre':>6} {'post':>6} "
        f"{'e2e p50':>8} {'img/s':>6} {'load':>6} {'RSS MB':>7} {'x first':>7}"
    )
    lines = [
        f"bench: {report['image']} ({report['runs']} runs after {report['warmup']} warm-up, interleaved; "
        f"threads {report['threads'] or 'default'}; times in ms)",
    ]
    if any(r["kind"] == "tensor" for r in report["models"]):
        lines.append(
            f"  models without an image input get generated tensors, dynamic axes {report.get('seq_len', 128)} "
            "long (--seq-len); their pre/post are 0"
        )
    lines.append(head)
    for r in report["models"]:
        s, p = r["session_run_ms"], r["pipeline_ms"]
        lines.append(
            f"{Path(r['path']).name[:34]:<34} {r['quantization']:<12} {s['p50']:8.2f} {s['p90']:7.2f} "
            f"{s['p99']:7.2f} {p['pre']['p50']:6.2f} {p['post']['p50']:6.2f} {p['total']['p50']:8.2f} "
            f"{r['images_per_s'] or 0:6.1f} {r['load_ms']:6.0f} {r['model_rss_mb']:7.1f} "
            f"{r['speedup_vs_first']['session_run_p50']:6.2f}x"
        )
    lines.append("x first: median session.run speed-up against the first model (>1 = faster)")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(_probe_main(sys.argv[1:]))
