"""``edge-agent status``: what the running service last reported (fps, latencies, queue, broker...)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from edge_agent.app.argtypes import positive_float
from edge_agent.app.configfile import add_config_arg
from edge_agent.errors import EdgeAgentError


def register(sub: Any) -> None:
    p = sub.add_parser("status", help="show the running agent's health", description=__doc__)
    add_config_arg(p)
    p.add_argument("--file", help="status file to read (instead of the config's [health] status_file)")
    p.add_argument(
        "--max-age", type=positive_float, default=30.0, help="older than this (s) counts as stale (exit 1)"
    )
    p.add_argument("--json", action="store_true", help="print the status as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from edge_agent.adapters.statusfile import read_status
    from edge_agent.app.configfile import load_config

    if args.file:
        path = args.file
    else:
        cfg = load_config(args.config)
        path = cfg.health.status_file
    snap = read_status(path)
    if snap is None:
        raise EdgeAgentError(f"{path}: no status file (is the agent running? `systemctl status edge-agent`)")
    d = snap.data
    if args.json:
        sys.stdout.write(json.dumps({**d, "age_s": round(snap.age_s, 1)}, indent=2) + "\n")
    else:
        w = sys.stdout.write
        cam = d.get("camera") or {}
        q = d.get("queue") or {}
        w(
            f"device     {d.get('device_id')}  v{d.get('version')}  {d.get('state')}  (status {snap.age_s:.0f}s old)\n"
        )
        w(
            f"throughput {d.get('fps')} fps, {d.get('frames')} frames, {d.get('results')} results, {d.get('errors')} errors\n"
        )
        w(f"latency    {d.get('latency_ms')} ms (median of recent frames)\n")
        w(
            f"camera     {cam.get('state')} {cam.get('source')}  dropped {cam.get('dropped')}  reconnects {cam.get('reconnects')}\n"
        )
        w(
            f"queue      {q.get('pending')} pending, {q.get('bytes')} bytes, oldest {q.get('oldest')}, dropped {q.get('dropped')}\n"
        )
        w(f"broker     {d.get('broker')}  last sync {d.get('last_sync')}\n")
        w(f"provider   {d.get('provider')}  clock synced: {d.get('clock_synced')}\n")
    if d.get("state") == "running" and snap.is_stale(args.max_age):
        sys.stderr.write(
            f"edge-agent status: status is {snap.age_s:.0f}s old: the agent may be hung or stopped\n"
        )
        return 1
    return 0
