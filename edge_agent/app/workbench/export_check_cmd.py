"""``edge-agent export-check``: export a PyTorch model to ONNX and check it (needs the [torch] extra).

Checks eval mode, opset >= 13, a dynamic batch axis, ``onnx.checker`` and ONNX-vs-PyTorch outputs
(<= 1e-4 relative), then times PyTorch, ORT FP32 and ORT static INT8 side by side.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from edge_agent.app.cli.argtypes import non_negative_int, positive_int, thread_count

if TYPE_CHECKING:
    from edge_agent.app.cli.configfile import Subparsers


def register(sub: Subparsers) -> None:
    p = sub.add_parser(
        "export-check", help="export a PyTorch model to ONNX and check it", description=__doc__
    )
    p.add_argument(
        "--module",
        help="MODULE:CALLABLE or FILE.py:CALLABLE returning an nn.Module (default: a built-in small conv net)",
    )
    p.add_argument(
        "--kwargs", default="{}", help="JSON keyword arguments for CALLABLE, e.g. '{\"imgsz\": 640}'"
    )
    p.add_argument("--input-shape", default="1,3,224,224", help="example input N,C,H,W (default 1,3,224,224)")
    p.add_argument(
        "--opset",
        type=positive_int,
        default=16,
        help="ONNX opset of the export; the file (and its INT8 copy) then loads on the oldest onnxruntime "
        "with that opset: 16 = 1.11 (Jetson Nano, JetPack 4.6), 19 = 1.16 (JetPack 5)",
    )
    p.add_argument("-o", "--output", default="export-check.onnx", help="where to write the ONNX file")
    p.add_argument("--runs", type=non_negative_int, default=30, help="timed runs per runtime (0 = no timing)")
    p.add_argument(
        "--threads", type=thread_count, default=2, help="threads for PyTorch and onnxruntime alike"
    )
    p.add_argument("--no-int8", action="store_true", help="skip the INT8 quantization and its timing")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from edge_agent.errors import EdgeAgentError
    from edge_agent.tools.export_check import load_factory, run_export_check, set_export_mode, small_convnet

    try:
        dims = [int(v) for v in args.input_shape.split(",")]
    except ValueError:
        raise EdgeAgentError(f"--input-shape {args.input_shape!r}: expected N,C,H,W integers") from None
    if len(dims) != 4:
        raise EdgeAgentError(f"--input-shape {args.input_shape!r}: expected 4 numbers N,C,H,W")
    shape = (dims[0], dims[1], dims[2], dims[3])
    try:
        kwargs = json.loads(args.kwargs)
    except ValueError:
        raise EdgeAgentError(f"--kwargs {args.kwargs!r}: not JSON") from None
    if not isinstance(kwargs, dict):
        raise EdgeAgentError(f"--kwargs {args.kwargs!r}: expected a JSON object")
    net = load_factory(args.module, kwargs) if args.module else small_convnet()
    set_export_mode(net)
    report = run_export_check(
        net,
        shape,
        Path(args.output),
        args.opset,
        args.runs,
        args.threads,
        not args.no_int8,
    )
    sys.stdout.write(report.format() + "\n")
    return 0 if report.passed else 1
