"""``edge-agent inspect MODEL``: what is this model file (inputs, outputs, classes, quantization)?"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any, Optional

from edge_agent.app.workbench.infer_cmd import add_model_args

if TYPE_CHECKING:
    from edge_agent.adapters.runtime.onnx_model import OnnxModel
    from edge_agent.app.cli.configfile import Subparsers


def register(sub: Subparsers) -> None:
    p = sub.add_parser("inspect", help="describe an ONNX model file", description=__doc__)
    p.add_argument("model", help="ONNX model file")
    p.add_argument("--labels", help="labels file overriding the model's class names")
    p.add_argument(
        "--classifier-preprocess", metavar="SPEC", help="classifier preprocessing to show (as for infer)"
    )
    p.add_argument("--json", action="store_true", help="print the description as JSON")
    add_model_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from edge_agent.adapters.runtime.onnx_model import OnnxModel
    from edge_agent.errors import ModelError

    compat = runtime_compat(args.model)
    try:
        m = OnnxModel(args.model, provider=args.provider, threads=args.threads, labels=args.labels)
    except ModelError:
        if compat.get("loads_here") is False:  # still say what the model needs, then the one-line error
            sys.stdout.write(f"model        {args.model}\nonnx         {compat['stamps']}\n")
            sys.stdout.write(f"needs        onnxruntime >= {compat['min_onnxruntime'] or '?'}\n")
        raise
    usage = describe_usage(m, args.classifier_preprocess)
    info = {**m.info.to_json(), **usage, **compat}
    if args.json:
        sys.stdout.write(json.dumps(info, indent=2) + "\n")
        return 0
    w = sys.stdout.write
    w(f"model        {info['path']}\n")
    size = m.info.size_bytes
    shown_size = f"{size / 1e6:.2f} MB" if size >= 100_000 else f"{size / 1e3:.1f} kB"  # a sensor model: kB
    w(f"size         {shown_size}  sha256 {m.info.sha256[:16]}...\n")
    w(f"producer     {info['producer'] or '?'}  opsets {info['opsets']}\n")
    w(f"onnx         {compat['stamps']}: loads on onnxruntime >= {compat['min_onnxruntime'] or '?'}\n")
    w(f"task         {info['task'] or '?'}  imgsz {info['imgsz']}  stride {info['stride']}\n")
    w(f"quantization {info['quantization']}\n")
    for t in m.info.inputs:
        w(f"input        {t.name} {list(t.shape)} {t.type}\n")
    for t in m.info.outputs:
        w(f"output       {t.name} {list(t.shape)} {t.type}\n")
    names = m.info.names
    shown = ", ".join(f"{k}:{v}" for k, v in list(names.items())[:12])
    w(f"classes      {len(names)}  {shown}{' ...' if len(names) > 12 else ''}\n")
    top_ops = ", ".join(f"{k} x{v}" for k, v in m.info.graph.op_counts.most_common(8))
    w(f"operators    {sum(m.info.graph.op_counts.values())} nodes: {top_ops}\n")
    w(f"providers    {', '.join(m.info.providers)}  ({m.info.provider_reason})\n")
    w(f"load+warmup  {m.info.load_ms:.0f} ms\n")
    if usage.get("sensor"):
        w(f"sensor       {usage['sensor']}\n")
    if usage.get("format"):
        w(f"format       {usage['format']}\n")
    if usage.get("preprocess"):
        w(f"preprocess   {usage['preprocess']}\n")
    if usage.get("input_size"):
        w(f"input size   {usage['input_size']}\n")
    for warning in usage["warnings"]:
        sys.stderr.write(f"edge-agent inspect: warning: {warning}\n")
    return 0


def runtime_compat(path: str) -> dict[str, Any]:
    """IR version, opsets and the oldest onnxruntime that loads the model (core.ort_compat), read
    from the file's bytes: also shown when this machine's onnxruntime cannot load it."""
    import onnxruntime

    from edge_agent.core.runtime.onnx_wire import WireError, summarize
    from edge_agent.core.runtime.ort_compat import describe_stamps, limits_for, oldest_runtime, refusals

    try:
        with open(path, "rb") as f:
            g = summarize(f.read())
    except (OSError, WireError):
        return {"stamps": "?", "min_onnxruntime": None}  # OnnxModel names the problem in one line
    oldest = oldest_runtime(g.ir_version, g.opsets)
    here = limits_for(onnxruntime.__version__)
    return {
        "ir_version": g.ir_version,
        "stamps": describe_stamps(g.ir_version, g.opsets),
        "min_onnxruntime": oldest.name if oldest else None,
        "loads_here": here is None or not refusals(g.ir_version, g.opsets, here),
    }


def describe_usage(m: OnnxModel, preprocess_option: Optional[str] = None) -> dict[str, Any]:
    """How the agent would run this model: detector format + guard, or classifier preprocessing."""
    from edge_agent.core.vision.preprocess import rect_size
    from edge_agent.errors import ModelError
    from edge_agent.inference.guard import check_detector, describe
    from edge_agent.inference.pipeline import Detector
    from edge_agent.inference.preset_choice import choose_preprocess
    from edge_agent.inference.task import input_kind

    out: dict[str, Any] = {"warnings": []}
    shape = m.info.outputs[0].shape
    from edge_agent.inference.sensor_model import is_sensor_model, resolve_spec

    if is_sensor_model(m.info.metadata, m.info.inputs[0].shape):  # windows of readings, not images
        try:
            spec = resolve_spec(str(m.path), m.info.metadata, m.info.inputs[0].shape)
        except ModelError as exc:
            out["warnings"].append(str(exc))
            return out
        out["task_used"] = f"sensor {spec.task}"
        out["sensor"] = spec.describe()
        out["sensor_spec"] = {
            "task": spec.task,
            "channels": spec.channels,
            "window": spec.window,
            "hop": spec.hop,
            "rate_hz": spec.rate_hz,
            "layout": spec.layout,
            "labels": spec.labels,
        }
        return out
    if input_kind(m) == "tensor":
        inputs = ", ".join(f"{t.name} {t.type} {list(t.shape)}" for t in m.info.inputs)
        out["task_used"] = "tensor"
        out["input_size"] = (
            f"not an image ({inputs}): `bench` feeds generated inputs (--seq-len for dynamic axes), "
            "`quantize` makes a dynamic INT8 copy; the vision pipeline (run, infer) does not take it"
        )
        return out
    if m.info.task == "classify" or (m.info.task is None and len(shape) == 2):
        choice = choose_preprocess(m, preprocess_option)
        out["task_used"] = "classify"
        out["preprocess"] = choice.describe()
        if choice.is_guess:
            out["warnings"].append(
                f"{m.path}: no preprocessing in the metadata; guessing {choice.spec!r}. Set "
                "--classifier-preprocess / [classifier] preprocess (ultralytics, imagenet, raw or custom)"
            )
        return out
    try:
        det = Detector(m)
    except ModelError as exc:
        out["warnings"].append(str(exc))
        return out
    out["task_used"] = "detect"
    f = det.format
    out["format"] = f"{f.fmt.name} {f.fmt.shape}, {f.num_classes} classes" + (
        ", NMS in the model" if not f.fmt.nms else ""
    )
    h, w = det.input_hw
    out["input_size"] = (
        f"dynamic H/W: each image letterboxed into the smallest {det.stride}-multiple rectangle inside "
        f"{h}x{w} (as Ultralytics; e.g. 1080x810 -> {w}x{rect_size((810, 1080), (h, w), det.stride)[0]}); "
        f"the camera loop keeps {h}x{w}"
        if det.rect
        else f"{h}x{w}" + (" (stretched, no letterbox)" if f.fmt.stretch_input else " (letterboxed)")
    )
    problems = check_detector(det)
    if problems:
        out["warnings"].append(describe(m.path, problems))
    return out
