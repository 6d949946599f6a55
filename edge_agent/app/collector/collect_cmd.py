"""``edge-agent collect``: the far end. Subscribes to everything the fleet publishes and stores it
in a database (SQLite or PostgreSQL), acknowledging each message only after its commit.

Settings come from ``[collector]`` in ``--config FILE`` (optional); flags given override them.
PostgreSQL needs the ``[collector]`` extra (psycopg 3). docs/collector.md: deployment, guarantee,
scaling.

``--leave`` retires this collector from its shared-subscription group for good: it connects with
its client id and session, unsubscribes (the group stops dealing it a share), stores what the
broker had queued for it, and once nothing has come for ``--quiet-s`` seconds ends its session.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import ssl
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from edge_agent.errors import ConfigError

if TYPE_CHECKING:
    from types import FrameType

    from edge_agent.app.cli.configfile import Subparsers
    from edge_agent.core.config.collector import CollectorConfig

log = logging.getLogger("edge_agent.collector")
FLAGS = ("broker", "db", "db_password_file", "prefix", "client_id", "group", "metrics_port")


def register(sub: Subparsers) -> None:
    p = sub.add_parser(
        "collect", help="store every fleet message in a database (the far end)", description=__doc__
    )
    p.add_argument("--config", "-c", metavar="FILE", help="collector TOML with a [collector] table")
    p.add_argument("--broker", metavar="URL", help="mqtt://HOST:PORT or mqtts://HOST:PORT")
    p.add_argument("--db", metavar="URL", help="sqlite:///PATH (sqlite:////abs/path) or postgresql://...")
    p.add_argument(
        "--db-password-file",
        metavar="FILE",
        help="file holding the PostgreSQL password (relative: under $CREDENTIALS_DIRECTORY); never "
        "put it in --db, which every user sees in ps (libpq's PGPASSFILE works too)",
    )
    p.add_argument("--prefix", help="topic prefix the devices publish under")
    p.add_argument("--client-id", help="fixed MQTT client id: the broker keeps its session while we are down")
    p.add_argument("--group", help="shared subscription group ($share/GROUP/...) to split the load")
    p.add_argument("--metrics-port", type=int, help="Prometheus text on 127.0.0.1:PORT/metrics")
    p.add_argument(
        "--example-config",
        action="store_true",
        help="print a commented collector.toml with every key, its default and what it does, and exit",
    )
    p.add_argument(
        "--leave",
        action="store_true",
        help="retire this collector (its --client-id) from its --group: store what is queued for it, "
        "then end its session on the broker",
    )
    p.add_argument(
        "--quiet-s",
        type=_quiet,
        default=5.0,
        metavar="S",
        help="with --leave: the session counts as drained after S seconds without a message (default 5)",
    )
    p.set_defaults(func=run)


def _quiet(text: str) -> float:
    from edge_agent.app.cli.argtypes import _ranged

    return float(_ranged(float, 0.5, 3600.0, "a number of seconds from 0.5 to 3600")(text))


def settings(args: argparse.Namespace) -> CollectorConfig:
    """The CollectorConfig from ``--config`` and the flags given."""
    from edge_agent.core.config.collector import parse_collector_config

    overrides = {k: getattr(args, k) for k in FLAGS if getattr(args, k, None) is not None}
    if args.config:
        path = Path(args.config)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{path}: cannot read the collector config: {exc}") from None
        return parse_collector_config(text, str(path), overrides)
    return parse_collector_config("", "flags", overrides)


def read_db_password(cfg: CollectorConfig) -> Optional[str]:
    """The PostgreSQL password from ``db_password_file`` (relative: under systemd's
    $CREDENTIALS_DIRECTORY), else None (libpq then reads PGPASSFILE / ~/.pgpass itself)."""
    if not cfg.db_password_file:
        return None
    path = Path(cfg.db_password_file)
    creds = os.environ.get("CREDENTIALS_DIRECTORY")
    if not path.is_absolute() and creds:
        path = Path(creds) / path
    try:
        return path.read_text(encoding="utf-8").rstrip("\r\n") or None
    except (OSError, UnicodeDecodeError) as exc:
        why = getattr(exc, "strerror", None) or str(exc)
        raise ConfigError(f"db_password_file = {cfg.db_password_file!r}: cannot read it ({why})") from None


def run(args: argparse.Namespace) -> int:
    from edge_agent.adapters.host.metrics_http import MetricsServer
    from edge_agent.adapters.mqtt.connect import read_password, tls_context
    from edge_agent.app.collector.loop import Collector, mqtt_settings
    from edge_agent.core.config.collector import broker_address

    if getattr(args, "example_config", False):
        from edge_agent.core.config.example import collector_example

        sys.stdout.write(collector_example())
        return 0
    cfg = settings(args)
    leave = bool(getattr(args, "leave", False))
    if leave and not cfg.group:
        raise ConfigError(
            "--leave needs the collector's group (--group or group = in [collector]): a collector "
            "without one is the only subscriber, and ending its session would lose every later message"
        )
    mcfg = mqtt_settings(cfg)
    tls: Optional[ssl.SSLContext] = tls_context(mcfg)
    if tls is None and broker_address(cfg.broker)[2]:
        tls = ssl.create_default_context()
    collector = Collector(
        cfg, read_password(mcfg), tls, args.quiet_s if leave else None, read_db_password(cfg)
    )
    stop = threading.Event()

    def _stop(signum: int, frame: Optional[FrameType]) -> None:
        log.info("signal %s: stopping", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    server = None
    if cfg.metrics_port:
        sub = collector.sub

        def values() -> str:
            return collector.metrics.exposition(
                sub.inbox.qsize(), sub.connected.is_set(), {"collector": cfg.client_id}
            )

        try:
            server = MetricsServer(cfg.metrics_port, values)
        except OSError as exc:
            raise ConfigError(
                f"metrics_port = {cfg.metrics_port}: cannot listen on 127.0.0.1: {exc.strerror}"
            ) from None
        server.start()
    log.info("collector %s: %s -> %s", cfg.client_id, cfg.broker, collector.db.dialect)
    try:
        collector.run(stop)
    finally:
        if server is not None:
            server.stop()
    if leave:
        m = collector.metrics
        if not collector.left:
            raise ConfigError(
                f"collector {cfg.client_id}: stopped before it left group {cfg.group!r}: its session "
                "stays, and the broker keeps queueing its share (run --leave again)"
            )
        sys.stdout.write(
            f"collector {cfg.client_id} left group {cfg.group!r}: {m.messages} queued messages stored "
            f"({m.records} records, {m.duplicates} duplicates); its session on the broker is ended\n"
        )
    return 0
