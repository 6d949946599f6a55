"""Agent loop benchmark: throughput vs bare session.run, time to READY, peak RSS.

    python tests/bench/bench_agent.py [--model M ...] [--classifier C] [--frames N] [--threads T ...]
                                      [--baseline-src DIR] [--repeat R]

Runs ``edge-agent run`` as a subprocess on a looping folder camera (the shared photos, or the
bundled samples), listens on a NOTIFY_SOCKET for READY=1, reads fps from the status file, and
takes peak RSS from the child's rusage. Bare ``session.run`` latency of the same model is measured
in this process right before and after, and the median of both is the reference.

``--baseline-src DIR`` (e.g. ``git archive <commit> | tar -x -C DIR``) runs that tree's agent too,
alternating with this one ``--repeat`` times between the same two bare measurements: a before/after
comparison side by side in one run, on the same load; each prints its median fps and ratios.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"


def bare_run_ms(model: Path, runs: int = 30, threads: int | None = None) -> float:
    import onnxruntime as ort

    so = ort.SessionOptions()
    if threads:
        so.intra_op_num_threads = threads
    s = ort.InferenceSession(str(model), so, providers=["CPUExecutionProvider"])
    i = s.get_inputs()[0]
    shape = [d if isinstance(d, int) else 1 for d in i.shape]
    x = np.random.default_rng(0).uniform(0, 1, shape).astype(np.float32)
    for _ in range(3):
        s.run(None, {i.name: x})
    t = []
    for _ in range(runs):
        t0 = time.perf_counter()
        s.run(None, {i.name: x})
        t.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(t)


def run_agent(
    model: Path,
    classifier: Path | None,
    images: list[Path],
    frames: int,
    threads: int | None = None,
    src: Path | None = None,
    source: str | None = None,
) -> dict[str, float]:
    """One agent run; ``source``: a live camera URL instead of the looping folder of ``images``."""
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        cam = root / "cam"
        cam.mkdir()
        for n, img in enumerate(images * 4):
            shutil.copy(img, cam / f"{n:03d}{img.suffix}")
        camera = f'source = "{source}"\n' if source else f'source = "{cam}"\nloop = true\n'
        thr = f"threads = {threads}\n" if threads else ""
        cls = f'[classifier]\nmodel = "{classifier}"\n' if classifier else ""
        cfg = root / "c.toml"
        cfg.write_text(
            f'[device]\nid = "bench"\nstate_dir = "{root}"\n[camera]\n{camera}'
            f'[detector]\nmodel = "{model}"\n{thr}{cls}[mqtt]\nenabled = false\n[queue]\npath = "{root}/q.db"\n'
            f'[output]\nmode = "every_frame"\n[health]\nstatus_file = "{root}/status.json"\n'
        )
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.bind(str(root / "n.sock"))
        sock.settimeout(120)
        env = {**os.environ, "NOTIFY_SOCKET": str(root / "n.sock")}
        if src is not None:  # that tree's edge_agent ahead of the installed one
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(src), env.get("PYTHONPATH", "")]))
        t0 = time.monotonic()
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "edge_agent",
                "-q",
                "run",
                "--config",
                str(cfg),
                "--max-frames",
                str(frames),
            ],
            env=env,
            cwd=root,  # not the checkout: `-m` puts the cwd first on sys.path, ahead of PYTHONPATH
        )
        ready = None
        while ready is None:
            msg = sock.recv(4096).decode()
            if "READY=1" in msg.split("\n"):
                ready = time.monotonic() - t0
        # VmHWM of this child (RUSAGE_CHILDREN would be the max over every child so far)
        peak_kb = 0
        sock.setblocking(False)
        while proc.poll() is None:
            # keep reading the agent's WATCHDOG/STATUS datagrams: a full queue blocks its main thread
            # in sendto() for good (a slow live-camera run hung here after ~60 s)
            with contextlib.suppress(BlockingIOError, InterruptedError):
                while sock.recv(4096):
                    pass
            try:
                for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines():
                    if line.startswith("VmHWM:"):
                        peak_kb = max(peak_kb, int(line.split()[1]))
            except OSError:
                break
            time.sleep(0.2)
        rc = proc.wait()
        status = json.loads((root / "status.json").read_text())
        sock.close()
        if rc != 0:
            raise SystemExit(f"agent exited {rc}")
        return {
            "ready_s": ready,
            "fps": status["fps"],
            "frames": status["frames"],
            "peak_rss_mb": peak_kb / 1024,
            "latency_ms": status["latency_ms"],
            "camera_frames": status.get("camera", {}).get("frames"),
            "camera_dropped": status.get("camera", {}).get("dropped"),
        }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", nargs="*", type=Path)
    ap.add_argument("--classifier", type=Path)
    ap.add_argument("--frames", type=int, default=60)
    ap.add_argument("--threads", type=int, nargs="*", default=[0], help="intra-op threads (0 = ORT default)")
    ap.add_argument("--baseline-src", type=Path, help="another source tree to run side by side")
    ap.add_argument("--images", type=Path, help="folder of .jpg photos (default ../shared/images)")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each variant (median reported)")
    a = ap.parse_args()
    models = a.model or [SHARED / "models/yolov8n-coco-fp32.onnx"]
    if a.images:
        images = sorted(p for p in a.images.glob("*.jpg"))
    elif SHARED.is_dir():
        images = sorted((SHARED / "images").glob("*.jpg"))
    else:
        images = sorted(p for p in (REPO / "models/samples").glob("*") if p.is_file())
    variants: list[tuple[str, Path | None]] = [("this tree", None)]
    if a.baseline_src:
        variants.insert(0, ("baseline " + str(a.baseline_src), a.baseline_src))
    for m, th in [(m, t or None) for m in models for t in a.threads]:
        ref1 = bare_run_ms(m, threads=th)
        runs: dict[str, list[dict[str, float]]] = {name: [] for name, _ in variants}
        for _ in range(a.repeat):
            for name, src in variants:
                runs[name].append(run_agent(m, a.classifier, images, a.frames, th, src))
        ref2 = bare_run_ms(m, threads=th)
        ref = statistics.median([ref1, ref2])
        for name, _ in variants:
            agent = sorted(runs[name], key=lambda r: r["fps"])[len(runs[name]) // 2]  # the median run
            print(
                json.dumps(
                    {
                        "variant": name,
                        "model": str(m),
                        "threads": th or "default",
                        "classifier": str(a.classifier) if a.classifier else None,
                        "bare_session_run_ms": round(ref, 2),
                        "bare_fps": round(1000 / ref, 2),
                        "agent_fps": agent["fps"],
                        "agent_fps_all": [r["fps"] for r in runs[name]],
                        "ratio_agent_vs_bare": round(agent["fps"] * ref / 1000, 3),
                        # the same ratio against session.run *inside* the loop (same load, same run):
                        # on a machine others load, the bare figure from before/after can be far off
                        "ratio_agent_vs_in_loop_run": round(
                            agent["fps"] * agent["latency_ms"].get("infer", 0.0) / 1000, 3
                        ),
                        "ready_s": round(agent["ready_s"], 2),
                        "peak_rss_mb": round(agent["peak_rss_mb"], 1),
                        "agent_latency_ms": agent["latency_ms"],
                    }
                ),
                flush=True,
            )


if __name__ == "__main__":
    main()
