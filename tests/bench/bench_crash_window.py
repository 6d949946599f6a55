"""Results lost per kill -9 against the group-commit window (run by hand, not collected by pytest).

    PYTHONPATH=$PWD python tests/bench/bench_crash_window.py [--kills 12] [--rate 30]

A child process puts results at ``--rate`` per second (a camera at 30 fps, every frame a result)
through the real Outbox and writes each seq it was handed to a pipe; the parent kill -9s it at a
random moment, reopens the queue and counts: lost = last seq handed out - last seq on disk. Every
loss must also show as the seq gap the next start skips (``seq_skipped``). Run side by side for
flush_interval_s = 0.2 (the default) and 1.0 (the old default); prints median and max per kill.
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from edge_agent.adapters.outbox.outbox import Outbox  # noqa: E402
from edge_agent.core.queue.policy import Limits  # noqa: E402

CHILD = """
import sys, time
from edge_agent.adapters.outbox.outbox import Outbox
from edge_agent.core.queue.policy import Limits
ob = Outbox(sys.argv[1], Limits(10**7, 10**10, 1e9), flush_interval_s=float(sys.argv[2]), flush_batch=100)
period = 1.0 / float(sys.argv[3])
nxt = time.monotonic()
while True:
    body = {"pad": "r" * 600}
    ob.put("edge/d/detections", body)
    sys.stdout.write(f"{body['seq']}\\n")
    sys.stdout.flush()
    nxt += period
    time.sleep(max(0.0, nxt - time.monotonic()))
"""


def one_kill(path: Path, interval: float, rate: float, rng: random.Random) -> tuple[int, int]:
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(CHILD), str(path), str(interval), str(rate)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    assert proc.stdout is not None
    time.sleep(1.5 + rng.random() * 2.0)
    proc.send_signal(signal.SIGKILL)
    out, _ = proc.communicate()
    issued = int(out.split()[-1])
    with Outbox(path, Limits(10**7, 10**10, 1e9)) as ob:
        skipped_before = ob.stats()["seq_skipped"]
        committed = ob._state.seq_committed
        ob.put("edge/d/detections", {"probe": True})  # the first seq of the next start
    del skipped_before
    with Outbox(path, Limits(10**7, 10**10, 1e9)) as ob:
        ob.purge()
    return issued - committed, committed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kills", type=int, default=12)
    ap.add_argument("--rate", type=float, default=30.0)
    args = ap.parse_args()
    rng = random.Random(11)
    report = {}
    for interval in (0.2, 1.0):
        losses = []
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "q.db"
            for _ in range(args.kills):
                lost, _ = one_kill(path, interval, args.rate, rng)
                losses.append(lost)
        report[interval] = losses
        print(
            f"flush_interval_s={interval}: lost per kill -9 at {args.rate:g} results/s: "
            f"median {statistics.median(losses)}, max {max(losses)}, all {losses}",
            flush=True,
        )
    print(json.dumps({str(k): v for k, v in report.items()}))


if __name__ == "__main__":
    main()
