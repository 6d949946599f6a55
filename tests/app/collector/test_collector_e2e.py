"""The acceptance path, for real: devices (the real outbox and sync, in a child process) make
results while the broker is down; mosquitto comes back; `edge-agent collect` stores them, is
kill -9'd once mid-ingest and restarted. The database then holds exactly every result made, once,
and `edge-agent fleet gaps` reports none. With SQLite and with PostgreSQL, single and batched."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.collector import Postgres, fleet, sqlite_url
from support.fleetrun import outage_run

from edge_agent.adapters.collector.db import CollectorDb

pytestmark = pytest.mark.slow
DEVICES, PER_DEVICE = 5, 200
# the kill at 200 rows must come mid-ingest: unthrottled, 1000 rows were all in before a loaded
# machine's poll saw the 200th (CI under pytest -n 2, 2026-12-01). At 40 a second per device
# the last 800 take at least 4 s after it (a loaded poll here saw up to 189 rows late).
KILL_RATE = 40.0


def check(f: dict[str, object], url: str, per_device: int) -> None:
    """Every result once, every device seen going offline, no gap (also per `edge-agent fleet`)."""
    n = f["n"]
    assert f["at_kill"] < n, "the kill came after the last result: not mid-ingest"
    assert f["rows"] == f["keys"] == f["ids"] == n
    devices = f["devices"]
    assert isinstance(devices, list) and len(devices) == DEVICES
    assert all(d["messages"] == per_device and d["gaps"] == 0 for d in devices), devices
    assert all(d["state"] == "offline" and d["model_version"] == "sim-model-1" for d in devices), devices
    out = fleet("gaps", "dev000", "--db", url, "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["gaps"] == []
    st = fleet("status", "--db", url)
    assert st.returncode == 0 and "dev004" in st.stdout, st.stderr


@pytest.mark.parametrize("batch", [0, 1], ids=["single", "batched"])
def test_sqlite_collector_killed_mid_ingest_stores_every_result_once(tmp_path: Path, batch: int) -> None:
    url = sqlite_url(tmp_path / "fleet.db")
    # batched drains 1000 results in a blink: more of them so the kill lands mid-ingest
    per = 2000 if batch else PER_DEVICE
    f = outage_run(
        tmp_path,
        url,
        devices=DEVICES,
        per_device=per,
        batch=batch,
        kill_at=1 if batch else 200,
        rate=0 if batch else KILL_RATE,
    )
    check(f, url, per)
    print(
        f"\nsqlite {'batched' if batch else 'single'}: {f['n']} results in {f['took']:.1f} s (killed at {f['at_kill']})"
    )


def test_postgres_two_collectors_shared_one_killed(tmp_path: Path, postgres: Postgres) -> None:
    db = CollectorDb(postgres.url)
    try:
        db.conn.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public")
    finally:
        db.close()
    f = outage_run(
        tmp_path,
        postgres.url,
        devices=DEVICES,
        per_device=PER_DEVICE,
        group="g1",
        kill_at=200,
        rate=KILL_RATE,
    )
    check(f, postgres.url, PER_DEVICE)
    print(f"\npostgresql shared x2: {f['n']} results in {f['took']:.1f} s (killed at {f['at_kill']})")
