"""What the queue counts when its file loses its header or its WAL (run by hand, not collected).

    PYTHONPATH=$PWD python tests/bench/bench_queue_loss.py [--tries 3]

- header: 2,000 rows, clean close, the first 100 bytes overwritten with random bytes, reopen:
  prints rows, salvaged, lost and the next seq (must be above every seq issued).
- wal: a producer (~4,000 results/s, 0.05 s group commit) is killed with SIGKILL, its ``-wal`` and
  ``-shm`` deleted, the queue reopened: prints the committed rows (read by SQLite from a copy with
  the WAL), the rows left without the WAL, what the queue counted (lost, seq_skipped, crashes) and
  the next seq against the highest seq committed.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the shared producer
from support.outbox import PRODUCER

from edge_agent.adapters.outbox.outbox import Outbox
from edge_agent.core.queue.policy import Limits

TOPIC = "edge/dev-1/detections"
LIMITS = Limits(10**7, 10**10, 1e9)


def rows_of(path: Path, wal: bool) -> list[int]:
    copy = path.with_name("copy.db")
    shutil.copy(path, copy)
    if wal and path.with_name(path.name + "-wal").exists():
        shutil.copy(path.with_name(path.name + "-wal"), copy.with_name("copy.db-wal"))
    conn = sqlite3.connect(str(copy))
    try:
        return [json.loads(p)["seq"] for (p,) in conn.execute("SELECT payload FROM messages")]
    except sqlite3.Error:
        return []
    finally:
        conn.close()
        for f in copy.parent.glob("copy.db*"):
            f.unlink()


def header(d: Path) -> None:
    path = d / "h.db"
    with Outbox(path, LIMITS, flush_interval_s=60, flush_batch=10**6) as ob:
        for i in range(2000):
            ob.put(TOPIC, {"n": i, "pad": "x" * 100})
        top = ob.stats()["seq"]
    with open(path, "r+b") as f:
        f.write(os.urandom(100))
    with Outbox(path, LIMITS) as ob:
        s = ob.stats()
        ob.put(TOPIC, {"n": -1})
        nxt = ob.stats()["seq"]
    print(f"header: rows 2000 (top seq {top}), salvaged {s['salvaged']}, lost {s['lost']}, next seq {nxt}")


def wal(d: Path, t: int) -> None:
    path = d / f"w{t}.db"
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    proc = subprocess.Popen(
        [sys.executable, "-c", PRODUCER, str(path), "200"], stdout=subprocess.PIPE, env=env
    )
    assert proc.stdout is not None
    proc.stdout.readline()
    time.sleep(0.5 + 0.3 * t)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    committed = rows_of(path, wal=True)
    path.with_name(path.name + "-wal").unlink()
    path.with_name(path.name + "-shm").unlink(missing_ok=True)
    left = rows_of(path, wal=False)
    with Outbox(path, LIMITS) as ob:
        s = ob.stats()
        ob.put(TOPIC, {"n": -1})
        nxt = ob.stats()["seq"]
    print(
        f"wal try {t}: committed rows {len(committed)} (max seq {max(committed)}), left without the WAL "
        f"{len(left)}, counted lost {s['lost']}, seq_skipped {s['seq_skipped']}, crashes {s['crashes']}, "
        f"next seq {nxt}"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tries", type=int, default=3)
    args = ap.parse_args()
    logging.basicConfig(level=logging.CRITICAL)
    d = Path(tempfile.mkdtemp())
    try:
        header(d)
        for t in range(args.tries):
            wal(d, t)
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
