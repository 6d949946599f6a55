"""Tracking cost: ms per frame at 20 objects, and the agent loop with objects mode vs without.

    python tests/bench/bench_tracker.py [--frames 300]

Part 1 times ``Tracker.update`` on 20 moving boxes with jitter and a confidence spread (median).
Part 2 runs ``edge-agent run`` ``--runs`` times per mode, interleaved, on the same looping folder
camera (the shared photos and yolov8n when ../shared is there, as bench_agent.py, else the demo
samples and detector), ``every_frame`` vs ``objects`` with a line and a zone, and compares the fps
each run's final status reports (median of the runs).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))

from support.runner import cli  # noqa: E402
from support.world import agent_toml  # noqa: E402


def tracker_ms(n_obj: int = 20, frames: int = 500) -> float:
    from edge_agent.core.objects.tracker import Tracker

    rng = np.random.default_rng(0)
    pos = rng.uniform(0, 1800, (n_obj, 2))
    vel = rng.normal(0, 4, (n_obj, 2))
    tr = Tracker()
    times = []
    for _ in range(frames):
        pos += vel
        boxes = np.concatenate([pos, pos + 60], 1) + rng.normal(0, 1.5, (n_obj, 4))
        scores = np.clip(rng.beta(5, 2, n_obj), 0.05, 1)
        t0 = time.perf_counter()
        tr.update(boxes, scores)
        times.append(time.perf_counter() - t0)
    return statistics.median(times[20:]) * 1e3


def loop_fps(
    root: Path, model: Path, images: list[Path], mode: str, frames: int
) -> tuple[float, dict[str, float]]:
    """fps and median stage latencies of ``edge-agent run`` from its final status (last 50 frames)."""
    import json

    cam = root / "cam"
    if not cam.exists():
        cam.mkdir()
        for n, img in enumerate(images * 4):
            shutil.copy(img, cam / f"{n:03d}{img.suffix}")
    state = root / f"s-{mode}-{time.monotonic_ns()}"
    cfg = root / "c.toml"
    cfg.write_text(
        agent_toml(
            state,
            cam,
            model,
            device={"id": None},
            camera={"loop": True},
            queue={"path": str(state / "q.db")},
            output={"mode": mode},
            health={"status_file": str(state / "st.json")},
            lines=[{"name": "l", "points": [[0.5, 0.0], [0.5, 1.0]]}],
            zones=[{"name": "z", "polygon": [[0.1, 0.1], [0.6, 0.1], [0.6, 0.6], [0.1, 0.6]]}],
        )
    )
    r = cli("run", "--config", str(cfg), "--max-frames", str(frames), timeout=3600)
    assert r.returncode == 0, r.stderr
    st = json.loads((state / "st.json").read_text())
    return float(st["fps"]), dict(st["latency_ms"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--frames", type=int, default=150)
    ap.add_argument("--model", type=Path, help="default: the shared yolov8n, else the demo detector")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    print(f"tracker update, 20 objects: {tracker_ms():.3f} ms/frame (median)")
    # ../shared beside the checkout (as bench_agent.py); a worktree under /work/wt/ has it two up
    shared = next((d for d in (REPO.parent / "shared", REPO.parents[1] / "shared") if d.is_dir()), REPO / "-")
    yolo = shared / "models" / "yolov8n-coco-fp32.onnx"
    model = args.model or (yolo if yolo.is_file() else REPO / "models" / "demo-detector.onnx")
    images = sorted((shared / "images").glob("*.jpg")) if (shared / "images").is_dir() else []
    images = images or sorted((REPO / "models" / "samples").glob("*.jpg"))
    print(f"loop: {model.name} on {len(images)} images, {args.frames} frames, {args.runs} runs per mode")
    with tempfile.TemporaryDirectory() as d:
        fps: dict[str, list[float]] = {"every_frame": [], "objects": []}
        track_share: list[float] = []
        for _ in range(args.runs):
            for mode in fps:
                f, lat = loop_fps(Path(d), model, images, mode, args.frames)
                fps[mode].append(f)
                if mode == "objects":  # the same ratio inside one run: immune to the machine's load
                    track_share.append(lat["total"] / (lat["total"] + lat.get("track", 0.0)))
    base, obj = statistics.median(fps["every_frame"]), statistics.median(fps["objects"])
    print(f"runs: {fps}")
    print(f"loop fps (median): every_frame {base:.1f}, objects {obj:.1f}, ratio {obj / base:.3f}")
    print(
        f"in-loop ratio total / (total + track), median of the objects runs: {statistics.median(track_share):.4f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
