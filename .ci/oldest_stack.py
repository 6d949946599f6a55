"""Drive the installed edge-agent the way a Jetson does, on the oldest supported stack.

    python .ci/oldest_stack.py --ort 1.11.1 [--shared ../shared] [--int8 q.onnx --reference fp32.jsonl]
                               [--check converted.onnx its-source.jsonl ...]

Run by .ci/oldest-stack.sh with the venv's own Python 3.8 (CPython 3.8.18, onnxruntime 1.11.1 or
1.16.3, every runtime dependency at its floor). Why a driver and not a pytest marker: the test
tree is written for 3.11 (it builds its models with the ``onnx`` package, which a runtime install
must not have, and uses 3.9+ syntax); binding all of it to 3.8 would cost more than it checks.
This exercises the installed package, not the clone: infer, the run loop with its SQLite queue,
sync to a real mosquitto on loopback, model pack + install through the gate, inspect, and the
one-line refusal of a model the runtime cannot load, and the same detections from each model
converted for this runtime (``--check``: an opset-22 export through ``model convert``) as its
source gave on today's stack. Every step prints one line; any failure exits 1 naming the step.
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import List

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "models" / "samples"
BIN = Path(sys.executable).parent


def fail(step: str, why: str) -> None:
    print(f"oldest-stack: FAIL {step}: {why}", file=sys.stderr)
    sys.exit(1)


def ea(*args: str, timeout: float = 300.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "edge-agent"), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=tempfile.gettempdir(),
    )


def must(step: str, *args: str) -> str:
    t0 = time.monotonic()
    r = ea(*args)
    if r.returncode != 0:
        fail(step, f"exit {r.returncode}: {(r.stderr or r.stdout).strip()[-600:]}")
    print(f"ok   {step} ({time.monotonic() - t0:.1f} s)")
    return r.stdout


def versions(expected_ort: str, expected_sqlite: str) -> None:
    import sqlite3

    import numpy
    import onnxruntime

    if sys.version_info[:2] != (3, 8):
        fail("python", f"expected CPython 3.8, this is {sys.version.split()[0]}")
    if onnxruntime.__version__ != expected_ort:
        fail("onnxruntime", f"expected {expected_ort}, installed {onnxruntime.__version__}")
    try:
        import onnx  # noqa: F401

        fail("runtime install", "the onnx package is installed (the runtime must not need it)")
    except ImportError:
        pass
    if expected_sqlite and sqlite3.sqlite_version != expected_sqlite:
        fail("sqlite", f"expected SQLite {expected_sqlite}, loaded {sqlite3.sqlite_version}")
    print(
        f"ok   Python {sys.version.split()[0]}, onnxruntime {onnxruntime.__version__}, numpy {numpy.__version__}, "
        f"SQLite {sqlite3.sqlite_version}"
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def config(root: Path, port: int, model: Path) -> Path:
    state = root / "state"
    state.mkdir(parents=True, exist_ok=True)
    cfg = root / "config.toml"
    cfg.write_text(
        f'[device]\nid = "nano-1"\nstate_dir = "{state}"\n'
        f'[camera]\nsource = "{SAMPLES}"\nloop = true\ninterval_s = 0.05\n'
        f'[detector]\nmodel = "{model}"\n'
        f'[mqtt]\nenabled = true\nhost = "127.0.0.1"\nport = {port}\nreconnect_min_s = 0.2\nreconnect_max_s = 1.0\n'
        f'[queue]\npath = "{state}/outbox.db"\n[output]\nmode = "every_frame"\n'
        f'[health]\nstatus_file = "{state}/status.json"\n'
    )
    return cfg


def sync_against_mosquitto(root: Path) -> Path:
    """run --max-frames with a real broker: the queued results must arrive on edge/nano-1/detections."""
    import paho.mqtt.client as mqtt

    exe = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
    if not Path(exe).exists():
        fail("mosquitto", "not installed (Debian package 'mosquitto')")
    port = free_port()
    root.mkdir(parents=True, exist_ok=True)
    conf = root / "mosquitto.conf"
    conf.write_text(f"listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\n")
    broker = subprocess.Popen([exe, "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        got: List[str] = []
        ready = threading.Event()
        sub = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="oldest-stack-sub")
        sub.on_connect = lambda c, *_a: (c.subscribe("edge/#", qos=1), ready.set())
        sub.on_message = lambda _c, _u, msg: got.append(msg.topic)
        for _ in range(50):
            try:
                sub.connect("127.0.0.1", port)
                break
            except OSError:
                time.sleep(0.1)
        sub.loop_start()
        if not ready.wait(10):
            fail("mosquitto", f"no connection to 127.0.0.1:{port}")
        cfg = config(root, port, REPO / "models" / "demo-detector-int8.onnx")
        must(
            "run --max-frames 5 (camera replay, SQLite queue, MQTT sync)",
            "run",
            "--config",
            str(cfg),
            "--max-frames",
            "5",
        )
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and sum(t.endswith("/detections") for t in got) < 5:
            time.sleep(0.1)
        n = sum(t.endswith("/detections") for t in got)
        if n < 5:
            fail("sync", f"{n} of 5 results arrived at the broker (topics seen: {sorted(set(got))})")
        print(f"ok   sync: {n} results on edge/nano-1/detections")
        stats = json.loads(
            must("queue stats", "queue", "stats", "--config", str(cfg), "--json").strip() or "{}"
        )
        if stats.get("pending", -1) != 0:
            fail("queue", f"{stats.get('pending')} results still pending after the sync")
        sub.loop_stop()
        sub.disconnect()
        return cfg
    finally:
        broker.terminate()
        broker.wait(10)


def refusal(shared: Path, ort: str) -> None:
    fp32 = shared / "models" / "yolov8n-coco-fp32.onnx"
    if not fp32.is_file():
        print(f"skip untouched-FP32 refusal: {fp32} absent")
        return
    r = ea("infer", str(SAMPLES / "sample_1.jpg"), "--model", str(fp32))
    lines = r.stderr.strip().splitlines()
    want = "IR 9 > 8" if ort.startswith("1.11") else "opset 20 > 19"
    if r.returncode != 1 or len(lines) != 1 or want not in lines[0] or "model convert" not in lines[0]:
        fail("refusal", f"exit {r.returncode}, stderr {r.stderr.strip()[-400:]!r}")
    print(f"ok   untouched YOLOv8n FP32 refused in one line: {lines[0][-140:]}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ort", required=True, help="the onnxruntime version the venv must have")
    ap.add_argument("--sqlite", default="", help="the SQLite version Python must load (LD_LIBRARY_PATH)")
    ap.add_argument("--shared", type=Path, default=REPO.parent / "shared")
    ap.add_argument("--int8", type=Path, help="a `quantize --target-ort` output to run here")
    ap.add_argument("--reference", type=Path, help="infer --json of its FP32 source, made on today's stack")
    ap.add_argument("--images", type=Path, help="the images --reference was made on (default: SHARED/images)")
    ap.add_argument(
        "--check",
        nargs=2,
        action="append",
        default=[],
        metavar=("MODEL", "REFERENCE"),
        help="a converted model and infer --json of its source on today's stack (on --images); repeatable",
    )
    a = ap.parse_args()
    versions(a.ort, a.sqlite)
    with tempfile.TemporaryDirectory(prefix="edge-agent-oldest-") as tmp:
        root = Path(tmp)
        must(
            "demo (bundled INT8 detector + classifier)",
            "demo",
            "--state-dir",
            str(root / "demo"),
            "--frames",
            "3",
        )
        out = must("infer --json on the bundled samples", "infer", "--json", str(SAMPLES))
        if sum(len(json.loads(x)["detections"]) for x in out.splitlines()) == 0:
            fail("infer", "no detections on the bundled samples")
        text = must(
            "inspect the bundled INT8 detector", "inspect", str(REPO / "models" / "demo-detector-int8.onnx")
        )
        if "loads on onnxruntime >= 1.11" not in text:
            fail("inspect", "does not say the demo model loads on onnxruntime 1.11")
        cfg = sync_against_mosquitto(root / "agent")
        pkg = root / "demo.pkg"
        must(
            "model pack",
            "model",
            "pack",
            str(REPO / "models" / "demo-detector.onnx"),
            "-o",
            str(pkg),
            "--version",
            "2",
        )
        out = must("model install (gate on this runtime)", "model", "install", str(pkg), "--config", str(cfg))
        if not out.startswith("switched"):
            fail("model install", out.strip())
        refusal(a.shared, a.ort)
        pairs = [(a.int8, a.reference)] if a.int8 and a.reference else []
        pairs += [(Path(m), Path(ref)) for m, ref in a.check]
        for i, (model, reference) in enumerate(pairs):
            same_detections(root / f"got-{i}.jsonl", model, reference, a.images or a.shared / "images")
    return 0


def same_detections(got: Path, model: Path, reference: Path, images: Path) -> None:
    """infer --json with ``model`` here must find what ``reference`` (its source, today's stack) found."""
    got.write_text(
        must(f"infer --json with {model.name}", "infer", "--json", "--model", str(model), str(images))
    )
    r = subprocess.run(
        [sys.executable, str(REPO / ".ci" / "same_detections.py"), str(reference), str(got)],
        text=True,
        capture_output=True,
    )
    print(("ok   " if r.returncode == 0 else "") + r.stdout.strip())
    if r.returncode:
        fail("same detections", r.stdout.strip())


if __name__ == "__main__":
    sys.exit(main())
