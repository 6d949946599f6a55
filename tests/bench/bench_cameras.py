"""Capacity planning for several cameras (issue 34): how many cameras at what fps this board carries.

    python tests/bench/bench_cameras.py capacity [--model M] [--max-cameras 8] [--fps 15] [--seconds 15]
    python tests/bench/bench_cameras.py side-by-side [--model M] [--cameras 4] [--seconds 20] [--repeat 3]

One ``edge-agent run`` (a child process) per measurement, with N ``[[cameras]]`` on one shared
model set. ``capacity``: N = 1..max live MJPEG-over-HTTP cameras, each served at ``--fps`` by a
local server in this process (pre-encoded frames, so serving costs next to nothing and the measure
is the agent's): aggregate processed frames/s, per-camera fps (min/max), the frame age at inference
(the worst camera's median), frames dropped as stale, RSS; then the largest N whose every camera
keeps >= 90 % of ``--fps``. ``side-by-side``: free-running looping folders (as fast as inference
goes), 1 camera vs N cameras in one agent, alternated ``--repeat`` times (medians), then two separate 1-camera agents at once (what a
second service costs): aggregate fps ratio (goal >= 0.95), RSS ratio (goal <= 1.25; N separate
agents: ~N x), per-camera spread under equal load (goal: within 10 %).

Frames: PETS09 (../shared/videos, people walking, 480x360) when present, else the demo samples.
Figures are read from the agent's status file: ``processed`` counters over a window (not the
50-frame ``fps``), ``frame_age_ms``, ``dropped_stale``; RSS from /proc/PID/status. A bench script,
not ``edge-agent bench --cameras``: it needs local camera servers, which belong to the tests, and
``tools`` may not import the agent (docs/performance.md "Several cameras" has the figures).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Optional

import cv2

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"
DEMO = REPO / "models" / "demo-detector-int8.onnx"
BOUNDARY = "frame"
SUSTAINED = 0.9  # a camera keeps up when it is inferred at >= 90 % of its source's rate


def frames(limit: int = 60) -> list[bytes]:
    """Distinct JPEG frames (a live source repeating one frame would count as frozen)."""
    video = SHARED / "videos" / "pets09-s2l1-480x360.avi"
    out: list[bytes] = []
    if video.exists():
        cap = cv2.VideoCapture(str(video))
        while len(out) < limit:
            ok, img = cap.read()
            if not ok:
                break
            out.append(cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, 85])[1].tobytes())
        cap.release()
    if not out:
        out = [p.read_bytes() for p in sorted((REPO / "models" / "samples").glob("*.jpg"))]
    return out


class MjpegCameras:
    """``http://127.0.0.1:PORT/camK``: multipart MJPEG at a fixed rate, one stream per GET."""

    def __init__(self, jpegs: list[bytes], fps: float) -> None:
        period = 1.0 / fps
        stop = self.stop = threading.Event()

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", f"multipart/x-mixed-replace;boundary={BOUNDARY}")
                self.end_headers()
                n, due = 0, time.monotonic()
                try:
                    while not stop.is_set():
                        jpg = jpegs[n % len(jpegs)]
                        head = f"\r\n--{BOUNDARY}\r\nContent-Type: image/jpeg\r\nContent-Length: {len(jpg)}\r\n\r\n"
                        self.wfile.write(head.encode() + jpg)
                        self.wfile.flush()
                        n += 1
                        # a fixed schedule (a late frame does not slow the next ones), but no burst
                        # to catch up after this process was not scheduled for a while
                        due = max(due + period, time.monotonic() - period)
                        stop.wait(max(0.0, due - time.monotonic()))
                except (BrokenPipeError, ConnectionResetError):
                    return

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def url(self, k: int) -> str:
        return f"http://127.0.0.1:{self.port}/cam{k}"

    def close(self) -> None:
        self.stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def config(root: Path, model: Path, sources: list[str], fps: Optional[float] = None) -> Path:
    """N ``[[cameras]]`` (MJPEG URLs, or looping folders), no broker, every frame queued."""
    cams = "".join(
        f'[[cameras]]\nid = "cam{k}"\nsource = "{s}"\n' + ("" if s.startswith("http") else "loop = true\n")
        for k, s in enumerate(sources)
    )
    cfg = root / "agent.toml"
    cfg.write_text(
        f'[device]\nid = "bench"\nstate_dir = "{root}"\n[detector]\nmodel = "{model}"\n'
        f'[mqtt]\nenabled = false\n[queue]\npath = "{root}/q.db"\n[output]\nmode = "every_frame"\n'
        f'[health]\nstatus_file = "{root}/status.json"\n{cams}'
    )
    return cfg


