"""The ``edge-agent`` command line: a thin dispatcher over one module per subcommand.

Each command module exposes ``register(subparsers)`` which adds its parser and sets
``func(args) -> int``. Heavy imports (onnxruntime, cv2) happen inside the command, so
``edge-agent --version`` stays instant on a Pi.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence
from typing import Optional

from edge_agent import __version__
from edge_agent.errors import EdgeAgentError

COMMAND_MODULES: tuple[str, ...] = (
    "edge_agent.app.infer_cmd",
    "edge_agent.app.inspect_cmd",
    "edge_agent.app.run_cmd",
    "edge_agent.app.status_cmd",
    "edge_agent.app.doctor_cmd",
    "edge_agent.app.config_cmd",
    "edge_agent.app.queue_cmd",
    "edge_agent.app.quantize_cmd",
    "edge_agent.app.validate_cmd",
    "edge_agent.app.bench_cmd",
    "edge_agent.app.export_check_cmd",
    "edge_agent.app.model_cmd",
)

log = logging.getLogger("edge_agent")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="edge-agent",
        description="Offline ONNX inference agent for ARM boards with a durable MQTT outbox.",
    )
    parser.add_argument("--version", action="version", version=f"edge-agent {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-vv: debug)")
    parser.add_argument("-q", "--quiet", action="store_true", help="only warnings and errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def setup_logging(verbose: int, quiet: bool) -> None:
    level = logging.WARNING if quiet else (logging.DEBUG if verbose >= 2 else logging.INFO)
    logging.basicConfig(
        level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    setup_logging(args.verbose, args.quiet)
    try:
        rc: int = args.func(args)
    except EdgeAgentError as exc:
        sys.stderr.write(f"edge-agent {args.command}: error: {exc}\n")
        return 1
    except KeyboardInterrupt:
        return 130
    return rc
