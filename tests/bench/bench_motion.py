"""Motion gating benchmark: CPU seconds per minute on a still scene with vs without ``[motion]``, and
missed events on a clip with real objects walking in and out (run by hand, not a test):

    python tests/bench/bench_motion.py [--model M] [--seconds 30] [--fps 10]

Both clips are made here from real frames (never downloaded): the background is a crop of a real
photo on which the detector finds nothing, the objects are the detector's own person crops from
``../shared/images/bus.jpg`` (or the bundled samples with the demo detector when ../shared is
absent); every frame carries Gaussian sensor noise (sigma 3). The agent runs in this process on a
folder camera replayed at ``--fps`` (camera.fps), output mode "event"; CPU is this process's
user+system time (all threads) over the run, scaled to one minute of wall time.

An event is a result the ungated run emitted because its set of labels changed; it is *missed*
when the gated run never emitted the same label set within ``--tolerance`` frames of it.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import cv2
import numpy as np

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from support.clip import noisy, paste  # noqa: E402
from support.world import agent_toml  # noqa: E402

from edge_agent.adapters.runtime.onnx_model import OnnxModel  # noqa: E402
from edge_agent.app.agent.agent import Agent  # noqa: E402
from edge_agent.core.config.schema import parse_config  # noqa: E402
from edge_agent.inference.pipeline import Detector  # noqa: E402

W, H = 640, 360


def empty_background(det: Detector, photos: list[np.ndarray]) -> np.ndarray:
    """The most textured 16:9 window of the photos (upscaled to W x H) with no detection at all."""
    best: tuple[float, np.ndarray] | None = None
    for img in photos:
        h, w = img.shape[:2]
        for frac in (0.5, 0.35):
            cw, ch = int(w * frac), int(w * frac * 9 / 16)
            for y in range(0, h - ch + 1, max(1, ch // 2)):
                for x in range(0, w - cw + 1, max(1, cw // 2)):
                    crop = cv2.resize(img[y : y + ch, x : x + cw], (W, H), interpolation=cv2.INTER_LINEAR)
                    if len(det.detect(crop).detections) == 0:
                        texture = float(
                            cv2.Laplacian(cv2.cvtColor(crop, cv2.COLOR_BGR2GRAY), cv2.CV_32F).var()
                        )
                        if best is None or texture > best[0]:
                            best = (texture, crop)
    if best is None:
        raise SystemExit("no detection-free window in the photos to use as a background")
    return best[1]


def object_crops(det: Detector, photo: np.ndarray, label: str, n: int) -> list[np.ndarray]:
    """The detector's ``n`` most confident ``label`` boxes, cropped and scaled to 70 % of H."""
    out = det.detect(photo).detections
    names = det.names
    picks = sorted(
        (
            (float(s), b)
            for b, s, c in zip(out.boxes, out.scores, out.class_ids)
            if names.get(int(c)) == label
        ),
        key=lambda t: -t[0],
    )[:n]
    crops = []
    for _, (x1, y1, x2, y2) in picks:
        crop = photo[int(y1) : int(y2), int(x1) : int(x2)]
        s = 0.7 * H / crop.shape[0]
        crops.append(cv2.resize(crop, (max(1, int(crop.shape[1] * s)), int(0.7 * H))))
    return crops


def event_clip(bg: np.ndarray, objs: list[np.ndarray], walk: int, stay: int, gap: int) -> list[np.ndarray]:
    """Each object walks in from the left, stays, walks out to the right; quiet gaps between."""
    rng = np.random.default_rng(1)
    frames = [noisy(bg, rng) for _ in range(gap)]
    for obj in objs:
        w = obj.shape[1]
        y = H - obj.shape[0] - 10
        mid = (W - w) // 2
        xs = [int(-w + (mid + w) * (i + 1) / walk) for i in range(walk)] + [mid] * stay
        xs += [int(mid + (W - mid) * (i + 1) / walk) for i in range(walk)]
        frames += [noisy(paste(bg, obj, x, y), rng) for x in xs]
        frames += [noisy(bg, rng) for _ in range(gap)]
    return frames


def write_clip(frames: list[np.ndarray], folder: Path) -> None:
    folder.mkdir(parents=True)
    for i, f in enumerate(frames):
        cv2.imwrite(str(folder / f"{i:05d}.jpg"), f, [cv2.IMWRITE_JPEG_QUALITY, 90])


