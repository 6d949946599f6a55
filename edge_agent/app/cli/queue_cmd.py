"""``edge-agent queue``: look into, drain, export and purge the on-device outbox.

``stats``, ``peek`` and ``export`` only read the file (safe while the service runs); ``drain`` and
``purge`` take the queue's writer lock, so they refuse to run beside the service.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Optional

from edge_agent.app.cli.argtypes import positive_float, positive_int
from edge_agent.app.cli.configfile import add_config_arg

if TYPE_CHECKING:
    from edge_agent.adapters.mqtt.sync import MqttSync
    from edge_agent.adapters.outbox.outbox import Outbox
    from edge_agent.app.cli.configfile import Subparsers
    from edge_agent.core.config.schema import Config

EXPORT_MODE = 0o600  # every payload of the queue is in it


def register(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "queue", help="inspect, drain, export or purge the durable outbox", description=__doc__
    )
    actions = parser.add_subparsers(dest="queue_action", metavar="ACTION", required=True)

    def action(name: str, help_text: str) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = actions.add_parser(name, help=help_text, description=help_text)
        add_config_arg(p)
        p.set_defaults(func=run)
        return p

    action("stats", "pending/bytes/oldest/dropped and other counters").add_argument(
        "--json", action="store_true", help="one JSON object"
    )
    action("drain", "publish everything pending to the configured broker, then exit").add_argument(
        "--timeout",
        type=positive_float,
        default=60.0,
        metavar="S",
        help="give up after S seconds (default 60)",
    )
    action("peek", "show the oldest messages as JSON lines").add_argument(
        "-n", type=positive_int, default=10, metavar="N", help="how many (default 10)"
    )
    action("export", "write every queued message as JSON lines").add_argument(
        "-o", "--output", metavar="FILE", help="file to write (default: stdout)"
    )
    action("purge", "delete every queued message").add_argument(
        "--yes", "-y", action="store_true", help="do not ask"
    )


def run(args: argparse.Namespace) -> int:
    from edge_agent.app.cli.configfile import load_config

    cfg = load_config(args.config)
    path = Path(cfg.queue.path)
    action: str = args.queue_action
    if action == "stats":
        return _stats(path, args.json)
    if action in ("peek", "export"):
        return _dump(path, args.n if action == "peek" else None, getattr(args, "output", None))
    if action == "drain":
        return _drain(cfg, args.timeout)
    return _purge(cfg, args.yes)


def _stats(path: Path, as_json: bool) -> int:
    from edge_agent.adapters.outbox.views import read_stats

    stats = read_stats(path)
    if as_json:
        sys.stdout.write(json.dumps(stats) + "\n")
    else:
        sys.stdout.write("".join(f"{k}: {_shown(v)}\n" for k, v in stats.items()))
    return 0


def _shown(value: object) -> str:
    """A figure as a person reads it: no Python spellings (``None``, ``False``)."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def _dump(path: Path, limit: Optional[int], output: Optional[str]) -> int:
    from edge_agent.adapters.outbox.views import iter_messages

    def write(out: IO[str]) -> int:
        n = 0
        for msg in iter_messages(path, limit):
            out.write(json.dumps(msg, ensure_ascii=False, separators=(",", ":")) + "\n")
            n += 1
        return n

    if not output:
        write(sys.stdout)
        return 0
    n = _write_whole(Path(output), write)
    sys.stderr.write(f"exported {n} messages to {output}\n")
    return 0


def _write_whole(target: Path, write: Callable[[IO[str]], int]) -> int:
    """``write`` through the durable-write helper: the output is complete or absent, never
    half-written (a damaged queue or a full disk stops it half-way). Mode 0600: the export holds
    every payload."""
    from edge_agent.adapters.host.durable import durable_file
    from edge_agent.errors import QueueError

    if not target.parent.is_dir():
        raise QueueError(f"-o {target}: cannot write there: no such directory {target.parent}")
    try:
        with durable_file(target, EXPORT_MODE) as raw:
            out = io.TextIOWrapper(raw, encoding="utf-8")
            n = write(out)
            out.flush()
            out.detach()  # the helper fsyncs and closes the binary file
    except OSError as exc:
        raise QueueError(f"-o {target}: cannot write the export: {exc.strerror}; nothing written") from None
    return n


def _drain(cfg: Config, timeout: float) -> int:
    from edge_agent.adapters.mqtt.sync import MqttSync
    from edge_agent.adapters.outbox.outbox import Outbox
    from edge_agent.errors import SyncError

    if not cfg.mqtt.enabled:
        raise SyncError("mqtt.enabled = false: nothing to drain to")
    outbox = Outbox.from_config(cfg.queue)
    try:
        before = outbox.stats()["pending"]
        sync = MqttSync(cfg.mqtt, cfg.device.id, outbox, status_fn=lambda: _drain_status(cfg, outbox, sync))
        sync.start()
        try:
            done = sync.drain(timeout)
        finally:
            sync.stop()
        final = outbox.stats()
        left, sent = final["pending"], final["sent"]
    finally:
        outbox.close()
    if done:
        where = f"{cfg.mqtt.host}:{cfg.mqtt.port}"
        sys.stderr.write(f"drained {before - left} messages to {where}; queue empty\n")
        return 0
    reason = f" (last error: {sync.last_error})" if sync.last_error else ""
    # confirm = "collector": the broker took them, the collector has not confirmed them (yet)
    waiting = f", {sent} of them sent and awaiting the collector's confirmation" if sent else ""
    sys.stderr.write(
        f"edge-agent queue drain: timed out after {timeout:g}s with {left} messages still "
        f"queued{waiting}{reason}; nothing was lost\n"
    )
    return 1


def _drain_status(cfg: Config, outbox: Outbox, sync: MqttSync) -> dict[str, Any]:
    """The status snapshot of a drain: same shape as the agent's, no camera, state "draining"."""
    import os
    import time

    from edge_agent import __version__
    from edge_agent.core.messages.status import build_status

    now = time.time()
    return build_status(
        device_id=cfg.device.id,
        version=__version__,
        state="draining",
        ts=now,
        started_at=now,
        uptime_s=0.0,
        ready_s=None,
        pid=os.getpid(),
        counters={},
        fps=0.0,
        latency_ms={},
        queue=outbox.stats(),
        broker=sync.stats(),
        camera=None,
        sensor=None,
        provider=None,
        models=None,
        clock_synced=None,
    )


def _purge(cfg: Config, yes: bool) -> int:
    from edge_agent.adapters.outbox.outbox import Outbox

    outbox = Outbox.from_config(cfg.queue)
    try:
        n = outbox.stats()["pending"]
        if not yes:
            if not sys.stdin.isatty():
                sys.stderr.write(
                    f"edge-agent queue purge: refusing to delete {n} messages without --yes "
                    "(no terminal to ask on)\n"
                )
                return 1
            answer = input(f"Delete {n} queued messages from {cfg.queue.path}? [y/N] ")
            if answer.strip().lower() not in ("y", "yes"):
                sys.stderr.write("nothing deleted\n")
                return 1
        purged = outbox.purge()
    finally:
        outbox.close()
    sys.stderr.write(f"purged {purged} messages from {cfg.queue.path}\n")
    return 0
