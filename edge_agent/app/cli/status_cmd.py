"""``edge-agent status``: what the running service last reported (fps, latencies, queue, broker...).

Reads the status file, which holds the same snapshot the agent publishes retained on MQTT
(core.status). Times are shown as ages ("12 s ago") and local clock times, never raw epochs;
parts of an agent that stopped, or stopped reporting, are not shown as streaming.
"""

from __future__ import annotations

import argparse
import calendar
import json
import sys
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Optional

from edge_agent.app.cli.argtypes import positive_float
from edge_agent.app.cli.configfile import add_config_arg
from edge_agent.errors import EdgeAgentError

if TYPE_CHECKING:
    from edge_agent.app.cli.configfile import Subparsers


def register(sub: Subparsers) -> None:
    p = sub.add_parser("status", help="show the running agent's health", description=__doc__)
    add_config_arg(p)
    p.add_argument("--file", help="status file to read (instead of the config's [health] status_file)")
    p.add_argument(
        "--max-age", type=positive_float, default=30.0, help="older than this (s) counts as stale (exit 1)"
    )
    p.add_argument("--json", action="store_true", help="the snapshot as JSON (plus age_s)")
    p.set_defaults(func=run)


def age(seconds: Optional[float]) -> str:
    """``"12 s ago"``, ``"3 min ago"``, ``"2.5 h ago"``, ``"4 d ago"``."""
    if seconds is None:
        return "never"
    s = max(0.0, float(seconds))
    if s < 90:
        return f"{s:.0f} s ago"
    if s < 5400:
        return f"{s / 60:.0f} min ago"
    if s < 172800:
        return f"{s / 3600:.1f} h ago"
    return f"{s / 86400:.0f} d ago"


def when(ts: Optional[float], now: float) -> str:
    """A wall-clock time as local time and age: ``"14:03:12 (12 s ago)"``."""
    if not isinstance(ts, (int, float)):
        return "never"
    local = time.localtime(ts)
    same_day = time.localtime(now)[:3] == local[:3]
    stamp = time.strftime("%H:%M:%S" if same_day else "%Y-%m-%d %H:%M:%S", local)
    return f"{stamp} ({age(now - ts)})"


def _kv(d: Optional[Mapping[str, Any]], *keys: str) -> str:
    d = d or {}
    return ", ".join(f"{k} {d[k]}" for k in keys if d.get(k) not in (None, 0, False))


def _epoch(iso: object) -> Optional[float]:
    """``2026-11-30T03:29:59Z`` (the queue's UTC stamps) -> unix time, None if absent or odd."""
    if not isinstance(iso, str):
        return None
    try:
        return calendar.timegm(time.strptime(iso, "%Y-%m-%dT%H:%M:%SZ"))
    except ValueError:
        return None


def _part(value: object) -> dict[str, Any]:
    # an older agent wrote the broker as a bare string: show it rather than fail
    return dict(value) if isinstance(value, Mapping) else ({"state": value} if value is not None else {})


def render(d: Mapping[str, Any], age_s: float, max_age: float, now: float) -> str:
    """The human view of one snapshot."""
    state = str(d.get("state"))
    stale = state == "running" and age_s > max_age
    live = state == "running" and not stale
    shown_state = f"{state}, NOT REPORTING" if stale else state
    cam, q, b, lat = (_part(d.get(k)) for k in ("camera", "queue", "broker", "latency_ms"))
    cam_state = cam.get("state") if live else f"unknown (agent {shown_state})"
    lines = [
        f"device     {d.get('device_id')}  v{d.get('version')}  {shown_state}  (reported {age(age_s)})",
        f"started    {when(d.get('started_at'), now)}",
        f"throughput {d.get('fps')} fps, {d.get('frames')} frames, {d.get('results')} results, "
        f"{d.get('errors')} errors",
        "latency    "
        + (", ".join(f"{k} {v} ms" for k, v in lat.items()) or "-")
        + " (median, recent frames)",
        *_camera_lines(d, cam, cam_state, live, shown_state),
        f"queue      {q.get('pending')} pending ({q.get('bytes')} bytes), oldest {when(_epoch(q.get('oldest')), now)}"
        + ("  DISK FULL" if q.get("disk_full") else ""),
        "           "
        + (_kv(q, "dropped", "rejected", "expired", "lost", "crashes", "seq_skipped") or "nothing lost"),
        f"broker     {b.get('state') if live or b.get('state') == 'disabled' else 'unknown'}  "
        f"last ack {when(b.get('last_sync'), now)}"
        + (f"  last error: {b['last_error']}" if b.get("last_error") else "")
        + (f"  sync restarts {b['thread_restarts']}" if b.get("thread_restarts") else ""),
        f"provider   {d.get('provider') or '-'}  clock synced: "
        f"{_yes_no(d.get('clock_synced'), 'no (NTP not synchronised)')}",
    ]
    lines += [f"WARNING    {w}" for w in d.get("warnings") or []]
    return "\n".join(lines) + "\n"


def _camera_lines(
    d: Mapping[str, Any], cam: Mapping[str, Any], cam_state: object, live: bool, shown_state: str
) -> list[str]:
    """One line for the single [camera]; with [[cameras]], one per camera with its own figures."""
    cams = d.get("cameras")
    if not isinstance(cams, Mapping):
        return [
            f"camera     {cam_state}  {cam.get('source', '')}  "
            + _kv(cam, "dropped", "reconnects", "skipped", "last_error")
        ]
    out = []
    for cid, c in cams.items():
        c = _part(c)
        st = c.get("state") if live else f"unknown (agent {shown_state})"
        age_ms = c.get("frame_age_ms")
        out.append(
            f"camera {cid}: {st}  {c.get('source', '')}  {c.get('fps')} fps of {c.get('fps_in')} in, "
            f"frame age {'-' if age_ms is None else f'{age_ms} ms'}  "
            + _kv(c, "skipped_motion", "dropped_stale", "reconnects", "last_error")
        )
    return out


def _status_file(config: Optional[str]) -> str:
    """The config's [health] status_file; the default one when the config exists but this user
    may not read it (0640, group edge-agent): the status is for every operator, the config not."""
    import os

    from edge_agent.app.cli.configfile import config_path, load_config
    from edge_agent.core.config.schema import HealthConfig

    cfg_path = config_path(config)
    if cfg_path.is_file() and not os.access(cfg_path, os.R_OK):
        default = HealthConfig().status_file
        sys.stderr.write(
            f"edge-agent status: {cfg_path} is readable by the edge-agent group only; reading the "
            f"default {default} (join the group or pass --file for another one)\n"
        )
        return default
    return load_config(config).health.status_file


def run(args: argparse.Namespace) -> int:
    from edge_agent.adapters.host.statusfile import read_status

    path = args.file or _status_file(args.config)
    snap = read_status(path)
    if snap is None:
        raise EdgeAgentError(f"{path}: no status file (is the agent running? `systemctl status edge-agent`)")
    d = snap.data
    if args.json:
        sys.stdout.write(json.dumps({**d, "age_s": round(snap.age_s, 1)}, indent=2) + "\n")
    else:
        sys.stdout.write(render(d, snap.age_s, args.max_age, time.time()))
    if d.get("state") == "running" and snap.is_stale(args.max_age):
        sys.stderr.write(
            f"edge-agent status: last report {age(snap.age_s)}: the agent may be hung or stopped\n"
        )
        return 1
    return 0


def _yes_no(value: object, no: str) -> str:
    """A boolean of the snapshot as a person reads it: yes / ``no`` / - (not reported)."""
    return "yes" if value is True else no if value is False else "-"
