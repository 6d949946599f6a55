"""``edge-agent validate``: refuse a candidate model (e.g. INT8) that loses the reference's accuracy."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from edge_agent.app.cli.argtypes import non_negative_int, unit_interval
from edge_agent.app.workbench.infer_cmd import add_model_args

if TYPE_CHECKING:
    from edge_agent.app.cli.configfile import Subparsers
    from edge_agent.core.vision.thresholds import Thresholds


def add_threshold_args(p: argparse.ArgumentParser) -> None:
    from edge_agent.core.vision.thresholds import Thresholds

    d = Thresholds()
    g = p.add_argument_group("pass/fail thresholds")
    g.add_argument(
        "--min-recall",
        type=unit_interval,
        default=d.min_recall,
        help="detector: recall of reference detections",
    )
    g.add_argument(
        "--min-mean-iou", type=unit_interval, default=d.min_mean_iou, help="detector: mean IoU of matches"
    )
    g.add_argument(
        "--max-conf-delta", type=unit_interval, default=d.max_conf_delta, help="detector: mean |delta conf|"
    )
    g.add_argument(
        "--max-map-drop", type=unit_interval, default=d.max_map_drop, help="detector: mAP50 / mAP50-95 drop"
    )
    g.add_argument(
        "--min-top1-agreement", type=unit_interval, default=d.min_top1_agreement, help="classifier"
    )
    g.add_argument(
        "--max-top1-drop", type=unit_interval, default=d.max_top1_drop, help="classifier: accuracy drop"
    )


def thresholds_from(args: argparse.Namespace) -> Thresholds:
    from edge_agent.core.vision.thresholds import Thresholds

    return Thresholds(
        min_recall=args.min_recall,
        min_mean_iou=args.min_mean_iou,
        max_conf_delta=args.max_conf_delta,
        max_map_drop=args.max_map_drop,
        min_top1_agreement=args.min_top1_agreement,
        max_top1_drop=args.max_top1_drop,
    )


def warn_host_int8(candidate: Path, command: str) -> None:
    """Say so when this host's CPU measures an INT8 candidate worse than the board will run it."""
    from edge_agent.adapters.runtime.board import int8_saturates
    from edge_agent.core.runtime.onnx_wire import WireError, summarize

    if not int8_saturates():
        return
    try:
        kind = summarize(candidate.read_bytes()).quant_kind
    except (OSError, WireError):
        return  # the validation itself names the unreadable file
    if kind in ("fp32", "fp16"):
        return
    sys.stderr.write(
        f"edge-agent {command}: warning: this CPU (x86-64 without VNNI) adds INT8 products in saturating "
        "16-bit pairs, so the INT8 accuracy measured here can be lower than on an ARM board or a VNNI CPU; "
        "if only this host fails, try `quantize --reduce-range` or validate on the board\n"
    )


def register(sub: Subparsers) -> None:
    p = sub.add_parser(
        "validate",
        help="compare a candidate model with its reference",
        description=__doc__ + " Any two models of one task: input sizes, output layouts and class lists "
        "may differ (detections are compared, classes matched by name). Exit 0 PASS, 1 FAIL, 2 no verdict.",
    )
    p.add_argument("reference", help="reference model (usually FP32)")
    p.add_argument("candidate", help="candidate model (usually INT8)")
    p.add_argument("--images", help="image folder (classifiers: one subfolder per class name)")
    p.add_argument(
        "--sensor",
        metavar="FILE",
        help="sensor models: a .csv/.jsonl recording instead of images (a 'label' column adds accuracy)",
    )
    p.add_argument("--labels", help="detectors: folder of YOLO labels <stem>.txt (adds mAP50 / mAP50-95)")
    p.add_argument(
        "--max-images",
        type=non_negative_int,
        default=0,
        metavar="N",
        help="use at most N images (spread evenly; 0 = all)",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    add_threshold_args(p)
    add_model_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from edge_agent.errors import EdgeAgentError
    from edge_agent.tools.quantize import image_files, pick_samples
    from edge_agent.tools.validate import validate_models

    if bool(args.images) == bool(args.sensor):
        raise EdgeAgentError(
            "give --images DIR (detectors, classifiers) or --sensor FILE (sensor models), not both"
        )
    if args.sensor:
        from edge_agent.app.workbench.validate_sensor import validate_sensor

        return validate_sensor(args)

    root = Path(args.images)
    warn_host_int8(Path(args.candidate), "validate")
    files = pick_samples(image_files(root), args.max_images)
    report = validate_models(
        Path(args.reference),
        Path(args.candidate),
        files,
        root,
        Path(args.labels) if args.labels else None,
        thresholds_from(args),
        args.provider,
        args.threads,
    )
    if args.json:
        sys.stdout.write(json.dumps(report.to_json(), indent=2) + "\n")
    else:
        sys.stdout.write(report.format_table() + "\n")
    # 2: the data could not support a verdict (e.g. the reference detects nothing on these images)
    return 0 if report.passed else 2 if report.no_verdict else 1
