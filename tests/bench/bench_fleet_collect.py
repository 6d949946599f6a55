"""Proof at scale (run by hand, not collected by pytest): 200 simulated devices x 500 results.

    PYTHONPATH=$PWD python tests/bench/bench_fleet_collect.py [--devices 200] [--per-device 500]
        [--procs 4] [--db sqlite|postgresql|both] [--batch 0]

The devices (the real outbox and MqttSync, ``--procs`` processes of tests/support/fleet_sim.py) make
their results while mosquitto is down; the broker comes back; two ``edge-agent collect`` share the
load on ``$share/fleet/...``; the first is kill -9'd after a quarter of the results is stored and
restarted. Prints: results made, rows stored, distinct (device, boot, seq), distinct ids,
devices with a gap, the time from the broker's return to the last row, and the rate. Exit 1 if
anything is lost or doubled. PostgreSQL: a throw-away cluster (initdb/pg_ctl, as in the tests).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))

from support.collector import Postgres, sqlite_url  # noqa: E402
from support.fleetrun import outage_run  # noqa: E402


def one(db: str, a: argparse.Namespace) -> bool:
    with tempfile.TemporaryDirectory(prefix=f"fleet-{db}-") as d:
        tmp = Path(d)
        pg = None
        if db == "postgresql":
            pg = Postgres()
            pg.start()
        url = pg.url if pg else sqlite_url(tmp / "fleet.db")
        n = a.devices * a.per_device
        try:
            f = outage_run(
                tmp,
                url,
                devices=a.devices,
                per_device=a.per_device,
                procs=a.procs,
                batch=a.batch,
                batch_max=500,
                group="fleet",
                kill_at=n // 4,
                timeout=900,
                poll=0.2,
            )
        finally:
            if pg is not None:
                pg.cleanup()
    gaps = sum(1 for d in f["devices"] if d["gaps"])
    ok = f["rows"] == f["keys"] == f["ids"] == n and gaps == 0 and len(f["devices"]) == a.devices
    print(
        f"{db:<10} made {n} (in {f['made_s']:.1f} s, broker down) | stored rows {f['rows']}, "
        f"distinct keys {f['keys']}, distinct ids {f['ids']}, devices {len(f['devices'])}, with gaps {gaps} | "
        f"kill -9 at {f['at_kill']} | broker back -> last row {f['took']:.1f} s = {n / f['took']:,.0f} results/s | "
        f"duplicates dropped by the collectors after the kill: {f['duplicates_dropped']} | {'OK' if ok else 'FAILED'}",
        flush=True,
    )
    return ok


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--devices", type=int, default=200)
    ap.add_argument("--per-device", type=int, default=500)
    ap.add_argument("--procs", type=int, default=4)
    ap.add_argument("--batch", type=int, default=0, help="[mqtt] batch_threshold of the devices")
    ap.add_argument("--db", choices=["sqlite", "postgresql", "both"], default="both")
    a = ap.parse_args()
    dbs = ["sqlite", "postgresql"] if a.db == "both" else [a.db]
    results = [one(db, a) for db in dbs]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
