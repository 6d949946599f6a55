"""``edge-agent quantize``: static INT8 (QDQ) that keeps accuracy, then validated against the input.

The result is checked with ``validate`` on the calibration (or ``--val``) images; when it fails,
the file is renamed ``*.FAILED-VALIDATION.onnx`` so nobody ships it by accident, and the exit
code is 1.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from edge_agent.adapters.host.durable import move_durable
from edge_agent.app.cli.argtypes import non_negative_int
from edge_agent.app.workbench.infer_cmd import add_model_args
from edge_agent.app.workbench.validate_cmd import add_threshold_args, thresholds_from, warn_host_int8

if TYPE_CHECKING:
    from edge_agent.app.cli.configfile import Subparsers
    from edge_agent.tools.quantize import QuantizeResult

log = logging.getLogger(__name__)


def register(sub: Subparsers) -> None:
    p = sub.add_parser("quantize", help="static INT8 quantization with validation", description=__doc__)
    p.add_argument(
        "model",
        help="ONNX model (detector or classifier): FP32, FP16, or dynamic/QOperator/QDQ INT8 (dequantized first)",
    )
    p.add_argument(
        "--calib",
        help="folder of calibration images (representative, 50-300); required for image models "
        "(models without an image input, e.g. token ids, are quantized dynamically, with no calibration); "
        "a sensor model: a .csv/.jsonl recording",
    )
    p.add_argument("-o", "--output", help="output path (default: <model>.int8.onnx)")
    p.add_argument(
        "--samples",
        type=non_negative_int,
        default=128,
        help="calibration images to use (default 128; 0 = all)",
    )
    p.add_argument(
        "--method",
        choices=("minmax", "entropy", "percentile"),
        default="minmax",
        help="activation range calibration (default minmax)",
    )
    p.add_argument("--target", choices=("x86", "arm64"), default="x86", help="CPU the model will run on")
    p.add_argument(
        "--target-ort",
        metavar="VERSION",
        help="oldest onnxruntime that must load the result, e.g. 1.11 (Jetson Nano, JetPack 4.6) or 1.16 "
        "(JetPack 5): opset/IR lowered to what it reads (default: whatever the tools write)",
    )
    p.add_argument("--val", help="validation images (default: the calibration images)")
    p.add_argument("--val-labels", help="YOLO labels for --val images (adds mAP checks)")
    p.add_argument(
        "--val-max-images",
        type=non_negative_int,
        default=64,
        metavar="N",
        help="validate on at most N images (0 = all)",
    )
    p.add_argument(
        "--reduce-range", action="store_true", help="7-bit weights (x86 without VNNI, if accuracy drops)"
    )
    p.add_argument(
        "--naive",
        action="store_true",
        help="quantize everything, the post-processing tail too (demonstrates the failure; never ship)",
    )
    p.add_argument("--no-validate", action="store_true", help="skip the validation step (not recommended)")
    add_threshold_args(p)
    add_model_args(p)
    p.set_defaults(func=run)


def default_output(model: Path) -> Path:
    stem = model.name[: -len(".onnx")] if model.name.endswith(".onnx") else model.name
    for tag in ("-fp32", ".fp32", "-fp16", ".fp16"):  # no str.removesuffix: Python 3.8
        if stem.endswith(tag):
            stem = stem[: -len(tag)]
    return model.with_name(f"{stem}.int8.onnx")


def failed_name(out: Path) -> Path:
    stem = out.name[: -len(".onnx")] if out.name.endswith(".onnx") else out.name
    return out.with_name(f"{stem}.FAILED-VALIDATION.onnx")


def run(args: argparse.Namespace) -> int:
    from edge_agent.errors import QuantizeError
    from edge_agent.tools.quantize import image_files, pick_samples, quantize_model

    src = Path(args.model)
    if not src.is_file():
        raise QuantizeError(f"{src}: model file not found")
    out = Path(args.output) if args.output else default_output(src)
    if out.resolve() == src.resolve():
        raise QuantizeError(f"{out}: output would overwrite the input model")
    from edge_agent.app.workbench.quantize_sensor import is_recording, quantize_sensor

    if args.calib and is_recording(args.calib):  # a sensor model calibrated on recorded windows
        return quantize_sensor(args, src, out)
    if _quantize_dynamically(src, out, args):
        return 0
    if not args.calib:
        raise QuantizeError(f"{src}: --calib FOLDER is required: static INT8 calibrates on images")
    calib = pick_samples(image_files(Path(args.calib)), args.samples)
    with tempfile.TemporaryDirectory(prefix="edge-agent-quantize-") as tmp:
        float_copy = Path(tmp) / f"{src.stem}.fp32.onnx"
        result = quantize_model(
            src,
            out,
            calib,
            args.method,
            args.target,
            args.naive,
            args.reduce_range,
            float_copy=float_copy,
            target_ort=args.target_ort,
        )
        reference = float_copy if float_copy.is_file() else src
        return _validate(args, src, out, result, reference)


MIN_CALIB = 8  # below this, quantize warns: the activation ranges come from too few images


def _quantize_dynamically(src: Path, out: Path, args: argparse.Namespace) -> bool:
    """A model without an image input (token ids, sensor windows): dynamic INT8, no calibration."""
    from edge_agent.adapters.runtime.onnx_model import OnnxModel
    from edge_agent.errors import QuantizeError
    from edge_agent.inference.task import input_kind
    from edge_agent.tools import require_onnx
    from edge_agent.tools.quantize_dynamic import quantize_dynamic_model

    require_onnx()  # both paths need it: the missing extra is named before the model is read
    model = OnnxModel(src, provider="cpu", warmup=False)
    if input_kind(model) == "image":
        return False
    inputs = ", ".join(f"{t.name} {t.type} {list(t.shape)}" for t in model.info.inputs)
    if args.target_ort or args.naive or args.val or args.val_labels:
        raise QuantizeError(
            f"{src}: inputs {inputs} are not an image: it is quantized dynamically, which takes "
            "none of --target-ort/--naive/--val/--val-labels"
        )
    if args.calib:
        sys.stderr.write(f"{src.name}: inputs {inputs} are not an image: --calib is not used\n")
    result = quantize_dynamic_model(src, out)
    sys.stderr.write(f"{src.name}: inputs {inputs}: " + result.line() + "\n")
    return True


def _validate(args: argparse.Namespace, src: Path, out: Path, result: QuantizeResult, reference: Path) -> int:
    from edge_agent.tools.quantize import image_files, pick_samples
    from edge_agent.tools.validate import validate_models

    s = result.settings
    if s.get("source_note"):
        sys.stderr.write(f"{src.name}: {s['source_note']}\n")
    sys.stderr.write(
        f"quantized {src.name} -> {out} ({s['activation_type']} activations, {s['weight_type']} weights, "
        f"{s['method']}, {result.samples} samples, {len(result.excluded_nodes)} post-processing nodes kept float)\n"
    )
    if 0 < result.samples < MIN_CALIB:
        sys.stderr.write(
            f"edge-agent quantize: warning: {result.samples} calibration image(s) in {args.calib}: INT8 "
            f"ranges from fewer than {MIN_CALIB} are unreliable; use 50-300 images like the camera's\n"
        )
    if args.no_validate:
        sys.stderr.write("validation skipped (--no-validate): run `edge-agent validate` before shipping\n")
        return 0
    val_root = Path(args.val) if args.val else Path(args.calib)
    if not args.val:
        sys.stderr.write(
            "edge-agent quantize: warning: validating on the calibration images themselves: the check is "
            "optimistic; pass --val DIR with other images\n"
        )
    val_files = pick_samples(image_files(val_root), args.val_max_images)
    warn_host_int8(out, "quantize")
    if reference != src:
        sys.stderr.write(f"validating against the FP32 copy of {src.name} (what was quantized)\n")
    report = validate_models(
        reference,
        out,
        val_files,
        val_root,
        Path(args.val_labels) if args.val_labels else None,
        thresholds_from(args),
        args.provider,
        args.threads,
    )
    sys.stdout.write(report.format_table() + "\n")
    if report.passed:
        return 0
    bad = failed_name(out)
    move_durable(out, bad)  # the good name must not survive a power cut on a failed model
    failed = ", ".join(c.name for c in report.checks if not c.passed)
    sys.stderr.write(
        f"edge-agent quantize: error: the INT8 model fails validation ({failed}); kept as {bad} for "
        "inspection - do not ship it"
        + (" (--naive quantizes the post-processing too)" if args.naive else "")
        + "\n"
    )
    log.debug("validation report: %s", json.dumps(report.to_json()))
    return 1