def run(model: Path, clip: Path, root: Path, fps: float, motion: bool, threads: int | None) -> dict[str, Any]:
    state = root / f"state-{clip.name}-{motion}"
    state.mkdir()
    cfg = parse_config(
        agent_toml(
            state,
            clip,
            model,
            extra=f"[motion]\nenabled = {str(motion).lower()}",
            device={"id": None},
            camera={"fps": fps},
            detector={"threads": threads} if threads else {},
            queue={"path": str(state / "q.db")},
            output={"mode": "event"},
        )
    )
    events: list[tuple[int, Counter[str], str]] = []

    def on_result(body: dict[str, Any]) -> None:
        labels = Counter(d["label"] for d in body["detections"])
        events.append((int(Path(body["image"]).stem), labels, body["event"]))

    agent = Agent(cfg, on_result=on_result)
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.monotonic()
    agent.run()
    wall = time.monotonic() - t0
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return {
        "wall_s": wall,
        "cpu_s": cpu,
        "cpu_s_per_min": cpu / wall * 60,
        "inferred": agent.frames,
        "events": events,
    }


def missed(
    ungated: list[tuple[int, Counter[str], str]], gated: list[tuple[int, Counter[str], str]], tol: int
) -> list[Any]:
    out = []
    for i, labels, reason in ungated:
        if reason != "change":
            continue
        if not any(abs(j - i) <= tol and lab == labels for j, lab, _ in gated):
            out.append((i, dict(labels)))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path)
    ap.add_argument("--seconds", type=float, default=30.0, help="length of the still clip")
    ap.add_argument("--fps", type=float, default=10.0, help="camera rate the clips are replayed at")
    ap.add_argument("--threads", type=int)
    ap.add_argument("--tolerance", type=int, default=5, help="frames an event may be early/late")
    a = ap.parse_args()
    if a.model is None:
        a.model = (
            SHARED / "models/yolov8n-coco-fp32.onnx"
            if (SHARED / "models").is_dir()
            else REPO / "models/demo-detector.onnx"
        )
    det = Detector(OnnxModel(a.model, threads=a.threads))
    if (SHARED / "images").is_dir():
        photos = [cv2.imread(str(p)) for p in sorted((SHARED / "images").glob("*.jpg"))]
        objs = object_crops(det, photos[0], "person", 2)
    else:
        photos = [cv2.imread(str(p)) for p in sorted((REPO / "models/samples").glob("*.jpg"))]
        objs = [p[40:200, 120:200] for p in photos[:2]]
    bg = empty_background(det, photos)
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        rng = np.random.default_rng(0)
        write_clip([noisy(bg, rng) for _ in range(int(a.seconds * a.fps))], root / "still")
        write_clip(event_clip(bg, objs, walk=15, stay=20, gap=30), root / "events")
        res = {}
        for clip in ("still", "events"):
            for motion in (False, True):
                res[(clip, motion)] = run(a.model, root / clip, root, a.fps, motion, a.threads)
    s_off, s_on = res[("still", False)], res[("still", True)]
    e_off, e_on = res[("events", False)], res[("events", True)]
    miss = missed(e_off["events"], e_on["events"], a.tolerance)
    n_events = sum(1 for *_, r in e_off["events"] if r == "change")
    report = {
        "model": str(a.model),
        "fps": a.fps,
        "still_clip_s": a.seconds,
        "still_cpu_s_per_min_ungated": round(s_off["cpu_s_per_min"], 2),
        "still_cpu_s_per_min_gated": round(s_on["cpu_s_per_min"], 2),
        "still_cpu_ratio": round(s_off["cpu_s_per_min"] / max(s_on["cpu_s_per_min"], 1e-9), 1),
        "still_inferred_ungated": s_off["inferred"],
        "still_inferred_gated": s_on["inferred"],
        "events_ungated": n_events,
        "events_missed_by_gated": len(miss),
        "missed": miss,
        "events_inferred_ungated": e_off["inferred"],
        "events_inferred_gated": e_on["inferred"],
        "ungated_event_list": [(i, dict(lab)) for i, lab, r in e_off["events"] if r == "change"],
    }
    print(json.dumps(report, indent=1))
    print(
        f"motion gating: still scene {report['still_cpu_s_per_min_ungated']} -> {report['still_cpu_s_per_min_gated']} "
        f"CPU s/min ({report['still_cpu_ratio']}x less); events: {n_events} reported ungated, {len(miss)} missed gated"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
