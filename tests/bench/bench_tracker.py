"""Tracking cost: ms per frame at 20 objects, and the agent loop with objects mode vs without.

    python tests/bench/bench_tracker.py [--frames 300]

Part 1 times ``Tracker.update`` on 20 moving boxes with jitter and a confidence spread (median).
Part 2 runs ``edge-agent run`` twice per mode, interleaved, on the same looping folder camera
(the bundled demo samples, demo detector), ``every_frame`` vs ``objects`` with a line and a zone,
and compares the frames per second each run reports (frames / wall time, median of the runs).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]


def tracker_ms(n_obj: int = 20, frames: int = 500) -> float:
    from edge_agent.core.tracker import Tracker

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


def loop_fps(root: Path, mode: str, frames: int) -> float:
    cam = root / "cam"
    if not cam.exists():
        cam.mkdir()
        for n, img in enumerate(sorted((REPO / "models" / "samples").glob("*.jpg")) * 4):
            shutil.copy(img, cam / f"{n:03d}.jpg")
    state = root / f"s-{mode}-{time.monotonic_ns()}"
    cfg = root / "c.toml"
    cfg.write_text(
        f'[device]\nstate_dir = "{state}"\n[camera]\nsource = "{cam}"\nloop = true\n'
        f'[detector]\nmodel = "{REPO / "models" / "demo-detector.onnx"}"\n[mqtt]\nenabled = false\n'
        f'[queue]\npath = "{state}/q.db"\n[output]\nmode = "{mode}"\n[health]\nstatus_file = "{state}/st.json"\n'
        '[[lines]]\nname = "l"\npoints = [[0.5, 0.0], [0.5, 1.0]]\n'
        '[[zones]]\nname = "z"\npolygon = [[0.1, 0.1], [0.6, 0.1], [0.6, 0.6], [0.1, 0.6]]\n'
    )
    t0 = time.monotonic()
    subprocess.run(
        [sys.executable, "-m", "edge_agent", "-q", "run", "--config", str(cfg), "--max-frames", str(frames)],
        check=True,
        capture_output=True,
    )
    return frames / (time.monotonic() - t0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--frames", type=int, default=300)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    print(f"tracker update, 20 objects: {tracker_ms():.3f} ms/frame (median)")
    with tempfile.TemporaryDirectory() as d:
        fps: dict[str, list[float]] = {"every_frame": [], "objects": []}
        for _ in range(args.runs):
            for mode in fps:
                fps[mode].append(loop_fps(Path(d), mode, args.frames))
    base, obj = statistics.median(fps["every_frame"]), statistics.median(fps["objects"])
    print(f"loop fps (incl. start-up): every_frame {base:.1f}, objects {obj:.1f}, ratio {obj / base:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
