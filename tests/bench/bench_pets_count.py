"""Line counting on a real clip with the real YOLOv8n: ours vs Ultralytics' ObjectCounter, same ONNX.

    pip install -e . ultralytics lapx      # bench only (a venv of its own: it pulls torch, opencv-python)
    python tests/bench/bench_pets_count.py [--conf 0.25] [--x 0.45] [--save-frames DIR]

The clip is PETS 2009 S2.L1 (../shared/videos/pets09-s2l1-480x360.avi, 795 frames at 10 fps), the
model ../shared/models/yolov8n-coco-fp32.onnx, class person. One vertical line at ``--x`` (a
fraction of the width) from 25 % to 85 % of the height cuts the path people walk along; moving
right is "in" for both (Ultralytics' rule for a vertical line; ours with in_side = "left" on a
line drawn top to bottom). Both count the box centre (ours: anchor = "center").

Ours runs as a user would: ``edge-agent infer CLIP --track --config F --json`` (the agent's
detector, tracker and line code). The peer is ``ultralytics.solutions.ObjectCounter(model=the
same ONNX, region=the same line, conf, classes=[0])`` with its default tracker (TrackTrack in 8.4)
and with ``tracker="bytetrack.yaml"``. No ground truth ships with the clip: the figures are the two
sides' counts and their ID statistics (tracks reported, tracks shorter than 1 s: a fragmented
person gives extra short tracks); ``--save-frames`` writes every frame with our tracks drawn, to
count crossings by eye. Skips (exit 0, saying why) when ../shared or ultralytics is absent.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"
CLIP = SHARED / "videos" / "pets09-s2l1-480x360.avi"
MODEL = SHARED / "models" / "yolov8n-coco-fp32.onnx"
FPS = 10.0  # the clip's own rate (its container says so; infer reads it from there too)
Y0, Y1 = 0.25, 0.85


def ours(conf: float, x: float, save: str | None) -> dict[str, object]:
    cfg = f"""
[detector]
model = "{MODEL}"
conf_threshold = {conf}
classes = ["person"]

[output]
mode = "objects"

[tracker]
anchor = "center"

[[lines]]
name = "path"
points = [[{x}, {Y0}], [{x}, {Y1}]]
in_side = "left"
"""
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "pets.toml"
        f.write_text(cfg)
        cmd = [
            sys.executable,
            "-m",
            "edge_agent",
            "-q",
            "infer",
            str(CLIP),
            "--track",
            "--config",
            str(f),
            "--json",
        ]
        if save:
            cmd += ["--save", save]
        t0 = time.perf_counter()
        r = subprocess.run(cmd, capture_output=True, text=True, check=True)
        secs = time.perf_counter() - t0
    evs = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    crossings = [e for e in evs if e.get("event") == "line_crossed"]
    ended = [e for e in evs if e.get("event") == "ended"]
    summary = next(e["summary"] for e in evs if "summary" in e)
    return {
        "in": sum(e["direction"] == "in" for e in crossings),
        "out": sum(e["direction"] == "out" for e in crossings),
        "crossings": [(int(e["frame"].rsplit("_", 1)[1]), e["object_id"], e["direction"]) for e in crossings],
        "ids": len(ended),
        "short": sum(e["duration_s"] < 1.0 for e in ended),
        "secs": secs,
        "summary": summary,
    }


def _torchvision_or_own_nms() -> None:
    """Ultralytics imports torchvision for its NMS. Where only a CPU torch wheel is at hand and the
    registry's torchvision is the CUDA build (its ops do not load: libc10_cuda.so), stand in a
    module whose ``ops.nms`` is Ultralytics' own ``TorchNMS.nms`` (which, by its docstring,
    matches torchvision's exactly); its NMS path is otherwise unchanged."""
    try:
        import torchvision

        torchvision.ops.nms  # noqa: B018 (raises when the compiled ops are missing)
        return
    except (ImportError, RuntimeError, OSError, AttributeError):
        for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
            del sys.modules[name]
    import types

    from ultralytics.utils.nms import TorchNMS

    shim = types.ModuleType("torchvision")
    shim.ops = types.SimpleNamespace(nms=TorchNMS.nms)  # type: ignore[attr-defined]
    shim.__version__ = "0+ultralytics-nms"  # type: ignore[attr-defined]
    sys.modules["torchvision"] = shim
    print("note: torchvision's ops do not load here; Ultralytics runs with its own TorchNMS.nms")


