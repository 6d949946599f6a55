"""The collector's ingest against its own database's speed, never run by pytest:

    PYTHONPATH=$PWD python tests/bench/bench_ingest.py [--devices 200] [--per-device 100]
        [--round 2000] [--reps 3] [--db sqlite|postgresql|both] [--no-mqtt]

The same rows (``--devices`` x ``--per-device`` result messages of ~0.5 KiB, devices interleaved as
a fleet's backlog reaches the broker) are stored, in rounds of ``--round`` messages with a commit
each, three ways, interleaved, ``--reps`` times (medians quoted):

- bare: what the database does with no collector: json.loads of each payload for its key fields,
  then the rows as received: a psycopg ``COPY messages FROM STDIN`` (PostgreSQL) or one
  ``executemany`` INSERT (SQLite), into the same (migrated, emptied) table, its indexes and keys
  the collector's (each run checks that both leave the same rows, receive time aside);
- store: the collector's own path without MQTT: ``fleet.parse`` of each payload (topic and body
  checks) and ``CollectorDb.store`` (trust checks, devices, confirmed watermarks, the insert), the
  next round parsed while PostgreSQL inserts this one, as ``edge-agent collect`` does
  (app.collector.overlap: one thread); also "serial", each round parsed only once the one before
  is stored, to show what the overlap is worth (SQLite: the same path, it has no wait to fill);
- end to end (unless ``--no-mqtt``): the payloads queued in a real mosquitto for two persistent
  sessions; then a receive-only drain (the collector's own paho Subscriber and Inbox, every message
  acked at once, nothing stored: paho's share), and a real ``edge-agent collect`` draining its
  session into the database (its rate from the first to the last commit, ``received``).

Prints results/s and the ratios store/bare and end-to-end/bare, and paho's share of the end-to-end
time (receive-only time / end-to-end time). The heap made before the timed runs is frozen
(``gc.freeze``), as ``edge-agent collect`` freezes its own once started.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Optional

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import paho.mqtt.client as mqtt
from support import wait_until
from support.collector import CollectorProc, Postgres, sqlite_url
from support.mqtt import Broker

from edge_agent.adapters.collector.db import CollectorDb
from edge_agent.adapters.collector.subscriber import Subscriber
from edge_agent.app.collector.overlap import Ahead
from edge_agent.core.messages.fleet import Record, parse, subscriptions

T0 = 1.79e9
COLS = "device, boot, seq, kind, msg_id, time, received, body, camera"
WIPE = ("messages", "devices", "confirmed", "conflicts", "rejected", "events", "status_history")


def payloads(devices: int, per: int) -> list[tuple[str, bytes]]:
    """(topic, payload) of every result, devices interleaved; ~0.5 KiB each (5 detections)."""
    out = []
    for s in range(1, per + 1):
        for d in range(devices):
            dev = f"cam-{d:03d}"
            body = {
                "id": f"{dev}-1-{s}",
                "seq": s,
                "boot": 1,
                "device_id": dev,
                "ts": T0 + s * 0.1,
                "frame": s * 3,
                "model": "yolov8n-int8.onnx@d6e1178f",
                "latency_ms": {"decode": 4.1, "infer": 41.0, "total": 52.3},
                "detections": [
                    {"label": "person", "class_id": 0, "score": 0.91 - i / 50, "box": [12 + i, 40, 118, 260]}
                    for i in range(5)
                ],
            }
            out.append((f"edge/{dev}/detections", json.dumps(body).encode()))
    return out


def rounds(items: list[Any], n: int) -> list[list[Any]]:
    return [items[i : i + n] for i in range(0, len(items), n)]


# ---- bare: the database alone ---------------------------------------------------------------------
def bare_pg(db: CollectorDb, batches: list[list[tuple[str, bytes]]]) -> None:
    conn = db.conn
    for batch in batches:
        now = datetime.now(timezone.utc)
        with conn.transaction(), conn.cursor() as cur, cur.copy(f"COPY messages ({COLS}) FROM STDIN") as cp:
            for _topic, p in batch:
                b = json.loads(p)
                ts = datetime.fromtimestamp(b["ts"], timezone.utc)
                cp.write_row(
                    (
                        b["device_id"],
                        b["boot"],
                        b["seq"],
                        "detections",
                        b["id"],
                        ts,
                        now,
                        p.decode(),
                        None,
                    )
                )


def bare_sqlite(db: CollectorDb, batches: list[list[tuple[str, bytes]]]) -> None:
    conn = db.conn
    sql = f"INSERT INTO messages ({COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
    for batch in batches:
        now = time.time()
        rows = []
        for _topic, p in batch:
            b = json.loads(p)
            rows.append(
                (b["device_id"], b["boot"], b["seq"], "detections", b["id"], b["ts"], now, p.decode(), None)
            )
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(sql, rows)
        conn.execute("COMMIT")


# ---- the collector's store path ---------------------------------------------------------------------
def store_serial(db: CollectorDb, batches: list[list[tuple[str, bytes]]]) -> None:
    """Parse a round, then store it, one after the other (no idle hook: nothing parsed ahead)."""
    for batch in batches:
        now = time.time()
        records = [r for topic, p in batch for r in parse("edge", topic, p, now).records]
        db.store(records, now)


def store(db: CollectorDb, batches: list[list[tuple[str, bytes]]]) -> None:
    """As ``edge-agent collect`` does (app.collector.overlap): round n+1 parsed while the server
    inserts round n (the store's idle hook), on this one thread."""
    rest = iter(batches)

    def take() -> Optional[tuple[list[Record], float]]:
        batch = next(rest, None)
        if batch is None:
            return None
        now = time.time()
        return [r for topic, p in batch for r in parse("edge", topic, p, now).records], now

    ahead: Ahead[tuple[list[Record], float]] = Ahead(take)
    job = take()
    while job is not None:
        db.store(*job, idle=ahead.idle)
        job = ahead.next() or take()


def wipe(db: CollectorDb) -> None:
    for t in WIPE:
        db.conn.execute(f"DELETE FROM {t}")
    if db.dialect == "postgresql":
        db.conn.execute("VACUUM ANALYZE messages")


def content(db: CollectorDb) -> str:
    """A digest of every stored row but its receive time: bare and store must leave the same rows."""
    t, j = ("time::text", "body::text") if db.dialect == "postgresql" else ("time", "body")
    rows = db.conn.execute(
        f"SELECT device, boot, seq, kind, msg_id, {t}, {j}, camera FROM messages ORDER BY device, boot, seq"
    ).fetchall()
    return hashlib.sha256(repr(rows).encode()).hexdigest()


def timed(
    db: CollectorDb,
    fn: Callable[[CollectorDb, list[list[tuple[str, bytes]]]], None],
    batches: list[list[tuple[str, bytes]]],
    digests: set[str],
) -> float:
    wipe(db)
    t = time.perf_counter()
    fn(db, batches)
    took = time.perf_counter() - t
    n = sum(len(b) for b in batches)
    rows, keys = db.message_stats()
    assert rows == keys == n, (rows, keys, n)
    digests.add(content(db))
    assert len(digests) == 1, f"{fn.__name__} stored other rows than the other way"
    return n / took


# ---- end to end through mosquitto -------------------------------------------------------------------
def queue_for(broker: Broker, sessions: list[Callable[[], None]], items: list[tuple[str, bytes]]) -> None:
    """Make each session exist (connect, subscribe, go away), then publish every item once."""
    for s in sessions:
        s()
    pub = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="bench-pub", protocol=mqtt.MQTTv5)
    pub.max_inflight_messages_set(200)
    pub.connect("127.0.0.1", broker.port)
    pub.loop_start()
    infos = [pub.publish(t, p, qos=1) for t, p in items]
    for i in infos:
        i.wait_for_publish(300)
    pub.disconnect()
    pub.loop_stop()


