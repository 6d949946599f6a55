"""The ``edge-agent`` command line: a thin dispatcher over one module per subcommand.

Each command module exposes ``register(subparsers)`` which adds its parser and sets
``func(args) -> int``. Heavy imports (onnxruntime, cv2) happen inside the command, so
``edge-agent --version`` stays instant on a Pi.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Sequence
from typing import Optional, Union

from edge_agent import __version__
from edge_agent.errors import EdgeAgentError

COMMAND_MODULES: tuple[str, ...] = (
    "edge_agent.app.workbench.infer_cmd",
    "edge_agent.app.workbench.inspect_cmd",
    "edge_agent.app.cli.run_cmd",
    "edge_agent.app.cli.status_cmd",
    "edge_agent.app.cli.doctor_cmd",
    "edge_agent.app.cli.config_cmd",
    "edge_agent.app.cli.queue_cmd",
    "edge_agent.app.workbench.quantize_cmd",
    "edge_agent.app.workbench.validate_cmd",
    "edge_agent.app.workbench.bench_cmd",
    "edge_agent.app.workbench.export_check_cmd",
    "edge_agent.app.updates.model_cmd",
    "edge_agent.app.collector.collect_cmd",
    "edge_agent.app.collector.fleet_cmd",
    "edge_agent.app.workbench.track_cmd",
)

log = logging.getLogger("edge_agent")


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Defaults shown after each option's help; module docstrings shown without reST markup.

    Descriptions come from the command modules' docstrings, which use ``literal`` markup for the
    code reader; on a terminal that is noise, so it is rendered as 'literal'.
    """

    def _get_help_string(self, action: argparse.Action) -> Optional[str]:
        text = action.help or ""
        shown = action.default not in (None, False, argparse.SUPPRESS, [])
        if shown and "default" not in text.lower() and (action.option_strings or action.nargs in ("?", "*")):
            text += " (default: %(default)s)"
        return _plain(text)

    def _format_text(self, text: str) -> str:
        return super()._format_text(_plain(text))


def _plain(text: str) -> str:
    return text.replace("``", "'")


def _add_global_flags(parser: argparse.ArgumentParser, top: bool) -> None:
    """-v/-q on the top parser and again on every subcommand, so ``edge-agent infer x.jpg -q`` works.

    On the subcommands the defaults are SUPPRESS: a flag not given there leaves the top-level
    value alone instead of resetting it.
    """
    default_v: Union[int, str] = 0 if top else argparse.SUPPRESS
    default_q: Union[bool, str] = False if top else argparse.SUPPRESS
    parser.add_argument(
        "-v", "--verbose", action="count", default=default_v, help="more logging (-vv: debug)"
    )
    parser.add_argument(
        "-q", "--quiet", action="store_true", default=default_q, help="only warnings and errors"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="edge-agent",
        description="Offline ONNX inference agent for ARM boards with a durable MQTT outbox.",
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"edge-agent {__version__}")
    _add_global_flags(parser, top=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    for subparser in _all_subparsers(parser):
        subparser.formatter_class = HelpFormatter
        _add_global_flags(subparser, top=False)
    _describe_from_help(parser)
    return parser


def _describe_from_help(parser: argparse.ArgumentParser) -> None:
    """A subcommand's ``--help`` page without a description of its own shows its one-line help
    (the line its parent's list shows), so no page is only a usage line."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            for name, child in action.choices.items():
                if not (child.description or "").strip() and helps.get(name):
                    text = str(helps[name])
                    child.description = text[0].upper() + text[1:] + ("" if text.endswith(".") else ".")
                _describe_from_help(child)


def _all_subparsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """Every parser below ``parser`` (``queue stats`` included), depth first."""
    found: list[argparse.ArgumentParser] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):  # aliases map to the same parser
                found.append(child)
                found.extend(_all_subparsers(child))
    return found


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Ctrl-C at any point, the command modules' imports included: exit 130 with one line."""
    try:
        return _main(argv)
    except KeyboardInterrupt:
        return interrupted(argv)
    except ImportError as exc:
        # Ctrl-C inside a compiled module's init (onnxruntime's pybind11 state) comes out as
        # "ImportError: initialization failed" caused by the KeyboardInterrupt (seen in CI)
        if _caused_by_interrupt(exc):
            return interrupted(argv)
        raise


def _caused_by_interrupt(exc: BaseException) -> bool:
    seen: set[int] = set()
    cur: Optional[BaseException] = exc
    while cur is not None and id(cur) not in seen:
        if isinstance(cur, KeyboardInterrupt):
            return True
        seen.add(id(cur))
        cur = cur.__cause__ or cur.__context__
    return False


def interrupted(argv: Optional[Sequence[str]]) -> int:
    """What a shell shows for Ctrl-C: one line and 128 + SIGINT, never a traceback."""
    words = [a for a in (sys.argv[1:] if argv is None else argv) if not a.startswith("-")]
    try:
        sys.stderr.write(f"edge-agent{' ' + words[0] if words else ''}: interrupted\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    return 130


def _main(argv: Optional[Sequence[str]]) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    from edge_agent.app.cli.logsetup import setup_logging

    setup_logging(args.verbose, args.quiet)
    try:
        rc: int = args.func(args)
        sys.stdout.flush()
    except EdgeAgentError as exc:
        sys.stderr.write(f"edge-agent {args.command}: error: {exc}\n")
        return 1
    except BrokenPipeError:
        # `edge-agent infer dir/ --json | head`: the reader left; that is not an error of ours.
        # Point stdout at /dev/null so the interpreter's final flush does not raise again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, what a shell reports for a writer killed by the signal
    except OSError as exc:
        # the last line of defence, not the usual path: each command names its own files and fields
        # (EdgeAgentError above); what one missed (a disk that fills between two steps, a folder
        # made read-only meanwhile) is still one line, not a traceback
        where = f"{exc.filename}: " if exc.filename else ""
        sys.stderr.write(f"edge-agent {args.command}: error: {where}{exc.strerror or exc}\n")
        return 1
    return rc
