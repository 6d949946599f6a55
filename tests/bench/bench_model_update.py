"""Model update over MQTT, end to end (run by hand, not collected by pytest).

    PYTHONPATH=$PWD python tests/bench/bench_model_update.py [--reps 3] [--ring 20] [--chunk-kb 256]

A running ``edge-agent run`` (YOLOv8n FP32 from ../shared, a folder camera at 2 fps) with a frame
ring of ``--ring`` frames; a YOLOv8n-sized package (the same FP32 file, ~12 MB) is pushed to a
local mosquitto. Measured per rep: first chunk published -> the status file shows the new model
(``switched``), split into transfer (-> handed to the inbox, from the agent's log), the gate's
own time on the ring (from the recorded outcome) and the rest (inbox pickup, staging with
sha256, the reload). Beside it, one ``session.run`` of the model, so the gate's cost reads as
"N model runs". Prints medians over ``--reps``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"
sys.path.insert(0, str(REPO / "tests"))

import cv2  # noqa: E402
from support.mqtt import Broker  # noqa: E402

from edge_agent.app.cli.configfile import load_config  # noqa: E402
from edge_agent.app.updates.push import push_package  # noqa: E402


def ring_frames(dest: Path, n: int) -> None:
    """``n`` varied frames from the two shared photos (crops and flips), named like the ring does."""
    dest.mkdir(parents=True)
    imgs = [cv2.imread(str(SHARED / "images" / f)) for f in ("bus.jpg", "zidane.jpg")]
    now = time.time()
    for i in range(n):
        img = imgs[i % 2]
        h, w = img.shape[:2]
        k = (i // 2) % 5
        crop = img[k * h // 20 : h - k * h // 20, k * w // 20 : w - k * w // 20]
        if i % 4 >= 2:
            crop = cv2.flip(crop, 1)
        cv2.imwrite(str(dest / f"{int((now - n + i) * 1000):015d}.jpg"), crop)


def log_time(log: str, needle: str) -> float:
    for line in log.splitlines():
        if needle in line:
            return datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()
    raise RuntimeError(f"{needle!r} not in the agent log")


def one_rep(root: Path, port: int, pkg: Path, ring: int, chunk: int, pub: str) -> dict[str, float]:
    state = root / "state"
    cfg_path = root / "config.toml"
    cfg_path.write_text(
        f"""
[device]
id = "bench-1"
state_dir = "{state}"
[camera]
source = "{SHARED / "images"}"
loop = true
interval_s = 0.5
[detector]
model = "{SHARED / "models" / "yolov8n-coco-fp32.onnx"}"
[mqtt]
port = {port}
status_interval_s = 5
[queue]
path = "{state}/outbox.db"
[health]
status_file = "{state}/status.json"
[model_update]
ring_frames = {ring}
ring_interval_s = 3600
trusted_keys = ["{pub}"]  # MQTT delivery is off without one
"""
    )
    if ring:
        ring_frames(state / "models" / "ring", ring)
    log = root / "agent.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "edge_agent", "run", "-c", str(cfg_path)], stdout=out, stderr=out
        )
    status = state / "status.json"

    def model_id() -> str:
        try:
            return str(json.loads(status.read_text())["models"]["detector"]["id"])
        except (OSError, ValueError, KeyError, TypeError):
            return ""

    try:
        deadline = time.monotonic() + 120
        while not model_id() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(2.0)  # the receiver's subscription is in place
        t0 = time.time()
        push_package(load_config(cfg_path), pkg, ["bench-1"], None)  # chunked as packed (--chunk-kb)
        while not model_id().startswith("detector.onnx@") and time.monotonic() < deadline + 300:
            time.sleep(0.01)
        t1 = time.time()
    finally:
        proc.terminate()
        proc.wait(30)
    text = log.read_text()
    last = json.loads((state / "models" / "active.json").read_text())["last"]
    assert last["outcome"] == "switched", last
    handed = log_time(text, "handed to the inbox")
    t1 = log_time(text, "reloaded: detector detector.onnx")  # the status file lags up to 2 s
    return {
        "first_chunk_to_switched_s": t1 - t0,
        "transfer_s": handed - t0,
        "gate_s": float(last["gate"]["seconds"]),
        "gate_images": float(last["gate"]["images"]),
        "rest_s": (t1 - t0) - (handed - t0) - float(last["gate"]["seconds"]),
    }


def one_inference_s() -> float:
    from edge_agent.adapters.runtime.onnx_model import OnnxModel
    from edge_agent.core.vision.preprocess import preprocess_detector

    m = OnnxModel(SHARED / "models" / "yolov8n-coco-fp32.onnx")
    blob, _ = preprocess_detector(cv2.imread(str(SHARED / "images" / "bus.jpg")), m.input_hw(), m.input.dtype)
    times = []
    for _ in range(10):
        t = time.perf_counter()
        m.run_single(blob)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--ring", type=int, default=20)
    ap.add_argument("--chunk-kb", type=int, default=256)
    args = ap.parse_args()
    if not (SHARED / "models" / "yolov8n-coco-fp32.onnx").is_file():
        sys.exit(f"needs {SHARED}/models/yolov8n-coco-fp32.onnx")
    with tempfile.TemporaryDirectory() as tmp:
        tmpd = Path(tmp)
        pkg = tmpd / "yolov8n.pkg"
        from edge_agent.adapters.updates.signing import generate_key

        pub = generate_key(tmpd / "bench.key")
        subprocess.run(
            [
                sys.executable,
                "-m",
                "edge_agent",
                "-q",
                "model",
                "pack",
                str(SHARED / "models" / "yolov8n-coco-fp32.onnx"),
                "-o",
                str(pkg),
                "--name",
                "yolov8n",
                "--version",
                "2",
                "--sign",
                str(tmpd / "bench.key"),
                "--for-device",
                "bench-1",
                "--chunk-kb",
                str(args.chunk_kb),
            ],
            check=True,
        )
        with Broker(tmpd / "broker") as broker:
            runs = []
            for i in range(args.reps):
                rep = tmpd / f"rep{i}"
                rep.mkdir()
                runs.append(one_rep(rep, broker.port, pkg, args.ring, args.chunk_kb * 1024, pub))
                print(json.dumps({k: round(v, 3) for k, v in runs[-1].items()}))
        inf = one_inference_s()
        size = pkg.stat().st_size
    med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    print(f"package {size} bytes; medians over {args.reps} reps:")
    for k, v in med.items():
        print(f"  {k:<28} {v:8.3f}")
    per_img = med["gate_s"] / max(med["gate_images"], 1)
    print(
        f"  one session.run (YOLOv8n FP32) {inf:8.3f} s; gate per ring image {per_img:.3f} s = {per_img / inf:.1f} runs"
    )


if __name__ == "__main__":
    main()
