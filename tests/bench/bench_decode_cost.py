"""CPU per frame with and without decoding/resizing to the model's size, and the agent loop's ratio.

    PYTHONPATH=$PWD python tests/bench/bench_decode_cost.py [--frames 60] [--reps 3] [--input 640]
        [--model M] [--threads 2] [--agent-frames 80] [--agent-reps 3] [--agent-fps 15]
        [--baseline-src DIR] [--skip-agent | --skip-cost] [--loops photos rtsp mjpeg]

Part 1, frame cost, in this process: for each source, ``full`` (no model input given to the
source: what every video source did before) and ``reduced`` (the model input given, as the agent
does), interleaved ``--reps`` times; each rep reads ``--frames`` frames and does what the agent
does to each before ``session.run``: ``read()``, the freeze checksum (zlib.crc32), letterbox +
blob for a ``--input`` square model. CPU = ``time.process_time()`` of this process (the servers
run in their own processes). Sources: the 810x1080 photo (bus.jpg) and the 1280x720 one
(zidane.jpg) as a folder, a 1920x1080 H.264 and an MJPEG-over-RTP stream from the test RTSP server
(tests/support/rtsp_server.py; zidane scaled to 1920x1080 as the picture, 4 noisy copies in turn), and MJPEG over HTTP
(4 noisy 1920x1080 JPEGs of zidane in turn, served by a child process).

Part 2, the agent loop (``edge-agent run`` as a child, bench_agent.run_agent): processed fps
against 1 / bare ``session.run`` of ``--model`` at ``--threads``, on the photos (a looping folder
of bus + zidane, as bench_agent), the 1920x1080 H.264 RTSP stream and the MJPEG HTTP stream; with ``--baseline-src DIR`` (``git archive <commit>`` of the tree
before) that tree runs too, alternating, for a before/after in one run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import cv2
import numpy as np

REPO = Path(__file__).resolve().parents[2]
# ../shared beside the checkout (a worktree one level deeper finds it further up)
SHARED = next((p / "shared" for p in REPO.parents if (p / "shared").is_dir()), REPO.parent / "shared")
sys.path[:0] = [str(REPO / "tests"), str(REPO / "tests" / "bench")]

from bench_agent import bare_run_ms, run_agent  # noqa: E402
from support.rtsp import RtspServer, require_rtsp_server  # noqa: E402

from edge_agent.adapters.camera.backends import build_source_factory  # noqa: E402
from edge_agent.core.config.schema import CameraConfig  # noqa: E402
from edge_agent.core.vision.preprocess import preprocess_detector  # noqa: E402

BOUNDARY = "frame"


def serve_mjpeg(jpegs: list[bytes], fps: float, port_q: Any) -> None:
    """A multipart MJPEG server (a child process): ``jpegs`` in turn at ``fps`` to every client
    (several: one picture over and over is a frozen camera to the agent)."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", f"multipart/x-mixed-replace;boundary={BOUNDARY}")
            self.end_headers()
            n = 0
            try:
                while True:
                    jpeg = jpegs[n % len(jpegs)]
                    n += 1
                    head = (
                        f"\r\n--{BOUNDARY}\r\nContent-Type: image/jpeg\r\nContent-Length: {len(jpeg)}\r\n\r\n"
                    )
                    self.wfile.write(head.encode() + jpeg)
                    self.wfile.flush()
                    time.sleep(1 / fps)
            except (BrokenPipeError, ConnectionResetError):
                return

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    port_q.put(httpd.server_address[1])
    httpd.serve_forever()


def frame_cost(
    source: str, target: tuple[int, int] | None, input_hw: tuple[int, int], n: int
) -> dict[str, Any]:
    """CPU ms per frame of read + checksum + letterbox/blob over ``n`` frames (after 3 warm-up)."""
    cfg = CameraConfig(source=source, loop=True, stall_timeout_s=10.0)
    factory, _ = build_source_factory(cfg, lambda: target)
    src = factory()
    try:
        for _ in range(3):
            src.read()
        shape: tuple[int, ...] = ()
        t0 = time.process_time()
        w0 = time.perf_counter()
        for _ in range(n):
            img = src.read()
            assert img is not None
            zlib.crc32(np.ascontiguousarray(img).data)
            preprocess_detector(img, input_hw)
            shape = img.shape
        cpu = (time.process_time() - t0) * 1000 / n
        wall = (time.perf_counter() - w0) * 1000 / n
    finally:
        src.close()
    return {"cpu_ms": cpu, "wall_ms": wall, "shape": list(shape[:2][::-1])}


