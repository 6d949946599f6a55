"""``edge-agent fleet status|gaps|history``: what the collector's database knows about the fleet.

``status``: one line per device (state, last seen, model version, backlog, messages, gaps, and
its cameras when it reports a ``cameras`` map); ``status --cameras``: one line per camera.
``gaps [DEVICE]``: every seq range never received and why (the device's own loss reports); every
device's without one.
``history DEVICE [--since 6h|ISO] [--limit N]``: its statuses over time (health history).
``retire DEVICE [--purge]``: a device taken out of service leaves the fleet views.
``enroll`` / ``revoke``: the broker's identity files (app/collector/enroll_cmd.py).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import TYPE_CHECKING, Optional

from edge_agent.errors import ConfigError

if TYPE_CHECKING:
    from edge_agent.adapters.collector.db import CollectorDb
    from edge_agent.app.cli.configfile import Subparsers
    from edge_agent.core.messages.cameras import CameraRow

DB_ENV = "EDGE_COLLECTOR_DB"
DEFAULT_DB = "sqlite:////var/lib/edge-collector/fleet.db"


def register(sub: Subparsers) -> None:
    p = sub.add_parser("fleet", help="fleet views from the collector's database", description=__doc__)
    fsub = p.add_subparsers(dest="fleet_command", metavar="COMMAND", required=True)
    st = fsub.add_parser("status", help="every device: state, last seen, model, backlog, gaps")
    st.add_argument(
        "--cameras",
        action="store_true",
        help="one line per camera of the devices with [[cameras]]: state, fps, processed, frame age, reconnects",
    )
    gp = fsub.add_parser("gaps", help="seq ranges never received, and why (DEVICE's, or the fleet's)")
    gp.add_argument("device", nargs="?", help="the device id, as in `fleet status` (none: every device)")
    hs = fsub.add_parser("history", help="DEVICE's statuses over time: state, fps, backlog, disk, model")
    hs.add_argument("device", help="the device id, as in `fleet status`")
    hs.add_argument(
        "--since",
        metavar="WHEN",
        help="from a duration ago (90s, 30m, 6h, 7d, 2w) or an ISO time (2026-12-01T08:00:00Z); default all",
    )
    hs.add_argument(
        "--limit",
        type=_limit,
        default=1000,
        metavar="N",
        help="at most N statuses, the newest (default 1000)",
    )
    hs.add_argument("--body", action="store_true", help="with --json: each status's whole body too")
    rt = fsub.add_parser(
        "retire",
        help="remove DEVICE from the fleet views (it comes back if it publishes again)",
        description="Remove DEVICE's row (state, last seen, loss counters) so that `fleet status`, "
        "`fleet gaps` and the online count no longer show it. Its stored results stay in the messages "
        "table unless --purge deletes them (and its events) too. A device that publishes again "
        "reappears with its next message.",
    )
    rt.add_argument("device", help="the device id, as in `fleet status`")
    rt.add_argument("--purge", action="store_true", help="also delete its stored messages and events")
    for q in (st, gp, rt, hs):
        q.add_argument(
            "--db", metavar="URL", help=f"collector database (default: ${DB_ENV}, else {DEFAULT_DB})"
        )
        q.add_argument("--json", action="store_true", help="machine-readable output")
    from edge_agent.app.collector.enroll_cmd import add_commands
    from edge_agent.app.collector.retention_cmd import add_commands as retention_commands

    add_commands(fsub)
    retention_commands(fsub, f"collector database (default: ${DB_ENV}, else {DEFAULT_DB})")
    st.set_defaults(func=run_status)
    gp.set_defaults(func=run_gaps)
    rt.set_defaults(func=run_retire)
    hs.set_defaults(func=run_history)


def _limit(text: str) -> int:
    from edge_agent.app.cli.argtypes import _ranged

    return int(_ranged(int, 1, 1_000_000, "a whole number from 1 to 1000000")(text))


def _open(args: argparse.Namespace) -> CollectorDb:
    from edge_agent.adapters.collector.db import CollectorDb
    from edge_agent.core.config.collector import db_url_password

    if args.db and db_url_password(args.db):  # not echoed: it holds the secret
        raise ConfigError(
            "--db: the database URL carries a password (every user sees it in ps): use libpq's "
            f"PGPASSFILE (or ${DB_ENV})"
        )
    url = args.db or os.environ.get(DB_ENV) or DEFAULT_DB
    if url.startswith("sqlite:///"):
        path = url[len("sqlite:///") :]
        if not os.path.exists(path):
            raise ConfigError(f"--db {url!r}: no such database file (is the collector running there?)")
    db = CollectorDb(url)
    if db.schema_version() == 0:
        raise ConfigError(f"--db {url!r}: not a collector database (no schema_version table)")
    return db


def _out(line: str) -> None:
    sys.stdout.write(line + "\n")


def _age(ts: object, now: float) -> str:
    from edge_agent.app.cli.status_cmd import age

    return age(now - ts) if isinstance(ts, (int, float)) else "never"


def _table(head: tuple[str, ...], rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    for r in [head, *rows]:
        _out("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())


def _fig(value: object, fmt: str = "{:g}") -> str:
    return "-" if value is None else fmt.format(value)


def run_status(args: argparse.Namespace) -> int:
    from edge_agent.core.messages.cameras import camera_rows, summary

    db = _open(args)
    try:
        devices = db.devices()
    finally:
        db.close()
    cams = {d["device"]: camera_rows(d["device"], d["state"], d.get("cameras")) for d in devices}
    if getattr(args, "cameras", False):
        return _camera_status(args, cams)
    if args.json:
        _out(json.dumps({"devices": devices}, indent=2))
        return 0
    now = time.time()
    head: tuple[str, ...] = (
        "DEVICE",
        "STATE",
        "LAST SEEN",
        "MODEL",
        "BACKLOG",
        "MESSAGES",
        "GAPS",
        "CONFLICTS",
    )
    rows: list[tuple[str, ...]] = [
        (
            d["device"],
            d["state"] or "-",
            _age(d["last_seen"], now),
            (d["model_version"] or "-")[:24],
            "-" if d["backlog"] is None else str(d["backlog"]),
            str(d["messages"]),
            f"{d['gaps']} ({d['missing']} seq)" if d["gaps"] else "0",
            str(d["conflicts"]),
        )
        for d in devices
    ]
    if any("cameras" in d for d in devices):  # a fleet without [[cameras]] keeps its table
        head += ("CAMERAS",)
        rows = [(*r, summary(*cams[d["device"]])) for r, d in zip(rows, devices)]
    _table(head, rows)
    if not rows:
        sys.stderr.write("(no devices yet)\n")
    return 0


def _camera_status(args: argparse.Namespace, cams: dict[str, tuple[list[CameraRow], int]]) -> int:
    """``fleet status --cameras``: every camera of every device that reports a cameras map."""
    rows = [r for dev in sorted(cams) for r in cams[dev][0]]
    left_out = {dev: n for dev, (_, n) in cams.items() if n}
    if args.json:
        _out(json.dumps({"cameras": [r._asdict() for r in rows], "left_out": left_out}, indent=2))
        return 0
    head = (
        "DEVICE",
        "CAMERA",
        "STATE",
        "FPS IN",
        "FPS",
        "PROCESSED",
        "FRAME AGE",
        "RECONNECTS",
        "LAST ERROR",
    )
    _table(
        head,
        [
            (
                r.device,
                r.camera,
                r.state,
                _fig(r.fps_in, "{:.1f}"),
                _fig(r.fps, "{:.1f}"),
                _fig(r.processed, "{}"),
                _fig(r.frame_age_ms, "{:.0f} ms"),
                _fig(r.reconnects, "{}"),
                (r.last_error or "-")[:60],
            )
            for r in rows
        ],
    )
    for dev, n in sorted(left_out.items()):
        sys.stderr.write(
            f"{dev}: {n} more camera entries not shown (not a camera id or object, or past 64)\n"
        )
    if not rows:
        sys.stderr.write("(no device reports cameras: [[cameras]] in its config)\n")
    return 0


def _check_device(device: str) -> None:
    from edge_agent.core.messages.fleet import DEVICE_RE

    if not DEVICE_RE.match(device):
        raise ConfigError(f"device {device[:80]!r}: expected 1-64 of A-Za-z0-9_.-")


def run_gaps(args: argparse.Namespace) -> int:
    from edge_agent.core.messages.fleet import explain

    if args.device is None:
        return _fleet_gaps(args)
    _check_device(args.device)
    db = _open(args)
    try:
        counters = db.counters(args.device)
        gaps = explain(db.gap_rows(args.device), counters or {})
        conflicts = db.conflict_rows(args.device)
        total = next((d["conflicts"] for d in db.devices() if d["device"] == args.device), 0)
        expired = _expired(db, args.device)
    finally:
        db.close()
    if counters is None:
        raise ConfigError(f"device {args.device!r}: not in the collector's database")
    if args.json:
        out = [{**g._asdict(), "missing": g.last - g.first + 1} for g in gaps]
        kept = [{"boot": b, "seq": q, "id": m, "reason": r} for b, q, m, r in conflicts]
        _out(
            json.dumps(
                {
                    "device": args.device,
                    "gaps": out,
                    "conflicts": total,
                    "conflicts_kept": kept,
                    "expired": dict(zip(("rows", "spans", "newest"), expired)),
                },
                indent=2,
            )
        )
        return 0
    if not gaps:
        _out(f"{args.device}: no gaps")
    if expired[0]:  # deleted for age: received, so no gap (docs/collector.md, Retention)
        _out(f"{args.device}: {expired[0]} messages deleted by the retention (not gaps)")
    for g in gaps:
        n = g.last - g.first + 1
        _out(f"{args.device}: seq {g.first}..{g.last} ({n} missing): {g.reason}")
    if total:
        # without broker ACLs the collector cannot tell the real copy from a forged one: both kept
        _out(f"{args.device}: {total} conflicts (a seq taken twice with another id or body, or far ahead):")
        for b, q, m, r in conflicts[:20]:
            _out(f"{args.device}:   boot {b} seq {q} id {m}: {r}")
        if len(conflicts) > 20:
            _out(f"{args.device}:   ... {len(conflicts) - 20} more kept (--json lists them)")
    return 0


def _expired(db: CollectorDb, device: str) -> tuple[int, int, Optional[float]]:
    from edge_agent.adapters.collector import purge

    try:
        return purge.expired_of(db, device)
    except db.errors():  # a database before the retention schema
        if db.dialect == "postgresql":
            db.conn.rollback()
        return 0, 0, None


def run_retire(args: argparse.Namespace) -> int:
    _check_device(args.device)
    db = _open(args)
    try:
        found = db.retire(args.device, args.purge)
    finally:
        db.close()
    if found is None:
        raise ConfigError(f"device {args.device!r}: not in the collector's database (nothing retired)")
    messages, events = found
    if args.json:
        _out(
            json.dumps({"device": args.device, "purged": args.purge, "messages": messages, "events": events})
        )
    elif args.purge:
        _out(f"{args.device}: retired; {messages} messages and {events} events deleted")
    else:
        _out(
            f"{args.device}: retired; its {messages} messages and {events} events kept (--purge deletes them)"
        )
    return 0


def _fleet_gaps(args: argparse.Namespace) -> int:
    """Every device's gaps, explained by its own counters."""
    from edge_agent.adapters.collector import history
    from edge_agent.core.messages.fleet import explain

    db = _open(args)
    try:
        rows = history.gap_rows_all(db)
        counters = history.counters_all(db)
    finally:
        db.close()
    by_device: dict[str, list[tuple[int, int, Optional[int], int]]] = {}
    for dev, first, last, before, after in rows:
        by_device.setdefault(dev, []).append((first, last, before, after))
    out = {dev: explain(g, counters.get(dev, {})) for dev, g in sorted(by_device.items())}
    if args.json:
        _out(
            json.dumps(
                {
                    "devices": [
                        {
                            "device": dev,
                            "gaps": [{**g._asdict(), "missing": g.last - g.first + 1} for g in gaps],
                        }
                        for dev, gaps in out.items()
                    ]
                },
                indent=2,
            )
        )
        return 0
    if not out:
        _out("fleet: no gaps")
    for dev, gaps in out.items():
        for g in gaps:
            _out(f"{dev}: seq {g.first}..{g.last} ({g.last - g.first + 1} missing): {g.reason}")
    return 0