def peer(conf: float, x: float, tracker: str | None) -> dict[str, object]:
    import cv2

    _torchvision_or_own_nms()
    from ultralytics import solutions

    cap = cv2.VideoCapture(str(CLIP))
    w, h = cap.get(cv2.CAP_PROP_FRAME_WIDTH), cap.get(cv2.CAP_PROP_FRAME_HEIGHT)
    line = [(x * w, Y0 * h), (x * w, Y1 * h)]
    kw = {"tracker": tracker} if tracker else {}
    counter = solutions.ObjectCounter(
        model=str(MODEL), region=line, conf=conf, classes=[0], show=False, verbose=False, **kw
    )
    seen: dict[int, list[int]] = {}  # track id -> [first frame, last frame]
    crossings: list[tuple[int, int, str]] = []
    n = 0
    t0 = time.perf_counter()
    while True:
        ok, img = cap.read()
        if not ok:
            break
        before = (counter.in_count, counter.out_count)
        counted = set(counter.counted_ids)
        counter(img)
        for tid in counter.track_ids:
            seen.setdefault(int(tid), [n, n])[1] = n
        for tid in set(counter.counted_ids) - counted:
            crossings.append((n, int(tid), "in" if counter.in_count > before[0] else "out"))
        n += 1
    cap.release()
    return {
        "in": counter.in_count,
        "out": counter.out_count,
        "crossings": crossings,
        "ids": len(seen),
        "short": sum((b - a + 1) / FPS < 1.0 for a, b in seen.values()),
        "secs": time.perf_counter() - t0,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--conf", type=float, default=0.25, help="detector confidence threshold (both sides)")
    ap.add_argument("--x", type=float, default=0.45, help="the line's x, a fraction of the width")
    ap.add_argument("--save-frames", help="write our annotated frames here (to check crossings by eye)")
    ap.add_argument("--list", action="store_true", help="print every crossing (frame, id, direction)")
    ap.add_argument("--who", default="ours,ultralytics,ultralytics-bytetrack", help="which sides to run")
    args = ap.parse_args()
    if not CLIP.is_file() or not MODEL.is_file():
        print(f"skipped: {CLIP} or {MODEL} is absent (../shared is not part of the project)")
        return 0
    if importlib.util.find_spec("ultralytics") is None:
        print("skipped: ultralytics is not installed (bench only: pip install ultralytics lapx)")
        return 0
    who = args.who.split(",")
    rows = []
    if "ours" in who:
        rows.append(("ours (edge-agent infer --track)", ours(args.conf, args.x, args.save_frames)))
    if "ultralytics" in who:
        rows.append(("Ultralytics ObjectCounter (its default tracker)", peer(args.conf, args.x, None)))
    if "ultralytics-bytetrack" in who:
        rows.append(("Ultralytics ObjectCounter (bytetrack.yaml)", peer(args.conf, args.x, "bytetrack.yaml")))
    print(f"PETS09 S2.L1, 795 frames, yolov8n FP32 ONNX, person, conf {args.conf}, line x = {args.x}\n")
    print("| who | in | out | track ids | ids < 1 s | wall s |")
    print("|---|---|---|---|---|---|")
    for name, r in rows:
        print(f"| {name} | {r['in']} | {r['out']} | {r['ids']} | {r['short']} | {r['secs']:.0f} |")
    if args.list:
        for name, r in rows:
            print(f"\n{name}: {r['crossings']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
