"""Tracker benchmark on real pedestrian trajectories: ours vs supervision's ByteTrack, same detections.

    pip install motmetrics 'supervision==0.25.1'   # bench only, not project deps (0.26+ dropped ByteTrack)
    python tests/bench/bench_mot.py [--seeds 5] [--smoke]

Ground truth: TUD-Campus and TUD-Stadtmitte (MOT15) as shipped inside the motmetrics wheel
(``motmetrics/data/<seq>/gt.txt``). Detections are simulated from it with seeded noise at three
levels: box jitter (a fraction of the box size), missed detections (independent misses plus
occlusion-like runs), a confidence spread (most true boxes 0.5-0.95, some 0.1-0.5 as a detector
gives for partly hidden people), and false positives (mostly low confidence). Ours runs through
``edge-agent track`` (MOTChallenge in/out); the peer gets the very same boxes in-process. Both are
scored by motmetrics (IoU >= 0.5); ms/frame is the median over repeats of the in-process update loop.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

NOISE = {  # level: (jitter fraction, miss prob, occlusion-run prob, false positives per frame)
    "low": (0.03, 0.10, 0.01, 0.2),
    "mid": (0.06, 0.20, 0.02, 0.5),
    "high": (0.10, 0.30, 0.03, 1.0),
}
SEQS = ("TUD-Campus", "TUD-Stadtmitte")


def data_dir() -> Path:
    import motmetrics

    return Path(motmetrics.__file__).parent / "data"


def load_gt(seq: str) -> dict[int, list[tuple[int, float, float, float, float]]]:
    out: dict[int, list[tuple[int, float, float, float, float]]] = {}
    for line in (data_dir() / seq / "gt.txt").read_text().splitlines():
        c = line.split(",")
        out.setdefault(int(c[0]), []).append((int(c[1]), float(c[2]), float(c[3]), float(c[4]), float(c[5])))
    return out


def simulate(gt: dict[int, list[tuple[int, float, float, float, float]]], level: str, seed: int) -> list[str]:
    jit, miss, occ, fp = NOISE[level]
    rng = np.random.default_rng(seed)
    occluded: dict[int, int] = {}  # object id -> frames of its current miss run left
    allb = np.array([b[1:] for f in gt.values() for b in f])
    lines = []
    for frame in range(1, max(gt) + 1):
        for oid, x, y, w, h in gt.get(frame, []):
            if occluded.get(oid, 0) > 0:
                occluded[oid] -= 1
                continue
            if rng.random() < occ:
                occluded[oid] = int(rng.integers(3, 15))  # an occlusion: a run of misses
                continue
            if rng.random() < miss:
                continue
            x, y = x + rng.normal(0, jit * w), y + rng.normal(0, jit * h)
            w, h = w * (1 + rng.normal(0, jit)), h * (1 + rng.normal(0, jit))
            conf = rng.beta(5, 2) if rng.random() > 0.15 else rng.uniform(0.1, 0.5)
            lines.append(f"{frame},-1,{x:.1f},{y:.1f},{max(w, 2):.1f},{max(h, 2):.1f},{conf:.3f}")
        for _ in range(rng.poisson(fp)):
            w, h = allb[rng.integers(len(allb)), 2:]
            x, y = rng.uniform(0, 640 - w), rng.uniform(0, 480 - h)
            conf = rng.beta(2, 5)
            lines.append(f"{frame},-1,{x:.1f},{y:.1f},{w:.1f},{h:.1f},{conf:.3f}")
    return lines


def read_dets(lines: list[str]) -> dict[int, np.ndarray]:
    out: dict[int, list[list[float]]] = {}
    for line in lines:
        c = [float(v) for v in line.split(",")]
        out.setdefault(int(c[0]), []).append([c[2], c[3], c[2] + c[4], c[3] + c[5], c[6]])
    return {f: np.array(v) for f, v in out.items()}


def run_peer(dets: dict[int, np.ndarray], frames: int, fps: int) -> tuple[list[str], float]:
    import supervision as sv

    tr = sv.ByteTrack(frame_rate=fps)
    out, times = [], []
    for f in range(1, frames + 1):
        d = dets.get(f, np.zeros((0, 5)))
        det = sv.Detections(xyxy=d[:, :4].copy(), confidence=d[:, 4].copy(), class_id=np.zeros(len(d), int))
        t0 = time.perf_counter()
        res = tr.update_with_detections(det)
        times.append(time.perf_counter() - t0)
        for (x1, y1, x2, y2), tid in zip(res.xyxy, res.tracker_id):
            out.append(f"{f},{tid},{x1:.2f},{y1:.2f},{x2 - x1:.2f},{y2 - y1:.2f},1,-1,-1,-1")
    return out, statistics.median(times) * 1e3


def time_ours(dets: dict[int, np.ndarray], frames: int) -> float:
    from edge_agent.core.objects.tracker import Tracker

    tr = Tracker()
    times = []
    for f in range(1, frames + 1):
        d = dets.get(f, np.zeros((0, 5)))
        t0 = time.perf_counter()
        tr.update(d[:, :4], d[:, 4])
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def score(gt_path: Path, res_path: Path) -> dict[str, float]:
    import motmetrics as mm

    if not hasattr(np, "asfarray"):  # motmetrics 1.4.0 still calls np.asfarray, gone in numpy 2
        np.asfarray = lambda a, dtype=np.float64: np.asarray(a, dtype=dtype)  # type: ignore[attr-defined]

    gt = mm.io.loadtxt(str(gt_path), fmt="mot15-2D", min_confidence=1)
    ts = mm.io.loadtxt(str(res_path), fmt="mot15-2D")
    acc = mm.utils.compare_to_groundtruth(gt, ts, "iou", distth=0.5)
    m = mm.metrics.create().compute(acc, metrics=["mota", "idf1", "num_switches"], name="x")
    return {
        "mota": float(m["mota"].iloc[0]),
        "idf1": float(m["idf1"].iloc[0]),
        "idsw": int(m["num_switches"].iloc[0]),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=5, help="noise seeds per cell (metrics are averaged)")
    ap.add_argument("--smoke", action="store_true", help="one seed, TUD-Campus, low noise only")
    args = ap.parse_args()
    seqs = SEQS[:1] if args.smoke else SEQS
    levels = ["low"] if args.smoke else list(NOISE)
    seeds = 1 if args.smoke else args.seeds
    print(
        "| sequence | noise | IDF1 ours / peer | MOTA ours / peer | ID sw ours / peer | ms/frame ours / peer |"
    )
    print("|---|---|---|---|---|---|")
    worse = 0
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        for seq in seqs:
            gt = load_gt(seq)
            frames = max(gt)
            for level in levels:
                cells: dict[str, list[dict[str, float]]] = {"ours": [], "peer": []}
                for seed in range(seeds):
                    lines = simulate(gt, level, 1000 * seed + len(seq))
                    det = root / "det.txt"
                    det.write_text("\n".join(lines) + "\n")
                    ours = root / "ours.txt"
                    subprocess.run(
                        [sys.executable, "-m", "edge_agent", "-q", "track", "-d", str(det), "-o", str(ours)],
                        check=True,
                        capture_output=True,
                    )
                    dets = read_dets(lines)
                    peer_lines, peer_ms = run_peer(dets, frames, 25)
                    peer = root / "peer.txt"
                    peer.write_text("\n".join(peer_lines) + "\n")
                    cells["ours"].append(
                        {**score(data_dir() / seq / "gt.txt", ours), "ms": time_ours(dets, frames)}
                    )
                    cells["peer"].append({**score(data_dir() / seq / "gt.txt", peer), "ms": peer_ms})
                o = {k: statistics.mean(c[k] for c in cells["ours"]) for k in ("idf1", "mota", "idsw", "ms")}
                p = {k: statistics.mean(c[k] for c in cells["peer"]) for k in ("idf1", "mota", "idsw", "ms")}
                worse += o["idf1"] < p["idf1"] or o["idsw"] > p["idsw"]
                print(
                    f"| {seq} | {level} | {o['idf1']:.3f} / {p['idf1']:.3f} | {o['mota']:.3f} / {p['mota']:.3f} "
                    f"| {o['idsw']:.1f} / {p['idsw']:.1f} | {o['ms']:.3f} / {p['ms']:.3f} |",
                    flush=True,
                )
    print(f"\ncells where ours is below the goal (IDF1 < peer or ID switches > peer): {worse}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