class Run:
    """One ``edge-agent run`` of ``cfg`` until :meth:`stop`."""

    def __init__(self, cfg: Path) -> None:
        self.status_file = cfg.parent / "status.json"
        self.log = open(cfg.with_suffix(".log"), "wb")  # noqa: SIM115 -- closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "edge_agent", "-q", "run", "--config", str(cfg)],
            stdout=self.log,
            stderr=self.log,
            cwd=cfg.parent,  # not the checkout: `-m` puts the cwd first on sys.path
        )

    def status(self) -> dict[str, Any]:
        try:
            s = json.loads(self.status_file.read_text())
        except (OSError, ValueError):
            return {}
        return s if s.get("state") == "running" else {}

    def wait_streaming(self, n: int, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            cams = self.status().get("cameras") or {}
            if len(cams) == n and all(c["processed"] > 0 for c in cams.values()):
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.2)
        raise SystemExit(f"agent did not stream {n} cameras: {self.status()} (log {self.log.name})")

    def rss_mb(self) -> tuple[float, float]:
        """(VmRSS, VmHWM) of the agent in MB."""
        fields = dict(
            line.split(":", 1) for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines()
        )
        return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self.log.close()


def window(run: Run, seconds: float) -> dict[str, Any]:
    """Per-camera processed fps over ``seconds`` of two status snapshots (their ``uptime_s``)."""
    first = run.status()
    while not first:
        time.sleep(0.1)
        first = run.status()
    time.sleep(seconds)
    last = run.status()
    while not last or last["uptime_s"] < first["uptime_s"] + seconds:
        time.sleep(0.1)
        last = run.status()
    dt = last["uptime_s"] - first["uptime_s"]
    cams0, cams1 = first["cameras"], last["cameras"]
    fps = {c: (cams1[c]["processed"] - cams0[c]["processed"]) / dt for c in cams1}
    ages = [c["frame_age_ms"] for c in cams1.values() if c["frame_age_ms"] is not None]
    rss, hwm = run.rss_mb()
    return {
        "cameras": len(fps),
        "aggregate_fps": round(sum(fps.values()), 2),
        "per_camera_fps_min": round(min(fps.values()), 2),
        "per_camera_fps_max": round(max(fps.values()), 2),
        "spread": round(max(fps.values()) / min(fps.values()) - 1, 3) if min(fps.values()) > 0 else None,
        "fps_in_min": round(min(c["fps_in"] for c in cams1.values()), 2),
        "frame_age_ms_worst": max(ages) if ages else None,
        "dropped_stale": sum(cams1[c]["dropped_stale"] - cams0[c]["dropped_stale"] for c in cams1),
        "infer_ms": last["latency_ms"].get("infer"),
        "first_camera_latency_ms": last["latency_ms"],
        "loop_busy": round(sum(fps.values()) * last["latency_ms"].get("total", 0.0) / 1000, 3),
        "rss_mb": round(rss, 1),
        "peak_rss_mb": round(hwm, 1),
        "window_s": round(dt, 1),
    }


