"""``edge-agent model rollout``: a package to a group in stages, canaries first, halted on failures.

Its own module beside ``model push`` (app/updates/model_cmd.py) because a rollout is stateful:
it lives in the collector's database (``--db``), can be resumed from any machine after the
operator's process died (``--resume ID``), and is inspected with ``--status [ID]``.
docs/model-updates.md, "Staged rollout".
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edge_agent.app.cli.configfile import add_config_arg
from edge_agent.errors import ConfigError

if TYPE_CHECKING:
    from edge_agent.adapters.collector.db import CollectorDb
    from edge_agent.adapters.collector.rollouts import Rollout, VerdictRow
    from edge_agent.app.cli.configfile import Subparsers

EXIT_HALTED = 1
EXIT_WAITING = 3  # --wait ran out of time: the rollout goes on (resume it)


def register_under(msub: Subparsers) -> None:
    from edge_agent.app.collector.fleet_cmd import DB_ENV, DEFAULT_DB

    ro = msub.add_parser(
        "rollout",
        help="send a package to a group in stages: canaries first, halt when devices refuse",
        description=__doc__,
    )
    ro.add_argument("package", nargs="?", help="package file from `edge-agent model pack` (signed)")
    add_config_arg(ro)
    ro.add_argument("--group", help="the group to roll out to (the package must name it)")
    ro.add_argument("--canary", default="1", metavar="N|P%", help="canaries: N devices or P%% of the group")
    ro.add_argument(
        "--halt-after", type=int, default=1, metavar="K", help="halt when K devices refused or rolled back"
    )
    ro.add_argument(
        "--wave", type=int, default=0, metavar="N", help="after the canaries, N devices at a time (0: all)"
    )
    members = ro.add_mutually_exclusive_group()
    members.add_argument(
        "--broker-dir", metavar="DIR", help="the group's members from DIR/enrolled.json (`fleet enroll`)"
    )
    members.add_argument("--member", action="append", metavar="ID", help="a member of the group (repeat)")
    ro.add_argument("--wait", action="store_true", help="stay until the rollout is done or halted")
    ro.add_argument(
        "--timeout", type=float, default=3600.0, metavar="S", help="with --wait: at most S seconds"
    )
    ro.add_argument(
        "--resume", metavar="ID", help="continue rollout ID (after its process died, or step by step)"
    )
    ro.add_argument(
        "--status", nargs="?", const="", metavar="ID", help="the rollouts, or one with its verdicts"
    )
    ro.add_argument("--db", metavar="URL", help=f"collector database (default: ${DB_ENV}, else {DEFAULT_DB})")
    ro.add_argument("--json", action="store_true", help="with --status: machine-readable")
    ro.set_defaults(func=run)


def _db(args: argparse.Namespace) -> CollectorDb:
    from edge_agent.app.collector.fleet_cmd import _open

    return _open(args)


def _members(args: argparse.Namespace) -> list[str]:
    from edge_agent.app.updates.model_cmd import _NAME

    if args.member:
        for m in args.member:
            if not _NAME.fullmatch(m):
                raise ConfigError(f"--member {m[:70]!r}: expected a device id of 1 to 64 of [A-Za-z0-9_.-]")
        return sorted(set(args.member))
    if not args.broker_dir:
        raise ConfigError(
            "model rollout: name the group's members: --broker-dir DIR (enrolled.json) or --member ID ..."
        )
    from edge_agent.core.broker.identity import EnrollError, parse_enrolled

    path = Path(args.broker_dir) / "enrolled.json"
    try:
        enrolled = parse_enrolled(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"--broker-dir: cannot read {path}: {exc.strerror or exc}") from None
    except EnrollError as exc:
        text = str(exc)
        raise ConfigError(
            f"{path}: {text[len('enrolled.json: ') :] if text.startswith('enrolled.json: ') else text}"
        ) from None
    found = sorted(d for d, groups in enrolled.devices.items() if args.group in groups)
    if not found:
        raise ConfigError(f"{path}: no device is enrolled in group {args.group!r} (`fleet enroll --group`)")
    return found


def _check(args: argparse.Namespace) -> None:
    from edge_agent.app.updates.model_cmd import _NAME

    modes = [bool(args.package) and not args.resume, args.resume is not None, args.status is not None]
    if args.status is not None and (args.package or args.resume):
        raise ConfigError("model rollout --status: takes no package and no --resume")
    if not any(modes):
        raise ConfigError("model rollout: give a PACKAGE (a new rollout), --resume ID or --status [ID]")
    if modes[0] and not args.group:
        raise ConfigError("model rollout PACKAGE: --group G is required (the group to roll out to)")
    if modes[0] and not _NAME.fullmatch(args.group):
        raise ConfigError(f"--group {args.group[:70]!r}: expected 1 to 64 of [A-Za-z0-9_.-]")
    if args.halt_after < 1:
        raise ConfigError(f"--halt-after {args.halt_after}: expected a number of devices >= 1")
    if args.wave < 0:
        raise ConfigError(f"--wave {args.wave}: expected a number of devices >= 0 (0: all at once)")
    if not (args.timeout > 0 and math.isfinite(args.timeout)):
        raise ConfigError(f"--timeout {args.timeout}: expected seconds > 0")


def run(args: argparse.Namespace) -> int:
    from edge_agent.adapters.collector import rollouts
    from edge_agent.app.updates import rollout_run
    from edge_agent.core.updates.rollout import parse_canary

    _check(args)
    if args.status is not None:
        return _status(args)
    try:
        canary = parse_canary(args.canary)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    from edge_agent.app.cli.configfile import load_config

    cfg = load_config(args.config)
    db = _db(args)
    try:
        if args.resume:
            ro = rollouts.get(db, args.resume)
            if ro is None:
                raise ConfigError(
                    f"--resume {args.resume[:40]!r}: no such rollout (see `model rollout --status`)"
                )
            if ro.state != "running":
                _out(f"rollout {ro.id}: {ro.state}{': ' + ro.reason if ro.reason else ''}")
                return 0 if ro.state == "done" else EXIT_HALTED
            pkg = rollout_run.package_for(ro, Path(args.package) if args.package else None)
        else:
            pkg = Path(args.package)
            if not pkg.is_file():
                raise ConfigError(f"{pkg}: no such package file")
            members = _members(args)
            ro = rollout_run.start(db, pkg, args.group, members, canary, args.halt_after, args.wave)
            _out(
                f"rollout {ro.id}: {ro.name} {ro.version} to group {ro.group}, {len(members)} devices; "
                f"canaries {', '.join(ro.stages[0])}"
            )
        ro = rollout_run.step(db, cfg, ro, pkg, wait=args.wait, timeout_s=args.timeout, say=_out)
        return _verdict_line(db, ro, args.wait)
    finally:
        db.close()


def _verdict_line(db: CollectorDb, ro: Rollout, waited: bool) -> int:
    from edge_agent.app.updates.rollout_run import pending

    if ro.state == "halted":
        _out(f"rollout {ro.id}: HALTED at stage {ro.stage}: {ro.reason}")
        untouched = [d for s in ro.stages[ro.pushed + 1 :] for d in s]
        if untouched:
            _out(f"rollout {ro.id}: not sent to {len(untouched)} devices: {', '.join(untouched)}")
        return EXIT_HALTED
    if ro.state == "done":
        _out(f"rollout {ro.id}: done: every device of group {ro.group} runs {ro.vid}")
        return 0
    left = pending(ro, db)
    what = ", ".join(f"{d} ({w})" for d, w in sorted(left.items()))
    _out(
        f"rollout {ro.id}: stage {ro.stage} waiting for {what or '-'}; go on with `model rollout --resume {ro.id} --wait`"
    )
    return EXIT_WAITING if waited else 0


def _status(args: argparse.Namespace) -> int:
    from edge_agent.adapters.collector import rollouts

    db = _db(args)
    try:
        if not args.status:
            listed = rollouts.listing(db)
            if args.json:
                _out(json.dumps({"rollouts": [r.to_json() for r in listed]}, indent=2))
                return 0
            _table(
                ("ROLLOUT", "STATE", "STAGE", "PACKAGE", "GROUP", "DEVICES", "CREATED"),
                [
                    (
                        r.id,
                        r.state,
                        f"{r.stage}/{len(r.stages) - 1}",
                        f"{r.name} {r.version}",
                        r.group,
                        str(sum(len(s) for s in r.stages)),
                        _when(r.created),
                    )
                    for r in listed
                ],
            )
            if not listed:
                sys.stderr.write("(no rollouts yet)\n")
            return 0
        ro = rollouts.get(db, args.status)
        if ro is None:
            raise ConfigError(f"--status {args.status[:40]!r}: no such rollout")
        rows = rollouts.verdicts(db, ro.id)
    finally:
        db.close()
    if args.json:
        _out(json.dumps({"rollout": ro.to_json(), "verdicts": [v.to_json() for v in rows]}, indent=2))
        return 0
    _out(
        f"rollout {ro.id}: {ro.name} {ro.version} ({ro.vid}) to group {ro.group}: {ro.state}, stage {ro.stage}"
    )
    _out(
        f"  canary {ro.canary}, halt after {ro.halt_after}, wave {ro.wave or 'all'}; started {_when(ro.created)}"
    )
    for i, s in enumerate(ro.stages):
        sent = "sent" if i <= ro.pushed else "not sent"
        _out(f"  stage {i}{' (canaries)' if i == 0 else ''}, {sent}: {', '.join(s)}")
    if ro.reason:
        _out(f"  halted: {ro.reason}")
    for line in verdict_table(rows):
        _out(line)
    return 0


def verdict_table(rows: list[VerdictRow]) -> list[str]:
    """Rollout verdicts as a table (``--status ID``; ``fleet history DEVICE`` shows a device's
    rows, ``adapters.collector.rollouts.device_verdicts``, the same way)."""
    return _lines(
        ("AT", "DEVICE", "ROLLOUT", "STAGE", "VERDICT", "DETAIL"),
        [(_when(v.at), v.device, v.rollout, str(v.stage), v.verdict, v.detail[:120]) for v in rows],
    )


def _when(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))


def _table(head: tuple[str, ...], rows: list[Any]) -> None:
    for line in _lines(head, rows):
        _out(line)


def _lines(head: tuple[str, ...], rows: list[Any]) -> list[str]:
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in [head, *rows]]


def _out(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()
