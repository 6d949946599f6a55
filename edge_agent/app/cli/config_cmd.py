"""``edge-agent config example|check``: the commented config generated from the schema, and validation of one."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from edge_agent.app.cli.configfile import add_config_arg
from edge_agent.core.camera.source_spec import redact_source
from edge_agent.core.config.example import example_config
from edge_agent.errors import ConfigError

if TYPE_CHECKING:
    from edge_agent.app.cli.configfile import Subparsers


def register(sub: Subparsers) -> None:
    p = sub.add_parser("config", help="print an example config or check one", description=__doc__)
    s = p.add_subparsers(dest="config_command", metavar="ACTION", required=True)
    s.add_parser("example", help="print a commented example config").set_defaults(func=example)
    c = s.add_parser("check", help="validate a config file (unknown keys and bad values are errors)")
    c.add_argument(
        "file",
        nargs="?",
        help="config TOML, - for standard input (default: --config, $EDGE_AGENT_CONFIG, else "
        "/etc/edge-agent/config.toml)",
    )
    add_config_arg(c)
    c.set_defaults(func=check)


def example(args: argparse.Namespace) -> int:
    sys.stdout.write(example_config())
    return 0


def check(args: argparse.Namespace) -> int:
    from edge_agent.app.cli.configfile import config_path, load_config
    from edge_agent.core.config.cameras import camera_views
    from edge_agent.core.config.scene import objects_classifier_warning, tracker_low_warning
    from edge_agent.core.config.schema import parse_config, require_detector
    from edge_agent.core.updates.package import update_warnings

    if args.file == "-":  # `edge-agent config example | edge-agent config check -`
        path = Path("<stdin>")
        try:
            text = sys.stdin.buffer.read().decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
        cfg = parse_config(text, str(path))
    else:
        path = config_path(args.file or args.config)
        cfg = load_config(path)
    require_detector(cfg, str(path))
    warnings = []
    for name, model in (
        ("detector.model", cfg.detector.model),
        ("classifier.model", cfg.classifier.model if cfg.classifier else ""),
    ):
        if model and not Path(model).is_file():
            warnings.append(f"{path}: {name} = {model!r}: file not found (yet)")
    warnings += [f"{path}: {w}" for w in update_warnings(cfg)]
    views = camera_views(cfg)
    modes = sorted({v.cfg.output.mode for v in views})  # a camera may have its own mode
    for mode in modes:
        low = tracker_low_warning(mode, cfg.detector.conf_threshold, cfg.tracker.low, cfg.tracker.high)
        unused = objects_classifier_warning(mode, cfg.classifier is not None)
        warnings += [f"{path}: {w}" for w in (low, unused) if w is not None]
    for w in warnings:
        sys.stderr.write(f"warning: {w}\n")

    def shown(src: object) -> str:  # the URL's password stays out of the terminal (and bug reports)
        return repr(redact_source(src)) if isinstance(src, str) else repr(src)

    if cfg.cameras:
        camera = f"{len(views)} cameras: " + ", ".join(f"{v.id}={shown(v.cfg.camera.source)}" for v in views)
    else:
        camera = f"camera {shown(cfg.camera.source)}"
    sys.stdout.write(
        f"{path}: OK (device {cfg.device.id}, {camera}, mqtt "
        f"{cfg.mqtt.host}:{cfg.mqtt.port if cfg.mqtt.enabled else 'disabled'})\n"
    )
    return 0
