"""The camera index's cost on a fleet without cameras (run by hand, not collected by pytest).

    PYTHONPATH=$PWD python tests/bench/bench_camera_index.py [--rows 100000]

Stores ``--rows`` results (20 devices, rounds of 500, through ``CollectorDb.store``) into a fresh
SQLite database of the current schema, once as legacy rows (camera NULL) and once as camera rows
(4 cameras), with schema 4's partial ``(device, camera, time) WHERE camera IS NOT NULL`` index, a
full index on the same columns, and none. Reports the file size (deterministic) and the insert
rate (``synchronous = OFF``: the index work, not fsync; noisy on a shared machine).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

from edge_agent.adapters.collector.db import CollectorDb
from edge_agent.core.messages.fleet import Record, parse

ROUND = 500


def records(start: int, camera: bool) -> list[Record]:
    out: list[Record] = []
    for s in range(start, start + ROUND):
        dev = f"d{s % 20}"
        b = {"id": f"m{s}", "seq": s, "boot": 1, "device_id": dev, "ts": 1.8e9 + s, "detections": []}
        topic = f"edge/{dev}/detections"
        if camera:
            b["camera"] = f"c{s % 4}"
            topic = f"edge/{dev}/c{s % 4}/detections"
        out += parse("edge", topic, json.dumps(b).encode(), 1.8e9).records
    return out


def run(rows: int, variant: str, camera: bool) -> tuple[float, int]:
    d = tempfile.mkdtemp(prefix="edge-camidx-")
    db = CollectorDb(f"sqlite:///{d}/f.db")
    try:
        db.migrate()
        db.conn.execute("PRAGMA synchronous = OFF")
        if variant != "partial":
            db.conn.execute("DROP INDEX messages_device_camera_time")
        if variant == "full":
            db.conn.execute("CREATE INDEX messages_device_camera_time ON messages (device, camera, time)")
        rounds = [records(1 + i * ROUND, camera) for i in range(rows // ROUND)]
        t = time.perf_counter()
        for r in rounds:
            db.store(r, 1.8e9)
        took = time.perf_counter() - t
        db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        db.close()
    return rows / took, os.path.getsize(f"{d}/f.db")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100_000)
    args = ap.parse_args()
    for variant in ("partial", "full", "none"):
        for camera in (False, True):
            rate, size = run(args.rows, variant, camera)
            what = "camera rows" if camera else "legacy rows"
            print(f"{variant:8s} index, {args.rows} {what}: file {size / 1e6:5.1f} MB, {rate:7.0f} rows/s")


if __name__ == "__main__":
    main()