def side_by_side(name: str, source: str, input_hw: tuple[int, int], n: int, reps: int) -> dict[str, Any]:
    runs: dict[str, list[dict[str, Any]]] = {"full": [], "reduced": []}
    for _ in range(reps):
        runs["full"].append(frame_cost(source, None, input_hw, n))
        runs["reduced"].append(frame_cost(source, input_hw, input_hw, n))
    full = statistics.median(r["cpu_ms"] for r in runs["full"])
    red = statistics.median(r["cpu_ms"] for r in runs["reduced"])
    return {
        "source": name,
        "model_input": list(input_hw),
        "frames_per_rep": n,
        "full_cpu_ms": round(full, 2),
        "reduced_cpu_ms": round(red, 2),
        "full_over_reduced": round(full / red, 2),
        "full_reps": [round(r["cpu_ms"], 2) for r in runs["full"]],
        "reduced_reps": [round(r["cpu_ms"], 2) for r in runs["reduced"]],
        "full_frame": runs["full"][0]["shape"],
        "reduced_frame": runs["reduced"][0]["shape"],
    }


def agent_ratio(
    label: str,
    source: str | None,
    images: list[Path],
    model: Path,
    threads: int | None,
    frames: int,
    reps: int,
    baseline: Path | None,
) -> list[dict[str, Any]]:
    variants: list[tuple[str, Path | None]] = [("this tree", None)]
    if baseline is not None:
        variants.insert(0, (f"baseline {baseline}", baseline))
    ref1 = bare_run_ms(model, threads=threads)
    runs: dict[str, list[dict[str, Any]]] = {v: [] for v, _ in variants}
    for _ in range(reps):
        for v, tree in variants:
            runs[v].append(run_agent(model, None, images, frames, threads, tree, source=source))
    ref = statistics.median([ref1, bare_run_ms(model, threads=threads)])
    out = []
    for v, _ in variants:
        fps = statistics.median(r["fps"] for r in runs[v])
        infer = statistics.median(r["latency_ms"].get("infer", 0.0) for r in runs[v])
        out.append(
            {
                "loop": label,
                "variant": v,
                "threads": threads or "default",
                "bare_session_run_ms": round(ref, 2),
                "agent_fps": round(fps, 2),
                "agent_fps_all": [r["fps"] for r in runs[v]],
                "ratio_agent_vs_bare": round(fps * ref / 1000, 3),
                "ratio_agent_vs_in_loop_run": round(fps * infer / 1000, 3),
                "peak_rss_mb": round(statistics.median(r["peak_rss_mb"] for r in runs[v]), 1),
                # what the capture thread got per run: a loop waiting for its camera is not the loop's ratio
                "camera_frames_all": [r.get("camera_frames") for r in runs[v]],
                "camera_dropped_all": [r.get("camera_dropped") for r in runs[v]],
            }
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--frames", type=int, default=60, help="frames per rep in the frame-cost part")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--input", type=int, default=640, help="the square model input of the frame-cost part")
    ap.add_argument("--model", type=Path, default=SHARED / "models/yolov8n-coco-fp32.onnx")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--agent-frames", type=int, default=80)
    ap.add_argument("--agent-reps", type=int, default=3)
    ap.add_argument("--baseline-src", type=Path)
    ap.add_argument("--skip-agent", action="store_true")
    ap.add_argument("--skip-cost", action="store_true", help="only the agent loop part")
    ap.add_argument("--loops", nargs="*", default=["photos", "rtsp", "mjpeg"], help="agent loops to run")
    ap.add_argument("--agent-fps", type=int, default=15, help="the live cameras' rate in the agent part")
    ap.add_argument("--fps", type=int, default=25, help="the live cameras' frame rate")
    a = ap.parse_args()
    if not SHARED.is_dir():
        raise SystemExit(f"needs the real photos and YOLOv8n in {SHARED} (see its README)")
    require_rtsp_server_or_exit()
    print(json.dumps({"load_average": os.getloadavg(), "cpus": os.cpu_count()}), flush=True)
    input_hw = (a.input, a.input)
    zidane = cv2.imread(str(SHARED / "images/zidane.jpg"))
    hd = cv2.resize(zidane, (1920, 1080), interpolation=cv2.INTER_CUBIC)
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        folders: dict[str, Path] = {}
        for stem in ("bus", "zidane"):
            f = tmp / stem
            f.mkdir()
            (f / "0.jpg").write_bytes((SHARED / f"images/{stem}.jpg").read_bytes())
            folders[stem] = f
        # 4 pictures with sensor-like noise in turn: H.264 P-frames carry real residuals, as a camera's do
        rng = np.random.default_rng(0)
        noisy, still = tmp / "noisy.bgr", tmp / "still.bgr"
        jpegs: list[bytes] = []
        with noisy.open("wb") as f:
            for _ in range(4):
                pic = np.clip(hd + rng.normal(0, 3, hd.shape), 0, 255).astype(np.uint8)
                f.write(pic.tobytes())
                ok, jpg = cv2.imencode(".jpg", pic, [cv2.IMWRITE_JPEG_QUALITY, 85])
                assert ok
                jpegs.append(jpg.tobytes())
        still.write_bytes(np.ascontiguousarray(hd).tobytes())
        if not a.skip_cost:
            with live_sources(noisy, jpegs, a.fps) as (h264, rtp_jpeg, mjpeg_url):
                sources: list[tuple[str, str, tuple[int, int]]] = [
                    ("photo 810x1080 (bus.jpg), folder", str(folders["bus"]), input_hw),
                    ("photo 810x1080 (bus.jpg), folder, a 320 model", str(folders["bus"]), (320, 320)),
                    ("photo 1280x720 (zidane.jpg), folder", str(folders["zidane"]), input_hw),
                    ("RTSP H.264 1920x1080 (noisy)", h264, input_hw),
                    ("RTSP MJPEG (RTP) 1920x1080 (noisy)", rtp_jpeg, input_hw),
                    ("MJPEG over HTTP 1920x1080", mjpeg_url, input_hw),
                ]
                for name, url, hw in sources:
                    print(json.dumps(side_by_side(name, url, hw, a.frames, a.reps)), flush=True)
        if not a.skip_agent:
            # one still picture: a noisy 1080p H.264 encode at the camera's rate takes the test server
            # more than these 2 cores have to spare, and the loop would then wait for the camera
            with live_sources(still, jpegs, a.agent_fps) as (h264, _, mjpeg_url):
                photos = sorted((SHARED / "images").glob("*.jpg"))
                loops: list[tuple[str, str | None]] = [
                    ("photos folder (bus 810x1080 + zidane 1280x720), looping", None),
                    (f"RTSP H.264 1920x1080 (still) at {a.agent_fps} fps", h264),
                    (f"MJPEG over HTTP 1920x1080 at {a.agent_fps} fps", mjpeg_url),
                ]
                for label, url in [lp for k, lp in zip(("photos", "rtsp", "mjpeg"), loops) if k in a.loops]:
                    for row in agent_ratio(
                        label,
                        url,
                        photos,
                        a.model,
                        a.threads or None,
                        a.agent_frames,
                        a.agent_reps,
                        a.baseline_src,
                    ):
                        print(json.dumps(row), flush=True)
    print(json.dumps({"load_average_after": os.getloadavg()}), flush=True)


