"""``edge-agent model pack|keygen|install|status|rollback|push``: validated model updates.

See docs/model-updates.md. ``install`` hands the package to the running agent through its inbox
and waits for the gate's verdict; with no agent running it gates and switches itself, and the
agent loads the new version at its next start. The author's side (``pack``, ``keygen``) lives in
app.model_pack_cmd, ``convert`` in app.model_convert_cmd.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import signal
import sys
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from edge_agent.app.cli.configfile import add_config_arg
from edge_agent.core.updates.store_state import Outcome
from edge_agent.errors import ConfigError, EdgeAgentError, ModelError

if TYPE_CHECKING:
    from edge_agent.app.cli.configfile import Subparsers
    from edge_agent.core.config.schema import Config

DESCRIPTION = (
    "Model packages: make one (pack, keygen), install it through the gate (install; push over MQTT), "
    "see and undo what runs (status, rollback). See docs/model-updates.md."
)


def register(sub: Subparsers) -> None:
    p = sub.add_parser(
        "model",
        help="model packages: pack, install, status, rollback, push, rollout",
        description=DESCRIPTION,
    )
    msub = p.add_subparsers(dest="model_command", metavar="ACTION", required=True)

    from edge_agent.app.updates import pack_cmd as model_pack_cmd  # the author's side: pack and keygen

    model_pack_cmd.register_under(msub)

    ins = msub.add_parser("install", help="install a package on this device (through the gate)")
    ins.add_argument("package", help="package file from `edge-agent model pack`")
    add_config_arg(ins)
    ins.add_argument("--force", action="store_true", help="switch even if the gate refuses (logged)")
    ins.add_argument(
        "--allow-downgrade",
        action="store_true",
        help="install a version not newer than the highest installed (anti-rollback is on otherwise)",
    )
    ins.add_argument(
        "--allow-rolled-back",
        action="store_true",
        help="install a version this device rolled back (refused otherwise until a newer one is installed)",
    )
    ins.add_argument("--timeout", type=float, default=900.0, help="seconds to wait for the running agent")
    ins.add_argument("--json", action="store_true", help="print the outcome as JSON")
    ins.set_defaults(func=install)

    st = msub.add_parser("status", help="the active model version, its trial, the last update")
    add_config_arg(st)
    st.add_argument("--json", action="store_true", help="print the status as JSON")
    st.set_defaults(func=status)

    rb = msub.add_parser("rollback", help="go back to the previous model version")
    add_config_arg(rb)
    rb.set_defaults(func=rollback)

    pu = msub.add_parser("push", help="send a package over MQTT to devices or a group")
    pu.add_argument("package", nargs="?", help="package file from `edge-agent model pack`")
    add_config_arg(pu)
    target = pu.add_mutually_exclusive_group(required=True)
    target.add_argument("--device", action="append", help="device id (repeatable)")
    target.add_argument("--group", help="group topic every device in model_update.groups listens to")
    pu.add_argument(
        "--force",
        action="store_true",
        help="refused: a device never takes 'force' from the network (sign a package instead, or "
        "run `model install --force` on the device)",
    )
    pu.add_argument(
        "--wait", type=float, default=0.0, metavar="S", help="wait up to S seconds for the devices' verdicts"
    )
    pu.add_argument(
        "--transfer-id",
        metavar="ID",
        help="re-push an interrupted transfer under its id (a broker that lost its sessions): "
        "devices skip the chunks they already have",
    )
    pu.add_argument("--expect", type=int, default=0, metavar="N", help="with --group: wait for N devices")
    pu.add_argument(
        "--cancel",
        metavar="TRANSFER",
        help="cancel a transfer this user pushed from this machine (Ctrl-C during a push does it too): "
        "the devices drop it unless they already switched",
    )
    pu.set_defaults(func=push)

    from edge_agent.app.updates import rollout_cmd  # staged: canaries first, state in the collector's db

    rollout_cmd.register_under(msub)

    from edge_agent.app.workbench import (
        convert_cmd as model_convert_cmd,  # `model convert` lives in its own module
    )

    model_convert_cmd.register_under(msub)


def _config(path: Optional[str]) -> Config:
    from edge_agent.app.cli.configfile import load_config

    return load_config(path)


def _as_state_owner(cfg: Config) -> None:
    """Refuse to write into a state directory another user owns: files we created there (the
    store's lock, a version, active.json) would be ours, and the service would die on them at its
    next start (issue 22: `sudo edge-agent model install` left root-owned files)."""
    import pwd
    import shlex

    state = Path(cfg.device.state_dir)
    try:
        owner = state.stat().st_uid
    except FileNotFoundError:
        return  # created by this run, owned by this user: consistent
    if owner == os.geteuid():
        return
    try:
        name = pwd.getpwuid(owner).pw_name
    except KeyError:  # no such user: sudo takes a bare uid as "#UID" (quoted: "#" starts a comment)
        name = f"#{owner}"
    cmd = " ".join(shlex.quote(a) for a in sys.argv[1:])
    raise ConfigError(
        f"{state} belongs to {name}, this is uid {os.geteuid()}: files written now would not be "
        f"the service's; run it as that user: sudo -u {shlex.quote(name)} edge-agent {cmd}"
    )


def agent_pid(cfg: Config) -> Optional[int]:
    """The running agent's pid (from its pid file, checked alive), or None."""
    from edge_agent.app.updates.agent_side import pid_file

    try:
        pid = int(pid_file(cfg).read_text().strip())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return None
    return pid


def _num(value: object) -> str:
    """A gate figure for a person: 4 significant digits (0.3265, not 0.32651472091674805)."""
    if isinstance(value, float):
        text = f"{value:.4g}"
        return text if any(c in text for c in ".enai") else text + ".0"  # a float reads as one: 0.0
    return "-" if value is None else str(value)


def _print_result(res: dict[str, Any], as_json: bool) -> int:
    if as_json:
        sys.stdout.write(json.dumps(res, indent=2) + "\n")
    else:
        w = sys.stdout.write
        w(f"{res['outcome']}: {res['detail']}\n")
        gate = res.get("gate") or {}
        for part in ("detector", "classifier"):
            rep = gate.get(part) or {}
            for c in rep.get("checks", []):
                w(
                    f"  {part} {c['name']:<22} {_num(c['value'])}  ({c['op']} {_num(c['limit'])})  "
                    f"{'ok' if c['passed'] else 'FAIL'}\n"
                )
        if gate:
            met = (gate.get("detector") or {}).get("metrics", {})
            w(
                f"  reference detections {met.get('reference_detections')}, candidate detections "
                f"{met.get('candidate_detections')}, candidate max score {_num(gate.get('candidate_max_score'))}\n"
            )
    return 0 if res["outcome"] in (Outcome.SWITCHED, Outcome.UNCHANGED) else 1


def install(args: argparse.Namespace) -> int:
    from edge_agent.adapters.host.durable import copy_durable, write_durable
    from edge_agent.adapters.updates.package_file import PRIVATE_DIR_MODE, make_dir
    from edge_agent.app.updates import switch as model_switch
    from edge_agent.app.updates.agent_side import inbox_dir

    cfg = _config(args.config)
    pkg = Path(args.package)
    if not pkg.is_file():
        raise ModelError(f"{pkg}: no such package file")
    _as_state_owner(cfg)
    pid = agent_pid(cfg)
    if pid is None:
        res = model_switch.install(
            cfg,
            pkg,
            force=args.force,
            origin="cli",
            allow_downgrade=args.allow_downgrade,
            allow_rolled_back=args.allow_rolled_back,
        )
        if res["outcome"] == Outcome.SWITCHED:
            res["detail"] += "; no agent running: it loads this version at its next start"
        return _print_result(res, args.json)
    inbox = inbox_dir(cfg)
    make_dir(inbox, PRIVATE_DIR_MODE)
    stem = f"cli-{uuid.uuid4().hex[:12]}"
    req = {
        "origin": "cli",
        "force": args.force,
        "allow_downgrade": args.allow_downgrade,
        "allow_rolled_back": args.allow_rolled_back,
    }
    write_durable(inbox / f"{stem}.request.json", json.dumps(req).encode())
    copy_durable(pkg, inbox / f"{stem}.pkg")
    sys.stderr.write(f"handed {pkg} to the running agent (pid {pid}); waiting for the gate...\n")
    result = inbox / f"{stem}.result.json"
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        if result.exists():
            res = json.loads(result.read_text())
            result.unlink()
            return _print_result(res, args.json)
        time.sleep(0.2)
    raise EdgeAgentError(
        f"no answer from the agent within {args.timeout:.0f}s; see `edge-agent model status`"
    )


def status(args: argparse.Namespace) -> int:
    from edge_agent.adapters.host.statusfile import read_status
    from edge_agent.app.updates.switch import describe

    cfg = _config(args.config)
    info = describe(cfg)
    snap = read_status(cfg.health.status_file)
    live = (snap.data.get("model_update") if snap is not None and not snap.is_stale(30) else None) or {}
    info["agent"] = "running" if agent_pid(cfg) else "not running"
    info["state"] = live.get("state")
    last_at = (info.get("last") or {}).get("at")
    if info["state"] == "gating" and snap is not None and last_at and last_at >= snap.data.get("ts", 0):
        info["state"] = "idle"  # the snapshot (every 2 s) predates the verdict recorded since
    info["transfer"] = live.get("transfer")
    if args.json:
        sys.stdout.write(json.dumps(info, indent=2) + "\n")
        return 0
    w = sys.stdout.write
    cur = info["current"] or {}
    if cur.get("id"):
        w(f"current   {cur.get('name')} {cur.get('version')}  detector sha256 {cur.get('detector_sha256')}\n")
    else:
        w(f"current   the config's model: {cur.get('model')}\n")
    w(f"previous  {', '.join(str(h or 'config model') for h in reversed(info['history'])) or '-'}\n")
    if info.get("trial"):
        t = info["trial"]
        w(
            f"trial     since {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(t['since']))}"
            f"{' (forced past the gate)' if t.get('forced') else ''}\n"
        )
    w(f"agent     {info['agent']}, update state {info['state'] or '-'}\n")
    if info.get("transfer"):
        t = info["transfer"]
        w(f"transfer  {t.get('transfer_id')}: {t.get('received')}/{t.get('chunks')} chunks\n")
    last = info.get("last")
    if last:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(last["at"]))
        w(f"last      {when} {last['outcome']} ({last['origin']}): {last['detail']}\n")
    return 0