def measure(model: Path, sources: list[str], seconds: float, warmup: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as d:
        run = Run(config(Path(d), model, sources))
        try:
            run.wait_streaming(len(sources))
            time.sleep(warmup)
            return window(run, seconds)
        finally:
            run.stop()


def capacity(a: argparse.Namespace) -> None:
    server = MjpegCameras(frames(), a.fps)
    rows = []
    try:
        for n in range(a.min_cameras, a.max_cameras + 1):
            row = measure(a.model, [server.url(k) for k in range(n)], a.seconds, a.warmup)
            row["source_fps"] = a.fps
            row["sustained"] = row["per_camera_fps_min"] >= SUSTAINED * a.fps
            rows.append(row)
            print(json.dumps(row), flush=True)
    finally:
        server.close()
    ok = [r["cameras"] for r in rows if r["sustained"]]
    best = max(rows, key=lambda r: r["aggregate_fps"])
    top = max(ok) if ok else 0
    print(
        f"sustains {top} camera(s) at >= {SUSTAINED * a.fps:g} fps each (source {a.fps:g} fps); "
        f"the most it inferred: {best['aggregate_fps']} frames/s in all with {best['cameras']} cameras "
        f"({best['per_camera_fps_min']}..{best['per_camera_fps_max']} fps each)"
    )


def side_by_side(a: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as d:
        folder = Path(d) / "frames"
        folder.mkdir()
        for i, jpg in enumerate(frames(30)):
            (folder / f"{i:03d}.jpg").write_bytes(jpg)
        ones, manys = [], []
        for _ in range(a.repeat):  # alternated: a shared machine's load drifts between two runs
            ones.append(measure(a.model, [str(folder)], a.seconds, a.warmup))
            manys.append(measure(a.model, [str(folder)] * a.cameras, a.seconds, a.warmup))
            print(json.dumps({"one_camera": ones[-1], f"{a.cameras}_cameras": manys[-1]}), flush=True)
        one = sorted(ones, key=lambda r: r["aggregate_fps"])[len(ones) // 2]  # the median runs
        many = sorted(manys, key=lambda r: r["aggregate_fps"])[len(manys) // 2]
        # two separate one-camera agents at once: the second service's own RSS
        roots = [Path(d) / f"agent{i}" for i in (1, 2)]
        runs = []
        for root in roots:
            root.mkdir()
            runs.append(Run(config(root, a.model, [str(folder)])))
        try:
            for run in runs:
                run.wait_streaming(1)
            time.sleep(a.warmup)
            separate = [run.rss_mb()[0] for run in runs]
        finally:
            for run in runs:
                run.stop()
    print(
        json.dumps(
            {
                "median_of": a.repeat,
                "ratio_per_pair": [
                    round(m["aggregate_fps"] / o["aggregate_fps"], 3) for o, m in zip(ones, manys)
                ],
                "aggregate_fps_ratio": round(many["aggregate_fps"] / one["aggregate_fps"], 3),
                "rss_ratio": round(many["rss_mb"] / one["rss_mb"], 3),
                "per_camera_spread": many["spread"],
                "two_separate_agents_rss_mb": [round(r, 1) for r in separate],
                f"{a.cameras}_separate_agents_rss_mb_estimate": round(a.cameras * sum(separate) / 2, 1),
            }
        )
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="what", required=True)
    for name in ("capacity", "side-by-side"):
        p = sub.add_parser(name)
        p.add_argument("--model", type=Path, default=DEMO, help="the detector (default: the demo INT8 model)")
        p.add_argument("--seconds", type=float, default=15.0, help="the measuring window")
        p.add_argument("--warmup", type=float, default=3.0, help="seconds after every camera streams")
    sub.choices["capacity"].add_argument("--min-cameras", type=int, default=1)
    sub.choices["capacity"].add_argument("--max-cameras", type=int, default=8)
    sub.choices["capacity"].add_argument("--fps", type=float, default=15.0, help="each camera's rate")
    sub.choices["side-by-side"].add_argument("--cameras", type=int, default=4)
    sub.choices["side-by-side"].add_argument("--repeat", type=int, default=3, help="1 vs N pairs, alternated")
    a = ap.parse_args()
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    (capacity if a.what == "capacity" else side_by_side)(a)


if __name__ == "__main__":
    main()