@contextlib.contextmanager
def live_sources(raw: Path, jpegs: list[bytes], fps: int) -> Iterator[tuple[str, str, str]]:
    """An H.264 and an MJPEG RTSP server of the pictures in ``raw`` and an MJPEG HTTP server of
    ``jpegs`` (each its own process, so their CPU is not this process's): their URLs."""
    ctx = multiprocessing.get_context("spawn")
    q: Any = ctx.Queue()
    http = ctx.Process(target=serve_mjpeg, args=(jpegs, fps, q), daemon=True)
    http.start()
    h264 = RtspServer(fps=fps, codec="h264", size=(1920, 1080), image=raw)
    rtp_jpeg = RtspServer(fps=fps, codec="mjpeg", size=(1920, 1080), image=raw)
    try:
        url = f"http://127.0.0.1:{q.get(timeout=30)}/stream"
        h264.start()
        rtp_jpeg.start()
        yield h264.url, rtp_jpeg.url, url
    finally:
        h264.stop()
        rtp_jpeg.stop()
        http.terminate()
        http.join(10)


def require_rtsp_server_or_exit() -> None:
    import pytest

    try:
        require_rtsp_server()
    except pytest.skip.Exception as exc:
        raise SystemExit(f"no RTSP server: {exc}") from None


if __name__ == "__main__":
    main()
