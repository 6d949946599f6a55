"""``edge-agent fleet retention [--dry-run]`` and ``edge-agent fleet db partition``.

``retention``: delete now, once, what the collector's maintenance deletes every
``maintenance_every_s``: the messages past ``retention_{results,objects,counts}_days`` and the
health history past ``history_keep_days`` (from ``--config`` collector.toml, or the flags), in
batches of ``maintenance_batch`` rows (a running collector goes on ingesting between them).
``--dry-run``: how many rows each would delete, nothing deleted.

``db partition`` (PostgreSQL): make ``messages`` partitioned by day of the device time (native
declarative partitioning; ``--timescaledb``: a hypertable, when that extension is installed).
One transaction that copies every row: collectors wait for it (their rounds are retried).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import TYPE_CHECKING, Any

from edge_agent.errors import ConfigError

if TYPE_CHECKING:
    from edge_agent.adapters.collector.db import CollectorDb
    from edge_agent.app.cli.configfile import Subparsers
    from edge_agent.core.config.collector import CollectorConfig

AGES = ("results", "objects", "counts")
RETENTION_SCHEMA = 7  # 0007_retention


def _days(text: str) -> float:
    from edge_agent.app.cli.argtypes import _ranged

    return float(_ranged(float, 0.0, 36500.0, "a number of days from 0 (kept for ever) to 36500")(text))


def add_commands(fsub: Subparsers, db_help: str) -> None:
    rt = fsub.add_parser(
        "retention",
        help="delete the messages and statuses past their retention age now (--dry-run: count them)",
        description=__doc__,
    )
    rt.add_argument("--config", "-c", metavar="FILE", help="collector TOML whose [collector] has the ages")
    for cls in AGES:
        rt.add_argument(
            f"--{cls}-days", type=_days, metavar="D", help=f"retention_{cls}_days (0: kept for ever)"
        )
    rt.add_argument("--dry-run", action="store_true", help="count what would be deleted, delete nothing")
    db = fsub.add_parser("db", help="the collector database's layout (PostgreSQL partitioning)")
    dsub = db.add_subparsers(dest="db_command", metavar="COMMAND", required=True)
    pa = dsub.add_parser(
        "partition",
        help="make messages partitioned by day (PostgreSQL); old days are then dropped whole",
        description=__doc__,
    )
    pa.add_argument(
        "--timescaledb", action="store_true", help="a TimescaleDB hypertable instead (extension installed)"
    )
    for q in (rt, pa):
        q.add_argument("--db", metavar="URL", help=db_help)
        q.add_argument("--json", action="store_true", help="machine-readable output")
    rt.set_defaults(func=run_retention)
    pa.set_defaults(func=run_partition)


def _settings(args: argparse.Namespace) -> CollectorConfig:
    from edge_agent.app.collector.collect_cmd import settings

    ns = argparse.Namespace(config=args.config, db=None)
    cfg = settings(ns)
    for cls in AGES:
        given = getattr(args, f"{cls}_days")
        if given is not None:
            cfg = cfg.model_copy(update={f"retention_{cls}_days": given})
    return cfg


def _open(args: argparse.Namespace, cfg: CollectorConfig | None = None) -> CollectorDb:
    from edge_agent.app.collector.fleet_cmd import _open as open_db

    if args.db is None and cfg is not None and getattr(args, "config", None):
        args = argparse.Namespace(**{**vars(args), "db": cfg.db})
    return open_db(args)


def _out(args: argparse.Namespace, data: dict[str, Any], lines: list[str]) -> None:
    sys.stdout.write((json.dumps(data) if args.json else "\n".join(lines)) + "\n")


def run_retention(args: argparse.Namespace) -> int:
    from edge_agent.adapters.collector import history, partitions, purge
    from edge_agent.app.collector.maintenance import DAY_S, Maintenance

    cfg = _settings(args)
    now = time.time()
    m = Maintenance(cfg)
    cutoffs = m.ages().cutoffs(now)
    db = _open(args, cfg)
    try:
        if db.schema_version() < RETENTION_SCHEMA:
            raise ConfigError(
                f"--db: schema version {db.schema_version()} has no retention tables (expired): run this "
                "version's `edge-agent collect` once, it migrates the database"
            )
        if args.dry_run:
            counts = {c: purge.due(db, c, b) for c, b in cutoffs.items()}
            counts["statuses"] = history.due(db, now - cfg.history_keep_days * DAY_S)
        else:
            while m.retention(db, now, time.monotonic()):
                pass
            counts = dict(m.purged)
            while True:
                n = history.expire(db, now - cfg.history_keep_days * DAY_S, cfg.maintenance_batch)
                counts["statuses"] += n
                if n < cfg.maintenance_batch:
                    break
        parted = partitions.leaves(db) is not None if db.dialect == "postgresql" else False
    finally:
        db.close()
    ages = {c: getattr(cfg, f"retention_{c}_days") for c in AGES}
    ages["statuses"] = cfg.history_keep_days
    verb = "would delete" if args.dry_run else "deleted"
    lines = [
        f"{c}: {'kept for ever' if not ages[c] else f'older than {ages[c]:g} days'}: {verb} {counts.get(c, 0)}"
        for c in (*AGES, "statuses")
    ]
    if parted:
        lines.append("messages is partitioned by day: days past every age are dropped whole")
    _out(args, {"dry_run": args.dry_run, "ages_days": ages, "rows": counts, "partitioned": parted}, lines)
    return 0


def run_partition(args: argparse.Namespace) -> int:
    from edge_agent.adapters.collector import partitions
    from edge_agent.adapters.collector.db import DbError

    db = _open(args)
    try:
        if db.dialect != "postgresql":
            raise ConfigError("fleet db partition: the database is SQLite; partitioning is PostgreSQL's")
        try:
            if args.timescaledb:
                rows, parts = partitions.hypertable(db), 0
            else:
                rows, parts = partitions.convert(db, time.time())
        except DbError as exc:
            raise ConfigError(f"fleet db partition: {exc}") from None
    finally:
        db.close()
    kind = (
        "a TimescaleDB hypertable" if args.timescaledb else f"{parts} partitions (a day each, and a default)"
    )
    _out(
        args,
        {"rows": rows, "partitions": parts, "timescaledb": args.timescaledb},
        [f"messages: {rows} rows, now {kind}"],
    )
    return 0
