"""The cost of retention, never run by pytest: ``PYTHONPATH=. python tests/bench/bench_retention.py``.

On SQLite and a throw-away PostgreSQL (tests/support): 100,000 results of 50 devices stamped two
days ago (plus a counts message every 10th seq, kept), then a writer storing rounds of 200 fresh
results for 4 s alone, and again while the purge deletes the old results in batches of 5000
(adapters.collector.purge, one transaction each, back to back: the worst case; the collector's
maintenance purges at most half of its time). Prints the purge's rows/s, the ingest rate alone
and during it (median of its 0.5 s windows), and their ratio. Then, on PostgreSQL, the same rows
in a day-partitioned ``messages``: dropping the old day whole. Each run twice: purging back to
back, and paced as the maintenance paces it.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from support.collector import Postgres, find_pg_bin

from edge_agent.adapters.collector import partitions, purge
from edge_agent.adapters.collector.db import CollectorDb
from edge_agent.app.collector.maintenance import BUDGET_S
from edge_agent.core.messages.fleet import Record, parse

N = 100_000
DEVICES = 50
DAY = 86400.0
BODY = {"image": "frame.jpg", "width": 640, "height": 480, "detections": [
    {"label": "person", "confidence": 0.91, "box": [10.0, 20.0, 200.0, 400.0]},
    {"label": "car", "confidence": 0.77, "box": [300.0, 120.0, 520.0, 330.0]}]}  # fmt: skip


def rows(dev: str, first: int, n: int, ts: float) -> list[Record]:
    out: list[Record] = []
    for s in range(first, first + n):
        kind = "counts" if s % 10 == 0 else "detections"
        body = dict(BODY, id=f"{dev}-{s}", seq=s, boot=1, device_id=dev, ts=ts + s / 1000)
        out += parse("edge", f"edge/{dev}/{kind}", json.dumps(body).encode(), ts).records
    return out


def seed(url: str, now: float) -> None:
    db = CollectorDb(url)
    db.migrate()
    per = N // DEVICES
    for d in range(DEVICES):
        db.store(rows(f"old{d:02d}", 1, per, now - 2 * DAY), now)
    db.close()


def ingest(url: str, stop: threading.Event, windows: list[float], now: float, dev: str) -> None:
    w = CollectorDb(url)
    seq, t0, n = 1, time.monotonic(), 0
    while not stop.is_set():
        n += w.store(rows(dev, seq, 200, now), now)
        seq += 200
        if time.monotonic() - t0 >= 0.5:
            windows.append(n / (time.monotonic() - t0))
            t0, n = time.monotonic(), 0
    w.close()


def run(name: str, url: str, paced: bool) -> None:
    """``paced``: as the collector's maintenance does, batches for BUDGET_S, then 2 * BUDGET_S
    off; else back to back."""
    now = time.time()
    seed(url, now)
    alone: list[float] = []
    stop = threading.Event()
    t = threading.Thread(target=ingest, args=(url, stop, alone, now, "alone"))
    t.start()
    time.sleep(4)
    stop.set()
    t.join()
    during: list[float] = []
    stop = threading.Event()
    t = threading.Thread(target=ingest, args=(url, stop, during, now, "during"))
    db = CollectorDb(url)
    t.start()
    start, purged, batches = time.monotonic(), 0, []
    turn = time.monotonic()
    while True:
        if paced and time.monotonic() - turn > BUDGET_S:
            time.sleep(2 * BUDGET_S)
            turn = time.monotonic()
        b0 = time.monotonic()
        n = purge.purge_batch(db, "results", now - DAY, 5000)
        batches.append(time.monotonic() - b0)
        purged += n
        if n < 5000:
            break
    took = time.monotonic() - start
    stop.set()
    t.join()
    gaps = sum(len(db.gap_rows(f"old{d:02d}")) for d in range(DEVICES))
    db.close()
    a, d = statistics.median(alone), statistics.median(during or [0.0])
    print(
        f"{name} ({'paced as the maintenance' if paced else 'back to back'}): purged {purged} rows in {took:.2f} s = {purged / took:,.0f} rows/s "
        f"(batch of 5000: median {statistics.median(batches) * 1000:.0f} ms, max {max(batches) * 1000:.0f} ms); "
        f"ingest alone {a:,.0f} rows/s, during the purge {d:,.0f} rows/s ({d / a:.2f}x); gaps after: {gaps}"
    )


def run_partitioned(url: str) -> None:
    now = time.time()
    db = CollectorDb(url)
    db.conn.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public")
    db.close()
    seed(url, now)
    rates = []
    for step in ("plain", "partitioned"):
        if step == "partitioned":
            db = CollectorDb(url)
            t0 = time.monotonic()
            copied, parts = partitions.convert(db, now)
            conv = time.monotonic() - t0
            db.close()
        windows: list[float] = []
        stop = threading.Event()
        t = threading.Thread(target=ingest, args=(url, stop, windows, now, step))
        t.start()
        time.sleep(4)
        stop.set()
        t.join()
        rates.append(statistics.median(windows))
    db = CollectorDb(url)
    t0 = time.monotonic()
    n, by_class = partitions.drop_before(db, now - DAY)
    took = time.monotonic() - t0
    gaps = sum(len(db.gap_rows(f"old{d:02d}")) for d in range(DEVICES))
    db.close()
    print(
        f"postgresql partitioned: converting {copied} rows into {parts} partitions {conv:.2f} s; ingest "
        f"{rates[0]:,.0f} rows/s before, {rates[1]:,.0f} after ({rates[1] / rates[0]:.2f}x); "
        f"dropping {n} old day(s) of {sum(by_class.values())} rows {took * 1000:.0f} ms "
        f"(spans recorded first); gaps after: {gaps}"
    )


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for paced in (False, True):
            run("sqlite", f"sqlite:///{tmp}/fleet{int(paced)}.db", paced)
    if find_pg_bin() is None:
        print("postgresql: not installed, skipped")
        return
    pg = Postgres()
    pg.start()
    try:
        for paced in (False, True):
            db = CollectorDb(pg.url)
            db.conn.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public")
            db.close()
            run("postgresql", pg.url, paced)
        run_partitioned(pg.url)
    finally:
        pg.cleanup()


if __name__ == "__main__":
    main()
