"""Inference-core overhead on the real YOLOv8n: our pre+post vs bare ``session.run``, and our
end-to-end vs straightforward reference pipelines, interleaved in one run (run by hand):

    PYTHONPATH=$PWD python tests/bench/bench_pipeline.py [--runs 30] [--threads N] [--model M] [--image I]

Target: our pre+post <= 5 % of the bare session.run median.
References (the usual Ultralytics-example way): cv2 letterbox, ``[:, :, ::-1].transpose`` + /255,
then per-row argmax over the [8400, 84] transpose - (a) a Python loop over rows as in the
Ultralytics ONNX Runtime example, (b) the same vectorised with numpy - and ``cv2.dnn.NMSBoxes``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import cv2
import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from edge_agent.adapters.camera.images import read_image  # noqa: E402
from edge_agent.adapters.runtime.onnx_model import OnnxModel  # noqa: E402
from edge_agent.core.vision.preprocess import preprocess_detector  # noqa: E402
from edge_agent.inference.pipeline import Detector  # noqa: E402

CONF, IOU = 0.25, 0.45


def ref_preprocess(img: np.ndarray, size: int = 640) -> tuple[np.ndarray, float, int, int]:
    h, w = img.shape[:2]
    r = min(size / h, size / w)
    nw, nh = int(round(w * r)), int(round(h * r))
    resized = cv2.resize(img, (nw, nh), interpolation=cv2.INTER_LINEAR)
    top, left = (size - nh) // 2, (size - nw) // 2
    padded = cv2.copyMakeBorder(
        resized, top, size - nh - top, left, size - nw - left, cv2.BORDER_CONSTANT, value=(114, 114, 114)
    )
    x = padded[:, :, ::-1].transpose(2, 0, 1)[None].astype(np.float32) / 255.0
    return np.ascontiguousarray(x), r, left, top


def ref_post_loop(out: np.ndarray, r: float, left: int, top: int) -> list[int]:
    rows = out[0].T
    boxes, scores, ids = [], [], []
    for row in rows:
        cls = row[4:]
        c = int(np.argmax(cls))
        s = float(cls[c])
        if s >= CONF:
            cx, cy, w, h = row[:4]
            boxes.append([int((cx - w / 2 - left) / r), int((cy - h / 2 - top) / r), int(w / r), int(h / r)])
            scores.append(s)
            ids.append(c)
    return list(cv2.dnn.NMSBoxes(boxes, scores, CONF, IOU))


def ref_post_vec(out: np.ndarray, r: float, left: int, top: int) -> list[int]:
    rows = out[0].T
    cls = rows[:, 4:]
    c = np.argmax(cls, axis=1)
    s = cls[np.arange(len(c)), c]
    keep = s >= CONF
    b = rows[keep, :4]
    xywh = np.stack(
        [(b[:, 0] - b[:, 2] / 2 - left) / r, (b[:, 1] - b[:, 3] / 2 - top) / r, b[:, 2] / r, b[:, 3] / r], 1
    )
    return list(cv2.dnn.NMSBoxes(xywh.tolist(), s[keep].tolist(), CONF, IOU))


def med(xs: list[float]) -> float:
    return statistics.median(xs) * 1e3


def decode_vs_reduced(data: bytes, det: Detector, runs: int) -> None:
    """JPEG decode + letterbox: full-size decode vs libjpeg's DCT-scaled decode (what the folder and
    MJPEG sources do when the frame is >= 2x the model input), interleaved."""
    from edge_agent.adapters.camera.mjpeg_http import decode_jpeg

    full: list[float] = []
    reduced: list[float] = []
    shape = None
    for _ in range(runs + 3):
        t0 = time.perf_counter()
        img = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
        preprocess_detector(img, det.input_hw, det.dtype)
        t1 = time.perf_counter()
        small, _ = decode_jpeg(data, det.input_hw)
        preprocess_detector(small, det.input_hw, det.dtype)
        t2 = time.perf_counter()
        full.append(t1 - t0)
        reduced.append(t2 - t1)
        shape = small.shape
    assert shape is not None
    print(
        f"  decode+pre full           {med(full[3:]):8.2f}   decode at {shape[1]}x{shape[0]} + pre {med(reduced[3:]):.2f}"
        f"  ({med(full[3:]) / med(reduced[3:]):.2f}x)"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=str(REPO.parent / "shared" / "models" / "yolov8n-coco-fp32.onnx"))
    ap.add_argument("--image", default=str(REPO.parent / "shared" / "images" / "bus.jpg"))
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int)
    a = ap.parse_args()
    img = read_image(a.image)
    model = OnnxModel(a.model, threads=a.threads)
    det = Detector(model)
    sess: Any = model.session
    name = model.input.name
    t: dict[str, list[float]] = {
        k: []
        for k in (
            "run",
            "pre",
            "post",
            "ours",
            "ref_loop",
            "ref_vec",
            "ref_pre",
            "ref_post_loop",
            "ref_post_vec",
        )
    }
    blob, _ = preprocess_detector(img, det.input_hw, det.dtype)
    n_ours = n_loop = n_vec = 0
    for i in range(a.warmup + a.runs):
        t0 = time.perf_counter()
        sess.run(None, {name: blob})
        t1 = time.perf_counter()
        o = det.detect(img)
        t2 = time.perf_counter()
        x, r, left, top = ref_preprocess(img)
        t3 = time.perf_counter()
        out = sess.run(None, {name: x})[0]
        t4 = time.perf_counter()
        kept_loop = ref_post_loop(out, r, left, top)
        t5 = time.perf_counter()
        x, r, left, top = ref_preprocess(img)
        out = sess.run(None, {name: x})[0]
        t6 = time.perf_counter()
        kept_vec = ref_post_vec(out, r, left, top)
        t7 = time.perf_counter()
        if i < a.warmup:
            continue
        t["run"].append(t1 - t0)
        t["pre"].append(o.timings_ms["pre"] / 1e3)
        t["post"].append(o.timings_ms["post"] / 1e3)
        t["ours"].append(t2 - t1)
        t["ref_pre"].append(t3 - t2)
        t["ref_post_loop"].append(t5 - t4)
        t["ref_loop"].append(t5 - t2)
        t["ref_post_vec"].append(t7 - t6)
        t["ref_vec"].append((t3 - t2) + (t7 - t5))
        n_ours, n_loop, n_vec = len(o.detections), len(kept_loop), len(kept_vec)
    run, pre, post = med(t["run"]), med(t["pre"]), med(t["post"])
    print(
        f"model {Path(a.model).name}, image {Path(a.image).name} {img.shape[1]}x{img.shape[0]}, "
        f"{a.runs} interleaved runs, threads {a.threads or 'default'}; medians in ms"
    )
    print(f"  bare session.run          {run:8.2f}")
    print(
        f"  ours: pre {pre:.2f} + post {post:.2f} = {pre + post:.2f}  ->  {100 * (pre + post) / run:.2f} % of session.run (target <= 5 %)"
    )
    print(f"  ours end-to-end           {med(t['ours']):8.2f}   ({n_ours} detections)")
    print(
        f"  ref (row loop) end-to-end {med(t['ref_loop']):8.2f}   pre {med(t['ref_pre']):.2f}, post {med(t['ref_post_loop']):.2f} ({n_loop} detections)"
    )
    print(
        f"  ref (numpy) end-to-end    {med(t['ref_vec']):8.2f}   post {med(t['ref_post_vec']):.2f} ({n_vec} detections)"
    )
    print(f"  ratio ref-loop / ours     {med(t['ref_loop']) / med(t['ours']):8.3f}")
    print(f"  ratio ref-numpy / ours    {med(t['ref_vec']) / med(t['ours']):8.3f}")
    decode_vs_reduced(Path(a.image).read_bytes(), det, a.runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