def rollback(args: argparse.Namespace) -> int:
    from edge_agent.app.updates.switch import rollback as do_rollback

    cfg = _config(args.config)
    _as_state_owner(cfg)
    res = do_rollback(cfg, "requested with `edge-agent model rollback`")
    pid = agent_pid(cfg)
    if res["outcome"] == Outcome.ROLLED_BACK and pid is not None:
        os.kill(pid, signal.SIGHUP)  # the agent reloads: the pointer now names the previous version
        res["detail"] += f"; agent pid {pid} reloading"
    sys.stdout.write(f"{res['outcome']}: {res['detail']}\n")
    return 0 if res["outcome"] == Outcome.ROLLED_BACK else 1


_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")  # a device id or group as [device] id allows it


def _check_push_args(args: argparse.Namespace) -> None:
    """Every argument checked before anything is sent: one line per mistake, exit 1."""
    from edge_agent.core.updates.package import check_transfer_id

    for dev in args.device or []:
        if not _NAME.fullmatch(dev):  # fullmatch: "$" let "cam-1\n" through
            raise ConfigError(f"--device {dev[:70]!r}: expected a device id of 1 to 64 of [A-Za-z0-9_.-]")
    if args.group is not None and not _NAME.fullmatch(args.group):
        raise ConfigError(f"--group {args.group[:70]!r}: expected 1 to 64 of [A-Za-z0-9_.-]")
    if not (args.wait >= 0 and math.isfinite(args.wait)):
        raise ConfigError(f"--wait {args.wait}: expected seconds >= 0")
    if args.expect < 0:
        raise ConfigError(f"--expect {args.expect}: expected a number of devices >= 0")
    if args.expect and not args.group:
        raise ConfigError(
            "--expect N counts the members of a --group; with --device the list is the expectation"
        )
    if args.expect and not args.wait:
        raise ConfigError("--expect N needs --wait S (how long to wait for the N verdicts)")
    for flag, value in (("--transfer-id", args.transfer_id), ("--cancel", args.cancel)):
        try:
            check_transfer_id(value) if value is not None else None
        except ValueError as exc:
            raise ConfigError(f"{flag}: {exc}") from None