def run_history(args: argparse.Namespace) -> int:
    from edge_agent.adapters.collector import history, rollouts
    from edge_agent.core.messages.health_history import parse_since, table

    _check_device(args.device)
    try:
        since = parse_since(args.since, time.time()) if args.since else None
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    db = _open(args)
    try:
        try:
            rows = history.rows(db, args.device, since, args.limit, body=args.body and args.json)
        except db.errors():
            raise ConfigError(
                f"--db: schema version {db.schema_version()} has no health history (status_history): "
                "run this version's `edge-agent collect` once, it migrates the database"
            ) from None
        try:  # the staged rollouts' verdicts of this device (model rollout)
            verdicts = rollouts.device_verdicts(db, args.device, since or 0.0)
        except db.errors():
            verdicts = []  # a database without the rollout tables
        known = bool(rows) or bool(verdicts) or history.known(db, args.device)
    finally:
        db.close()
    if not known:
        raise ConfigError(f"device {args.device!r}: not in the collector's database")
    if args.json:
        body = {"device": args.device, "statuses": rows, "rollout_verdicts": [v.to_json() for v in verdicts]}
        _out(json.dumps(body, indent=2))
        return 0
    if not rows:
        sys.stderr.write(f"{args.device}: no status {'since ' + args.since if args.since else 'kept'}\n")
    for line in table(rows) if rows else []:
        _out(line)
    if verdicts:
        from edge_agent.app.updates.rollout_cmd import verdict_table

        for line in verdict_table(verdicts):
            _out(line)
    return 0
