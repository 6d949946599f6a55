"""``edge-agent bench``: latency, throughput, load time and memory of models side by side."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from edge_agent.app.cli.argtypes import non_negative_int, positive_int
from edge_agent.app.workbench.infer_cmd import add_model_args

if TYPE_CHECKING:
    from edge_agent.app.cli.configfile import Subparsers


def register(sub: Subparsers) -> None:
    p = sub.add_parser("bench", help="benchmark models side by side (e.g. FP32 vs INT8)", description=__doc__)
    p.add_argument("models", nargs="+", help="ONNX models; ratios are against the first one")
    p.add_argument("--image", help="input image (default: a bundled demo sample, else a synthetic one)")
    p.add_argument("--runs", type=positive_int, default=50, help="timed runs per model (default 50)")
    p.add_argument("--warmup", type=non_negative_int, default=5, help="untimed runs first (default 5)")
    p.add_argument(
        "--seq-len",
        type=positive_int,
        default=128,
        help="length of dynamic axes for models without an image input (token ids, sensor windows; default 128)",
    )
    p.add_argument("--no-memory", action="store_true", help="skip the per-model RSS subprocess probe")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument(
        "--sensor",
        metavar="FILE",
        help="sensor models: time them on the windows of this .csv/.jsonl recording",
    )
    add_model_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from edge_agent.adapters.camera.images import read_image
    from edge_agent.errors import EdgeAgentError
    from edge_agent.tools.bench import bench_models, default_image, format_table, report_json

    if args.runs < 1 or args.warmup < 0:
        raise EdgeAgentError(f"--runs must be >= 1 and --warmup >= 0 (got {args.runs}, {args.warmup})")
    if getattr(args, "sensor", None):
        from edge_agent.app.workbench.bench_sensor import bench_sensor

        return bench_sensor(args)
    if args.image:
        image, label = read_image(args.image), args.image
    else:
        from edge_agent.app.cli.assets import demo_samples
        from edge_agent.errors import ModelError

        try:
            samples: Optional[Path] = demo_samples()
        except ModelError:
            samples = None
        image, label = default_image(samples)
    benches = bench_models(
        args.models,
        image,
        args.runs,
        args.warmup,
        args.threads,
        args.provider,
        not args.no_memory,
        seq_len=args.seq_len,
    )
    meta = {
        "image": f"{label} ({image.shape[1]}x{image.shape[0]})",
        "runs": args.runs,
        "warmup": args.warmup,
        "threads": args.threads,
        "provider": args.provider,
        "seq_len": args.seq_len,
    }
    report = report_json(benches, meta)
    text = json.dumps(report, indent=2) if args.json else format_table(report) + noisy_note(report)
    sys.stdout.write(text + "\n")
    return 0


def noisy_note(report: dict[str, Any]) -> str:
    """A row whose end-to-end median is below its session.run median cannot be read as it stands
    (the end-to-end time includes the run): the two medians come from different runs of a noisy
    machine. Said under the table, naming the rows."""
    odd = [
        Path(r["path"]).name
        for r in report["models"]
        if r["pipeline_ms"]["total"]["p50"] < r["session_run_ms"]["p50"]
    ]
    if not odd:
        return ""
    return (
        f"\nnote: e2e p50 < run p50 for {', '.join(odd)}: the medians come from different runs and the "
        "machine was noisy (e2e includes the run); rerun with more --runs on a quieter machine"
    )
