"""``edge-agent run`` (the service) and ``edge-agent demo`` (the same loop on bundled defaults)."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edge_agent.app.cli.argtypes import positive_int
from edge_agent.app.cli.configfile import add_config_arg
from edge_agent.errors import EdgeAgentError

if TYPE_CHECKING:
    from edge_agent.app.cli.configfile import Subparsers
    from edge_agent.core.config.schema import Config

log = logging.getLogger(__name__)


def register(sub: Subparsers) -> None:
    p = sub.add_parser(
        "run", help="run the inference loop (the systemd service runs this)", description=__doc__
    )
    add_config_arg(p)
    p.add_argument(
        "--max-frames", type=positive_int, metavar="N", help="process N frames, flush the queue and exit 0"
    )
    p.set_defaults(func=run)
    d = sub.add_parser(
        "demo",
        help="run the loop on the bundled demo models and sample images (no broker needed)",
        description="Replays the bundled sample images as a camera through the bundled INT8 detector and "
        "classifier into a local SQLite queue, prints each result, and ends with the queue stats.",
    )
    d.add_argument("--state-dir", default="edge-agent-demo", help="where the demo queue and status go")
    d.add_argument(
        "--frames", type=positive_int, metavar="N", help="stop after N frames (default: each sample once)"
    )
    d.add_argument("--loop", action="store_true", help="replay the samples forever (Ctrl-C to stop)")
    d.set_defaults(func=demo)


def run(args: argparse.Namespace) -> int:
    from edge_agent.app.agent.agent import Agent
    from edge_agent.app.cli.configfile import config_path, load_config
    from edge_agent.app.cli.state_check import check_state_folders
    from edge_agent.core.config.schema import require_detector

    path = config_path(args.config)
    cfg = load_config(path)
    require_detector(cfg, str(path))
    check_state_folders(cfg)
    agent = Agent(cfg, path, max_frames=args.max_frames)
    agent.install_signal_handlers()
    return agent.run()


def demo_config(state_dir: Path, loop: bool) -> Config:
    from edge_agent.app.cli.assets import (
        DEMO_CLASSIFIER,
        DEMO_CLASSIFIER_FP32,
        DEMO_DETECTOR,
        DEMO_DETECTOR_FP32,
        demo_file,
        demo_samples,
    )
    from edge_agent.core.config.schema import Config
    from edge_agent.errors import ModelError

    det = demo_file(DEMO_DETECTOR, DEMO_DETECTOR_FP32)
    data: dict[str, Any] = {
        "device": {"id": "demo", "state_dir": str(state_dir)},
        "camera": {"source": str(demo_samples()), "loop": loop},
        "detector": {"model": str(det), "conf_threshold": 0.4},
        "mqtt": {"enabled": False},
        "queue": {"path": str(state_dir / "outbox.db")},
        "output": {"mode": "every_frame"},
        "health": {"status_file": str(state_dir / "status.json")},
    }
    try:
        cls = demo_file(DEMO_CLASSIFIER, DEMO_CLASSIFIER_FP32)
    except ModelError:  # the classifier is optional in the demo
        cls = None
    if cls is not None:
        data["classifier"] = {"model": str(cls), "crop_padding": 0.15}
    return Config.model_validate(data)


def demo(args: argparse.Namespace) -> int:
    from edge_agent.adapters.outbox.views import read_stats
    from edge_agent.app.agent.agent import Agent

    state = Path(args.state_dir).resolve()
    if state.exists() and not state.is_dir():
        raise EdgeAgentError(
            f"--state-dir {args.state_dir}: is a file, expected a folder for the demo's queue"
        )
    try:
        state.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise EdgeAgentError(
            f"--state-dir {args.state_dir}: cannot create the folder: {exc.strerror or exc}"
        ) from None
    if not os.access(state, os.W_OK | os.X_OK):
        raise EdgeAgentError(
            f"--state-dir {args.state_dir}: not writable by this user; choose another folder"
        )
    cfg = demo_config(state, args.loop)
    out = sys.stdout

    def show(body: dict[str, Any]) -> None:
        dets = body["detections"]
        what = ", ".join(
            f"{d['label']}{'/' + d['classification']['label'] if 'classification' in d else ''} {d['confidence']:.2f}"
            for d in dets
        )
        t = body["timings_ms"]
        out.write(
            f"{Path(body['image']).name:<18} {len(dets):2d} found  {t.get('total', 0):6.1f} ms  {what}\n"
        )
        out.flush()

    agent = Agent(cfg, None, max_frames=args.frames, on_result=show)
    agent.install_signal_handlers()
    out.write(f"edge-agent demo: camera = {cfg.camera.source}\n  detector = {cfg.detector.model}\n")
    if cfg.classifier is not None:
        out.write(f"  classifier = {cfg.classifier.model}\n")
    out.write(f"  queue = {cfg.queue.path} (MQTT off: results wait there for a broker)\n\n")
    rc = agent.run()
    stats = read_stats(Path(cfg.queue.path))  # read-only: opening the outbox again counted a boot
    out.write(
        f"\n{agent.frames} frames, {agent.fps():.1f} fps, median latency {_latency(agent.latency_ms())}\n"
    )
    out.write("queue stats: " + json.dumps(stats) + "\n")
    return rc


STAGES = ("pre", "infer", "classify", "post")


def _latency(ms: Mapping[str, float]) -> str:
    """``12.3 ms (pre 2.1, infer 9.9, post 0.4)``: the median total and its stages, never a dict."""
    if "total" not in ms:
        return "-"
    parts = ", ".join(f"{k} {ms[k]:g}" for k in STAGES if k in ms)
    return f"{ms['total']:g} ms" + (f" ({parts})" if parts else "")
