"""``edge-agent model convert IN.onnx --target-ort 1.11 -o OUT.onnx``: a model an older onnxruntime loads.

A Jetson Nano (JetPack 4.6) runs onnxruntime 1.11, which reads IR <= 8, opset <= 16: today's
exports (IR 9-10, opset 17-21) are refused there. This lowers the opset/IR where the operators
allow it and refuses in one line naming the operator when they do not; the result is then compared
with the input by ``validate`` (on --images, default the bundled sample frames) and written to -o
only when it passes (or with --no-validate). Needs ``[models]``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from edge_agent.adapters.host.durable import durable_file
from edge_agent.app.cli.argtypes import non_negative_int
from edge_agent.errors import EdgeAgentError, ModelError

if TYPE_CHECKING:
    from edge_agent.app.cli.configfile import Subparsers

MODEL_MODE = 0o644  # a model file to copy to the devices: nothing secret in it


def register_under(msub: Subparsers) -> None:
    """Adds ``convert`` to the ``model`` command's subparsers (called by app.model_cmd)."""
    p = msub.add_parser(
        "convert", help="down-convert a model for an older onnxruntime (opset/IR)", description=__doc__
    )
    p.add_argument("model", help="ONNX model to convert")
    p.add_argument("--target-ort", required=True, metavar="VERSION", help="onnxruntime version, e.g. 1.11")
    p.add_argument("-o", "--output", required=True, help="ONNX file to write")
    p.add_argument("--images", help="images to compare input and output on (default: bundled samples)")
    p.add_argument(
        "--max-images", type=non_negative_int, default=8, metavar="N", help="at most N images (0 = all)"
    )
    p.add_argument("--no-validate", action="store_true", help="skip the comparison with the input")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from edge_agent.core.runtime.onnx_wire import WireError, summarize
    from edge_agent.core.runtime.ort_compat import describe_stamps, oldest_runtime
    from edge_agent.tools import require_onnx
    from edge_agent.tools.convert import convert_model

    onnx = require_onnx()
    src, dst = Path(args.model), Path(args.output)
    try:
        data = src.read_bytes()
        before = summarize(data)
    except OSError as exc:
        raise ModelError(f"{src}: cannot read model: {exc.strerror or exc}") from None
    except WireError as exc:
        raise ModelError(f"{src}: not an ONNX model or truncated ({exc})") from None
    model = onnx.load_from_string(data)
    out = convert_model(model, args.target_ort, log=lambda m: sys.stderr.write(f"{src.name}: {m}\n"))
    if dst.resolve() == src.resolve():
        raise EdgeAgentError(f"{dst}: refusing to overwrite the input; choose another -o")
    dst.parent.mkdir(parents=True, exist_ok=True)
    data = out.SerializeToString()  # what onnx.save writes (it wants a named file)
    # validated from a private folder beside -o, written to -o only when it passes: a model that
    # fails (or cannot be judged) never lies where the next command would pick it up
    try:
        work = tempfile.TemporaryDirectory(prefix=f".{dst.name}.", dir=dst.parent)
    except OSError as exc:
        raise EdgeAgentError(f"{dst}: cannot write there: {exc.strerror or exc}") from None
    with work as tmp:
        trial = Path(tmp) / dst.name
        try:
            trial.write_bytes(data)
        except OSError as exc:  # a full disk: said here, not as a traceback from the comparison
            raise EdgeAgentError(f"{dst}: cannot write there: {exc.strerror or exc}") from None
        after = summarize(data)
        oldest = oldest_runtime(after.ir_version, after.opsets)
        sys.stdout.write(
            f"{dst}: {describe_stamps(before.ir_version, before.opsets)} -> "
            f"{describe_stamps(after.ir_version, after.opsets)}; loads on onnxruntime >= "
            f"{oldest.name if oldest else '?'}\n"
        )
        rc = 0 if args.no_validate else _validate(src, trial, dst, args)
        if rc == 0:
            with durable_file(dst, MODEL_MODE) as f:  # complete or absent: a failed save leaves no half model
                f.write(data)
    return rc


def _validate(src: Path, trial: Path, dst: Path, args: argparse.Namespace) -> int:
    from edge_agent.app.cli.assets import demo_samples
    from edge_agent.tools.quantize import image_files, pick_samples
    from edge_agent.tools.validate import validate_models

    root = Path(args.images) if args.images else demo_samples()
    files = pick_samples(image_files(root), args.max_images)
    report = validate_models(src, trial, files, root, show_progress=False)
    sys.stdout.write(report.format_table() + "\n")
    if report.passed:
        return 0
    if not report.no_verdict:
        sys.stderr.write(
            f"edge-agent model convert: {dst} not written: the converted model does not find what {src} "
            "finds (the table above)\n"
        )
        return 1
    sys.stderr.write(
        f"edge-agent model convert: {dst} not written: {_why_no_verdict(src, root, len(files))}\n"
    )
    return 2


def _why_no_verdict(src: Path, root: Path, n: int) -> str:
    """The input found nothing to compare on: because it cannot score at all (the guard says why),
    or because the images show nothing it detects."""
    from edge_agent.adapters.runtime.onnx_model import OnnxModel
    from edge_agent.inference.guard import check_detector, describe
    from edge_agent.inference.pipeline import Detector

    problems = check_detector(Detector(OnnxModel(src, warmup=False)))
    if problems:
        return f"the input cannot be checked against: {describe(src, problems)}"
    return (
        f"{src} finds no object in the {n} image(s) of {root}, so the conversion could not be checked; "
        "pass --images with photos of what it detects (or --no-validate to write it unchecked)"
    )