def receive_only(port: int, n: int, size: int) -> float:
    """Drain the queued session with the collector's Subscriber, acking what arrived in rounds of
    at most ``size`` at once (the collector's receive_maximum, two rounds)."""
    sub = Subscriber(
        "127.0.0.1",
        port,
        "bench-recv",
        subscriptions("edge", None),
        session_expiry_s=3600,
        receive_maximum=min(65535, 2 * size),
    )
    got = 0
    first = 0.0
    sub.start()
    try:
        while got < n:
            m = sub.inbox.get(timeout=60)
            if got == 0:
                first = time.perf_counter()
            got += 1
            batch = [m]
            while len(batch) < size:
                try:
                    batch.append(sub.inbox.get_nowait())
                except Exception:  # noqa: BLE001 -- queue.Empty
                    break
            got += len(batch) - 1
            sub.ack(batch)
        took = time.perf_counter() - first
    finally:
        sub.stop()
    return (n - 1) / took


def recv_session(port: int) -> None:
    sub = Subscriber(
        "127.0.0.1",
        port,
        "bench-recv",
        subscriptions("edge", None),
        session_expiry_s=3600,
        receive_maximum=1000,
    )
    sub.start()
    sub.connected.wait(10)
    time.sleep(0.5)  # the SUBACK
    sub.stop()