def _warn_untargeted(pkg: Path, devices: list[str], group: Optional[str]) -> None:
    """A push to a device or group the signed manifest does not name is refused there: say so."""
    from edge_agent.adapters.updates.package_file import PackageReader

    with PackageReader(pkg) as r:
        m = r.manifest
    if not (m.for_devices or m.for_groups):
        raise ModelError(
            f"{pkg}: names no device or group; devices refuse it over MQTT (repack with "
            "`edge-agent model pack --for-device ID` or `--for-group G`)"
        )
    for dev in devices:
        if dev not in m.for_devices and not m.for_groups:
            sys.stderr.write(
                f"warning: {pkg} is not for device {dev!r} (its manifest names {m.for_devices[:5]})\n"
            )
    if group is not None and group not in m.for_groups:
        sys.stderr.write(
            f"warning: {pkg} does not name group {group!r}: its devices refuse it unless the manifest names them\n"
        )


def push(args: argparse.Namespace) -> int:
    from edge_agent.app.updates.push import OutcomeWatcher, keep_secret, push_package, send_cancel

    if args.force:
        raise ConfigError(
            "model push --force: refused; devices never take 'force' from the network. Sign the "
            "package, or run `edge-agent model install --force PACKAGE` on the device"
        )
    _check_push_args(args)
    cfg = _config(args.config)
    devices = list(args.device or [])
    if args.cancel is not None:
        send_cancel(cfg, args.cancel, devices, args.group)
        sys.stdout.write(f"sent the cancel of transfer {args.cancel}\n")
        return 0
    if args.package is None:
        raise ConfigError("model push: expected a PACKAGE to push (or --cancel TRANSFER)")
    pkg = Path(args.package)
    if not pkg.is_file():
        raise ModelError(f"{pkg}: no such package file")
    tid = args.transfer_id or uuid.uuid4().hex[:16]
    watcher = OutcomeWatcher(cfg, tid) if args.wait > 0 else None
    _warn_untargeted(pkg, devices, args.group)
    commitment = keep_secret(tid)
    try:
        push_package(cfg, pkg, devices, args.group, transfer_id=tid, cancel_sha256=commitment)
        sys.stdout.write(f"pushed {pkg} as transfer {tid}\n")
        sys.stdout.flush()
        if watcher is None:
            return 0
        got = watcher.wait(args.wait, devices, args.expect)
    except KeyboardInterrupt:
        send_cancel(cfg, tid, devices, args.group)
        sys.stderr.write(
            f"edge-agent model push: interrupted: sent the cancel of transfer {tid} (a device that "
            "already switched keeps it: `edge-agent model rollback` there)\n"
        )
        return 130
    for dev in sorted(set(got) | set(devices)):
        res = got.get(dev)
        sys.stdout.write(f"{dev}: {res['outcome']}: {res['detail']}\n" if res else f"{dev}: no answer\n")
    bad = [d for d, r in got.items() if r["outcome"] != Outcome.SWITCHED]
    missing = [d for d in devices if d not in got]
    short = args.expect and len(got) < args.expect
    return 1 if bad or missing or short else 0
