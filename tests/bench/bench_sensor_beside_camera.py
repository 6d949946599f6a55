"""The camera loop with and without a sensor model beside it, alternated in one run.

    python tests/bench/bench_sensor_beside_camera.py [--frames N] [--repeat R] [--rate HZ]

Each run is ``edge-agent run --max-frames N`` on the bundled samples as a looping folder camera
with the demo detector (free-running, 1 thread); the "with" runs add a ``[sensor]`` on a pty that a
thread feeds the BasicMotions test recording at ``--rate`` readings/s (default 100: ten times the
recorded rate) and the demo sensor model on it. Reported per run: the agent's own frame rate from
its last status (``fps``, the last 50 frames) and the sensor model's windows; then the medians and
the ratio with/without.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHANNELS = ["acc_x", "acc_y", "acc_z", "gyr_x", "gyr_y", "gyr_z"]


def feed(master: int, lines: list[bytes], rate: float, stop: threading.Event) -> None:
    start, i = time.monotonic(), 0
    while not stop.is_set():
        delay = start + i / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        try:
            os.write(master, lines[i % len(lines)])
        except OSError:
            return
        i += 1


def one_run(
    tmp: Path, frames: int, sensor: bool, rate: float, lines: list[bytes], model: bool = True
) -> dict[str, object]:
    """``sensor``: a pty sensor fed at ``rate``; ``model``: and the demo sensor model on it."""
    state = tmp / ("without" if not sensor else "with" if model else "reader")
    state.mkdir(parents=True, exist_ok=True)
    cfg = [
        f'[device]\nid = "bench"\nstate_dir = "{state}"\n',
        f'[camera]\nsource = "{ROOT / "models" / "samples"}"\nloop = true\n',
        f'[detector]\nmodel = "{ROOT / "models" / "demo-detector.onnx"}"\nthreads = 1\n',
        "[mqtt]\nenabled = false\n",
        f'[queue]\npath = "{state / "outbox.db"}"\n',
        f'[health]\nstatus_file = "{state / "status.json"}"\n',
    ]
    master, stop = -1, threading.Event()
    feeder = None
    if sensor:
        master, slave = os.openpty()
        link = state / "tty"
        link.unlink(missing_ok=True)
        link.symlink_to(os.ttyname(slave))
        os.close(slave)
        cfg.append(f'[sensor]\nport = "{link}"\nprotocol = "jsonl"\nattach_to_results = false\n')
        if model:
            cfg.append(
                f'[[sensor_models]]\nname = "activity"\nmodel = "{ROOT / "models" / "demo-sensor.onnx"}"\nrate_hz = 0\n'
            )
        feeder = threading.Thread(target=feed, args=(master, lines, rate, stop), daemon=True)
        feeder.start()
    path = state / "config.toml"
    path.write_text("".join(cfg))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    t0 = time.monotonic()
    r = subprocess.run(
        [sys.executable, "-m", "edge_agent", "-q", "run", "--config", str(path), "--max-frames", str(frames)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    wall = time.monotonic() - t0
    stop.set()
    if feeder is not None:
        feeder.join(2)
        os.close(master)
    if r.returncode != 0:
        raise SystemExit(r.stderr[-2000:])
    status = json.loads((state / "status.json").read_text())
    models = (status.get("sensor") or {}).get("models") or {}
    return {
        "sensor": sensor,
        "model": sensor and model,
        "fps": status["fps"],
        "wall_s": round(wall, 2),
        "windows": (models.get("activity") or {}).get("windows"),
        "infer_ms_p50": (models.get("activity") or {}).get("infer_ms_p50"),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--frames", type=int, default=1500)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--rate", type=float, default=100.0, help="sensor readings per second")
    args = ap.parse_args()
    rows = list(csv.DictReader((ROOT / "models" / "data" / "basicmotions" / "test.csv").open(newline="")))
    recorded = [(json.dumps({c: float(r[c]) for c in CHANNELS}) + "\n").encode() for r in rows]
    results: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.repeat):
            for sensor, model in ((False, False), (True, False), (True, True)):
                res = one_run(Path(tmp), args.frames, sensor, args.rate, recorded, model)
                print(json.dumps(res))
                results.append(res)

    def med(sensor: bool, model: bool) -> float:
        fps = [float(r["fps"]) for r in results if (r["sensor"], r["model"]) == (sensor, model)]  # type: ignore[arg-type]
        return statistics.median(fps)

    without, reader, both = med(False, False), med(True, False), med(True, True)
    print(
        f"median fps: no sensor {without:.1f}; the reader alone at {args.rate:g} readings/s {reader:.1f} "
        f"({reader / without:.3f}); reader + sensor model {both:.1f} ({both / without:.3f}; "
        f"{both / reader:.3f} of the reader alone)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