def e2e(tmp: Path, url: str, items: list[tuple[str, bytes]], dialect: str, size: int) -> tuple[float, float]:
    """(receive-only rate, collector's end-to-end rate), both draining the same queued messages;
    the collector's rounds of ``size`` (batch_max, two of them in flight: receive_maximum)."""
    broker = Broker(tmp / "broker")
    broker.start()
    log = tmp / "collector.log"
    conf = tmp / "collector.toml"  # a fleet of new device ids: all admitted
    conf.write_text(
        f"[collector]\nnew_devices_max = 1000000\nbatch_max = {size}\nreceive_maximum = {min(65535, 2 * size)}\n"
    )
    col = CollectorProc(broker.port, url, log, "bench-col", extra=("--config", str(conf)))
    try:

        def col_session() -> None:
            col.start()
            wait_until(
                lambda: "collector: subscribed to" in col.text(), 60, "the collector subscribed", every=0.1
            )
            col.stop()

        queue_for(broker, [col_session, lambda: recv_session(broker.port)], items)
        recv = receive_only(broker.port, len(items), size)
        db = CollectorDb(url)
        wipe(db)
        db.close()
        col.start()
        db = CollectorDb(url)
        try:
            wait_until(lambda: db.message_stats()[0] >= len(items), 600, "every row stored", every=0.5)
            span = "MAX(received) - MIN(received)"
            if dialect == "postgresql":
                span = f"EXTRACT(EPOCH FROM {span})"
            took = float(db.conn.execute(f"SELECT {span} FROM messages").fetchone()[0])
            rounds_n = int(db.conn.execute("SELECT COUNT(DISTINCT received) FROM messages").fetchone()[0])
        finally:
            db.close()
        col.stop()
        # the first round's own time is not in the span: count the rows after it
        first = len(items) / max(1, rounds_n)
        return recv, (len(items) - first) / took
    finally:
        col.stop()
        broker.stop()


def one(dialect: str, a: argparse.Namespace, items: list[tuple[str, bytes]]) -> None:
    with tempfile.TemporaryDirectory(prefix=f"ingest-{dialect}-") as d:
        tmp = Path(d)
        pg: Optional[Postgres] = None
        if dialect == "postgresql":
            pg = Postgres()
            pg.start()
        url = pg.url if pg else sqlite_url(tmp / "ingest.db")
        try:
            db = CollectorDb(url)
            db.migrate()
            batches = rounds(items, a.round)
            bare = bare_pg if dialect == "postgresql" else bare_sqlite
            rates: dict[str, list[float]] = {"bare": [], "store": [], "serial": []}
            digests: set[str] = set()  # bare and store leave the same rows (receive time aside)
            gc.freeze()  # as edge-agent collect does once started (app/collector/loop.py): both ways
            for _ in range(a.reps):
                rates["bare"].append(timed(db, bare, batches, digests))
                rates["store"].append(timed(db, store, batches, digests))
                rates["serial"].append(timed(db, store_serial, batches, digests))
            db.close()
            med = {k: statistics.median(v) for k, v in rates.items()}
            base = "COPY" if dialect == "postgresql" else "executemany"
            print(
                f"{dialect:<10} {len(items)} results, rounds of {a.round}, median of {a.reps}: "
                f"bare {base} {med['bare']:,.0f}/s | collector store {med['store']:,.0f}/s = "
                f"{med['store'] / med['bare']:.2f}x (serial, nothing parsed ahead: "
                f"{med['serial']:,.0f}/s = {med['serial'] / med['bare']:.2f}x)",
                flush=True,
            )
            for k in ("store", "serial"):  # each rep's ratio to the bare run just before it
                r = [x / b for x, b in zip(rates[k], rates["bare"])]
                print(
                    f"{'':<10} {k}/bare per rep: median {statistics.median(r):.2f}, {min(r):.2f}-{max(r):.2f}"
                )
            if not a.no_mqtt:
                recv, full = e2e(tmp, url, items, dialect, a.round)
                print(
                    f"{dialect:<10} through mosquitto: receive-only (paho, acks) {recv:,.0f}/s | "
                    f"collector end to end {full:,.0f}/s = {full / med['bare']:.2f}x of bare | "
                    f"paho's share of the end-to-end time {full / recv:.0%}",
                    flush=True,
                )
        finally:
            if pg is not None:
                pg.cleanup()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--devices", type=int, default=200)
    ap.add_argument("--per-device", type=int, default=100)
    ap.add_argument(
        "--round", type=int, default=2000, help="messages per transaction ([collector] batch_max)"
    )
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--db", choices=["sqlite", "postgresql", "both"], default="both")
    ap.add_argument("--no-mqtt", action="store_true", help="skip the end-to-end run through mosquitto")
    a = ap.parse_args()
    items = payloads(a.devices, a.per_device)
    print(
        f"{len(items)} payloads of {sum(len(p) for _, p in items) / len(items):.0f} bytes on average",
        flush=True,
    )
    for dialect in ["sqlite", "postgresql"] if a.db == "both" else [a.db]:
        one(dialect, a, items)
    return 0


if __name__ == "__main__":
    sys.exit(main())
