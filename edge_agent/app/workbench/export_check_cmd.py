"""``edge-agent export-check``: export a PyTorch model to ONNX and check it (needs the [torch] extra).

Checks eval mode, opset >= 13, a dynamic batch axis, ``onnx.checker`` and ONNX-vs-PyTorch outputs
(<= 1e-4 relative), then times PyTorch, ORT FP32 and ORT INT8 side by side: static QDQ for image
inputs, dynamic (no calibration) for token ids and sensor windows, or as --int8 says.
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
    p.add_argument(
        "--input-shape",
        default="1,3,224,224",
        help="example input: N,C,H,W for images (default 1,3,224,224), N,T for token ids, N,C,T for sensor windows",
    )
    p.add_argument(
        "--input-dtype",
        choices=("float32", "int64"),
        default="float32",
        help="int64: token ids (random in 0..--vocab-1; the sequence axis is exported dynamic)",
    )
    p.add_argument("--vocab", type=positive_int, default=100, help="token id range for --input-dtype int64")
    p.add_argument(
        "--int8",
        choices=("static", "dynamic", "both"),
        help="INT8 copy to time: static QDQ (images only; the default for them), dynamic "
        "(MatMulInteger/ConvInteger, no calibration; the default for any other input), or both "
        "(images: the two side by side)",
    )
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
    if not 2 <= len(dims) <= 5 or min(dims) < 1:
        raise EdgeAgentError(
            f"--input-shape {args.input_shape!r}: expected 2 to 5 positive numbers (N,C,H,W; N,T; N,C,T)"
        )
    shape = tuple(dims)
    try:
        kwargs = json.loads(args.kwargs)
    except ValueError:
        raise EdgeAgentError(f"--kwargs {args.kwargs!r}: not JSON") from None
    if not isinstance(kwargs, dict):
        raise EdgeAgentError(f"--kwargs {args.kwargs!r}: expected a JSON object")
    if not args.module and (len(shape) != 4 or shape[1] != 3):
        raise EdgeAgentError(
            f"--input-shape {args.input_shape!r}: the built-in network takes images N,3,H,W; "
            "pass --module for a model of another input"
        )
    net = load_factory(args.module, kwargs) if args.module else small_convnet()
    set_export_mode(net)
    try:
        report = run_export_check(
            net,
            shape,
            Path(args.output),
            args.opset,
            args.runs,
            args.threads,
            not args.no_int8,
            dtype=args.input_dtype,
            int8_mode=args.int8,
            vocab=args.vocab,
        )
    except RuntimeError as exc:  # torch's own: the module does not take this input (shape, dtype)
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise EdgeAgentError(
            f"the model did not run on an input of shape {list(shape)} {args.input_dtype}: {first}"
        ) from None
    sys.stdout.write(report.format() + "\n")
    return 0 if report.passed else 1
