"""The cost of the health history (issue 33), never run by pytest:
``PYTHONPATH=. python tests/bench/bench_history.py``. Stores 20,000 statuses of 200 devices
(a 1.2 KB body each, rounds of 500) with and without the history insert, interleaved, best of 2,
on SQLite and a throw-away PostgreSQL (tests/support); then one maintenance batch of 5000 rows
(thinning, expiry) on 100,000 history rows."""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from support.collector import Postgres

from edge_agent.adapters.collector import db as dbmod
from edge_agent.adapters.collector import history
from edge_agent.adapters.collector.db import CollectorDb
from edge_agent.core.messages.fleet import DeviceStatus, parse

T0 = 1.79e9
BODY = {
    "schema": 1, "version": "0.4.0", "state": "running", "started_at": T0, "uptime_s": 3600.0, "ready_s": 1.5,
    "pid": 812, "frames": 10231, "results": 912, "errors": 0, "reloads": 0, "reload_failures": 0, "fps": 9.8,
    "latency_ms": {"infer": 41.0, "total": 52.3},
    "queue": {"pending": 3, "inflight": 3, "unflushed": 0, "bytes": 2900, "oldest": "2026-11-30T02:40:36Z",
              "path": "/var/lib/edge-agent/outbox.db", "seq": 1043, "boot": 7, "disk_full": False, "dropped": 0,
              "expired": 0, "rejected": 0, "salvaged": 0, "lost": 0, "corrupt_files": 0, "crashes": 1,
              "seq_skipped": 6, "disk_free_bytes": 7516192768},
    "broker": {"state": "connected", "last_sync": T0, "last_error": None, "connect_attempts": 3, "connects": 2,
               "published": 1040, "acked": 1040, "thread_restarts": 0},
    "camera": {"source": "rtsp://cam/x", "state": "streaming", "frames": 10231, "dropped": 4, "skipped": 0},
    "sensor": None, "provider": "CPUExecutionProvider",
    "models": {"detector": {"id": "yolo-int8.onnx@d6e1178f", "sha256": "d6e1178f" * 8, "quantization": "int8"}},
    "clock_synced": True, "warnings": [], "model_update": None,
}  # fmt: skip


def statuses(n: int) -> list[DeviceStatus]:
    out = []
    for i in range(n):
        dev = f"dev{i % 200:03d}"
        body = dict(BODY, device_id=dev, ts=T0 + 10 * (i // 200))
        s = parse("edge", f"edge/{dev}/status", json.dumps(body).encode(), T0 + 1e6).status
        assert s is not None
        out.append(s)
    return out


def fresh(url: str) -> CollectorDb:
    db = CollectorDb(url)
    if url.startswith("postgres"):
        db.conn.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public")
    db.migrate()
    return db


def store_rate(url: str, with_history: bool, n: int = 20_000) -> float:
    db = fresh(url)
    real = history.insert
    if not with_history:
        dbmod.history.insert = lambda *a, **k: None  # type: ignore[assignment]
    ss = statuses(n)
    t = time.perf_counter()
    try:
        for i in range(0, n, 500):
            db.store([], T0 + 1e6, statuses=ss[i : i + 500])
    finally:
        dbmod.history.insert = real  # type: ignore[assignment]
        took = time.perf_counter() - t
        db.close()
    return n / took


def maintenance(url: str) -> str:
    db = fresh(url)
    ss = statuses(100_000)
    for i in range(0, len(ss), 500):
        db.store([], T0 + 1e6, statuses=ss[i : i + 500])
    times = []
    for _ in range(5):
        t = time.perf_counter()
        history.thin_batch(db, T0 + 1e6, 300, 5000)
        times.append(time.perf_counter() - t)
    t = time.perf_counter()
    history.expire(db, T0 + 1e6, 5000)
    expire = time.perf_counter() - t
    db.close()
    return f"thin batch of 5000 median {sorted(times)[2] * 1000:.0f} ms, expire 5000 {expire * 1000:.0f} ms"


def main() -> None:
    tmp = tempfile.mkdtemp()
    pg = Postgres()
    pg.start()
    try:
        for label, url in (("sqlite", f"sqlite:///{tmp}/f.db"), ("postgresql", pg.url)):
            rates: dict[bool, list[float]] = {False: [], True: []}
            for rep in range(2):
                for on in (False, True):
                    u = url if label == "postgresql" else f"sqlite:///{tmp}/f{rep}{on}.db"
                    rates[on].append(store_rate(u, on))
            print(
                f"{label}: statuses stored/s without history {max(rates[False]):.0f}, with {max(rates[True]):.0f}; "
                f"{maintenance(url if label == 'postgresql' else f'sqlite:///{tmp}/m.db')}"
            )
    finally:
        pg.cleanup()


if __name__ == "__main__":
    main()
