"""Tracker benchmark on real pedestrian trajectories: ours vs supervision's and Ultralytics' ByteTrack.

    pip install motmetrics 'supervision==0.25.1' ultralytics lapx   # bench only, not project deps (0.26+ dropped ByteTrack)
    python tests/bench/bench_mot.py [--seeds 10] [--seed-start 0] [--smoke] [--peers supervision,ultralytics]

Ground truth: TUD-Campus and TUD-Stadtmitte (MOT15) as shipped inside the motmetrics wheel
(``motmetrics/data/<seq>/gt.txt``). Detections are simulated from it with seeded noise at three
levels: box jitter (a fraction of the box size), missed detections (independent misses plus
occlusion-like runs), a confidence spread (most true boxes 0.5-0.95, some 0.1-0.5 as a detector
gives for partly hidden people), and false positives (mostly low confidence). Ours runs through
``edge-agent track`` (MOTChallenge in/out); the peers (supervision 0.25.1's ByteTrack, Ultralytics'
BYTETracker with its default bytetrack.yaml; those installed) get the very same boxes in-process.
All are scored by motmetrics (IoU >= 0.5); each cell is the mean (min..max) over the seeds; ms/frame
is the median of the in-process update loop. The goal: ours >= the best peer's IDF1 and <= the best
peer's ID switches (means), in every cell.
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


class _Boxes:
    """What Ultralytics' BYTETracker reads of a ``Results.boxes`` (numpy): conf, cls, xywh, xyxy, and
    boolean indexing; the detections fed in-process exactly as supervision's are."""

    def __init__(self, d: np.ndarray) -> None:
        self.data = d
        self.xyxy = d[:, :4]
        self.conf = d[:, 4]
        self.cls = np.zeros(len(d))
        wh = self.xyxy[:, 2:] - self.xyxy[:, :2]
        self.xywh = np.concatenate([self.xyxy[:, :2] + wh / 2, wh], axis=1)

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, idx: np.ndarray) -> _Boxes:
        return _Boxes(self.data[idx])


def _peer_supervision(fps: int):  # type: ignore[no-untyped-def]
    import supervision as sv

    tr = sv.ByteTrack(frame_rate=fps)

    def step(d: np.ndarray) -> list[tuple[int, np.ndarray]]:
        det = sv.Detections(xyxy=d[:, :4].copy(), confidence=d[:, 4].copy(), class_id=np.zeros(len(d), int))
        res = tr.update_with_detections(det)
        return list(zip(res.tracker_id.tolist(), res.xyxy))

    return step


def _peer_ultralytics(fps: int):  # type: ignore[no-untyped-def]
    from ultralytics.trackers.byte_tracker import BYTETracker
    from ultralytics.utils import YAML, IterableSimpleNamespace
    from ultralytics.utils.checks import check_yaml

    # its default bytetrack.yaml, as model.track(tracker="bytetrack.yaml") loads it (8.4 has no frame
    # rate argument: track_buffer 30 is frames)
    tr = BYTETracker(IterableSimpleNamespace(**YAML.load(check_yaml("bytetrack.yaml"))))

    def step(d: np.ndarray) -> list[tuple[int, np.ndarray]]:
        res = tr.update(_Boxes(d))
        return [(int(r[4]), r[:4]) for r in res]

    return step


PEERS = {"supervision": _peer_supervision, "ultralytics": _peer_ultralytics}


def available_peers() -> list[str]:
    """The peers whose package is installed (the smoke test runs with supervision alone)."""
    import importlib.util

    return [n for n in PEERS if importlib.util.find_spec(n) is not None]


def run_peer(name: str, dets: dict[int, np.ndarray], frames: int, fps: int) -> tuple[list[str], float]:
    step = PEERS[name](fps)
    out, times = [], []
    for f in range(1, frames + 1):
        d = dets.get(f, np.zeros((0, 5)))
        t0 = time.perf_counter()
        res = step(d)
        times.append(time.perf_counter() - t0)
        for tid, (x1, y1, x2, y2) in res:
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


def spread(vals: list[float], fmt: str) -> str:
    """mean (min..max) across seeds."""
    return f"{statistics.mean(vals):{fmt}} ({min(vals):{fmt}}..{max(vals):{fmt}})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=10, help="noise seeds per cell (mean and min..max)")
    ap.add_argument(
        "--seed-start", type=int, default=0, help="first seed (10 with --seeds 20: held-out seeds)"
    )
    ap.add_argument("--smoke", action="store_true", help="one seed, TUD-Campus, low noise only")
    ap.add_argument(
        "--peers", default=",".join(available_peers()), help="comma-separated, of: " + ", ".join(PEERS)
    )
    args = ap.parse_args()
    seqs = SEQS[:1] if args.smoke else SEQS
    levels = ["low"] if args.smoke else list(NOISE)
    seeds = 1 if args.smoke else args.seeds
    peers = [p for p in args.peers.split(",") if p]
    names = ["ours", *peers]
    who = " / ".join(names)
    print(f"mean (min..max) over {seeds} seeds from {args.seed_start}; columns: {who}\n")
    print(f"| sequence | noise | IDF1 {who} | ID sw {who} | MOTA {who} | ms/frame {who} |")
    print("|---|---|---|---|---|---|")
    worse = 0
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        for seq in seqs:
            gt = load_gt(seq)
            frames = max(gt)
            gt_path = data_dir() / seq / "gt.txt"
            for level in levels:
                cells: dict[str, list[dict[str, float]]] = {n: [] for n in names}
                for seed in range(args.seed_start, args.seed_start + seeds):
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
                    cells["ours"].append({**score(gt_path, ours), "ms": time_ours(dets, frames)})
                    for name in peers:
                        peer_lines, peer_ms = run_peer(name, dets, frames, 25)
                        peer = root / f"{name}.txt"
                        peer.write_text("\n".join(peer_lines) + "\n")
                        cells[name].append({**score(gt_path, peer), "ms": peer_ms})
                m = {n: {k: statistics.mean(c[k] for c in cells[n]) for k in ("idf1", "idsw")} for n in names}
                best_idf1 = max(m[n]["idf1"] for n in peers) if peers else 0.0
                best_idsw = min(m[n]["idsw"] for n in peers) if peers else float("inf")
                worse += m["ours"]["idf1"] < best_idf1 or m["ours"]["idsw"] > best_idsw
                col = {
                    k: " / ".join(spread([c[k] for c in cells[n]], f) for n in names)
                    for k, f in (("idf1", ".3f"), ("idsw", ".1f"), ("mota", ".3f"), ("ms", ".2f"))
                }
                print(
                    f"| {seq} | {level} | {col['idf1']} | {col['idsw']} | {col['mota']} | {col['ms']} |",
                    flush=True,
                )
    print(
        f"\ncells where ours is below the goal (IDF1 < the best peer's or ID switches > the best peer's): {worse}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
