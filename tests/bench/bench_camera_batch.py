"""Several cameras on one agent: frames run one ``session.run`` each vs batched (``[detector]
max_batch``), side by side in one run, with bare ``session.run`` as the reference.

    PYTHONPATH=$PWD python tests/bench/bench_camera_batch.py [--model M] [--cameras 4] [--seconds 20] [--reps 3]

The model's batch axis is made dynamic here (its Reshape nodes' leading 1 becomes 0, "copy the
input's batch"), so the same weights run both ways. Each camera is a looping folder of the shared
photos (always ready, so the detector is the bottleneck); the agent runs in process for a fixed
time per rep, max_batch 1 and 4 alternating, and reports medians of the aggregate processed fps.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"
sys.path.insert(0, str(REPO / "tests"))


def dynamic_copy(src: Path, dst: Path) -> Path:
    import onnx
    from onnx import numpy_helper

    m = onnx.load(str(src))
    g = m.graph
    g.input[0].type.tensor_type.shape.dim[0].dim_param = "N"
    for o in g.output:
        o.type.tensor_type.shape.dim[0].dim_param = "N"
    del g.value_info[:]
    inits = {i.name: i for i in g.initializer}
    for n in g.node:
        if n.op_type == "Reshape" and n.input[1] in inits:
            a = numpy_helper.to_array(inits[n.input[1]]).copy()
            if a[0] == 1:
                a[0] = 0
                inits[n.input[1]].CopyFrom(numpy_helper.from_array(a, n.input[1]))
    onnx.save(m, str(dst))
    return dst


def bare(model: Path, n: int, threads: int, reps: int = 15) -> tuple[float, float]:
    """(n runs of batch 1, one run of batch n) in ms, medians."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    s = ort.InferenceSession(str(model), so, providers=["CPUExecutionProvider"])
    shape = [d if isinstance(d, int) else n for d in s.get_inputs()[0].shape]
    x = np.random.rand(*shape).astype(np.float32)
    name = s.get_inputs()[0].name
    one, many = [], []
    for _ in range(reps):
        t0 = time.perf_counter()
        for i in range(n):
            s.run(None, {name: x[i : i + 1]})
        one.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        s.run(None, {name: x})
        many.append(time.perf_counter() - t0)
    return statistics.median(one) * 1e3, statistics.median(many) * 1e3


def agent_fps(
    model: Path, images: Path, cameras: int, max_batch: int, seconds: float, threads: int
) -> tuple[float, int]:
    from support.world import agent_toml

    from edge_agent.app.agent.agent import Agent
    from edge_agent.core.config.schema import parse_config

    with tempfile.TemporaryDirectory() as tmp:
        state = Path(tmp)
        extra = "".join(
            f'[[cameras]]\nid = "c{i}"\nsource = "{images}"\nloop = true\n' for i in range(cameras)
        )
        cfg = parse_config(
            agent_toml(
                state,
                None,
                model,
                extra=extra,
                detector={"max_batch": max_batch, "threads": threads},
                output={"mode": "event"},
                mqtt={"enabled": False},
            )
        )
        agent = Agent(cfg)
        t = threading.Thread(target=agent.run, daemon=True)
        t.start()
        while agent.ready_s is None and t.is_alive():
            time.sleep(0.05)
        time.sleep(2.0)  # warm: every camera streaming
        f0, t0 = agent.frames, time.monotonic()
        time.sleep(seconds)
        fps = (agent.frames - f0) / (time.monotonic() - t0)
        batches = agent.scheduling.batches if agent.scheduling else 0
        agent.stop_event.set()
        t.join(30)
        return fps, batches


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, default=SHARED / "models" / "yolov8n-coco-fp32.onnx")
    ap.add_argument("--cameras", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    if not args.model.is_file():
        print(f"no model at {args.model} (../shared absent?)", file=sys.stderr)
        return 2
    tmp = Path(tempfile.mkdtemp())
    try:
        dyn = dynamic_copy(args.model, tmp / "dynamic.onnx")
        images = tmp / "images"
        images.mkdir()
        src = SHARED / "images" if (SHARED / "images").is_dir() else REPO / "models" / "samples"
        for p in sorted(src.iterdir()):
            if p.suffix.lower() in (".jpg", ".jpeg", ".png"):
                shutil.copy(p, images / p.name)
        one, many = bare(dyn, args.cameras, args.threads)
        print(
            f"bare session.run, {args.cameras} frames: {one:.1f} ms one by one, {many:.1f} ms in one run: {many / one:.3f}x"
        )
        got: dict[int, list[float]] = {1: [], 4: []}
        for _ in range(args.reps):
            for mb in (1, 4):
                fps, batches = agent_fps(dyn, images, args.cameras, mb, args.seconds, args.threads)
                got[mb].append(fps)
                print(f"  max_batch {mb}: {fps:.2f} frames/s aggregate ({batches} batched runs)", flush=True)
        m1, m4 = statistics.median(got[1]), statistics.median(got[4])
        print(
            f"agent, {args.cameras} cameras: max_batch 1 {m1:.2f} fps, max_batch 4 {m4:.2f} fps (medians of {args.reps}): {m4 / m1:.3f}x"
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
