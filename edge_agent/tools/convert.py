"""Down-convert an ONNX model so an older onnxruntime (a Jetson's) loads it.

The limits come from :mod:`edge_agent.core.runtime.ort_compat`. Three steps:

1. drop opset imports no node uses (onnxruntime's quantizer stamps ``ai.onnx.ml`` 5 and six
   other domains into every model it writes; an old runtime refuses the unused ``ai.onnx.ml``);
2. lower the ``ai.onnx`` opset: onnx's version converter first; when it has no adapter (it has
   none from Split 18, for instance), "restamp": every node whose operator did not change between
   the target opset and the model's is kept as is, the few whose newer form is only an extension
   (Split without ``num_outputs``, Resize without antialias/axes, Reduce* with constant axes, Pad
   without axes, type-only changes) are rewritten to the older form, anything else is refused
   naming the operator;
3. lower the IR version when no tensor type needs the newer IR (float8: IR 9, int4: IR 10).

The result is checked with ``onnx.checker`` at the target opset; the CLI then compares it with
the input (``validate``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Optional

from edge_agent.core.runtime.ort_compat import RuntimeLimits, limits_for, parse_version, refusals
from edge_agent.errors import EdgeAgentError
from edge_agent.tools import require_onnx

if TYPE_CHECKING:
    from onnx import ModelProto, NodeProto


class ConvertError(EdgeAgentError):
    """The model cannot be expressed for the target runtime (names the operator or type)."""


_MAIN = ("", "ai.onnx")
# tensor element types and the IR version that introduced them (onnx.proto TensorProto.DataType)
_TYPE_IR = {17: 9, 18: 9, 19: 9, 20: 9, 21: 10, 22: 10, 23: 11}
_REDUCE = [
    "ReduceMax",
    "ReduceMin",
    "ReduceProd",
    "ReduceL1",
    "ReduceL2",
    "ReduceLogSum",
    "ReduceLogSumExp",
    "ReduceMean",
    "ReduceSumSquare",
]
# operators whose newer versions only added tensor types (float8, int4, ...): same node, older stamp
_TYPES_ONLY = set(
    [
        "Reshape",
        "Shape",
        "Identity",
        "Size",
        "ConstantOfShape",
        "Equal",
        "Constant",
        "Cast",
        "CastLike",
        "Flatten",
        "Squeeze",
        "Unsqueeze",
        "Transpose",
        "QuantizeLinear",
        "DequantizeLinear",
        "Where",
    ]
)


def target_limits(target: str) -> RuntimeLimits:
    """The table row for ``--target-ort``; one clear error for a version it does not know."""
    if parse_version(target) is None:
        raise ConvertError(f"--target-ort {target!r}: expected an onnxruntime version such as 1.11 or 1.16")
    limits = limits_for(target)
    if limits is None:  # newer than the table (an older one gets the oldest row from limits_for)
        from edge_agent.core.runtime.ort_compat import TABLE

        limits = TABLE[-1]
    return limits


def _attr(node: NodeProto, name: str) -> object:
    from onnx import helper

    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return None


def _drop_attr(node: NodeProto, name: str) -> None:
    keep = [a for a in node.attribute if a.name != name]
    del node.attribute[:]
    node.attribute.extend(keep)


def prune_opset_imports(model: ModelProto) -> list[str]:
    """Remove opset imports of domains no node (or function) uses; returns the dropped domains."""
    used = {n.domain or "" for n in model.graph.node}
    for f in model.functions:
        used.add(f.domain)
        used.update(n.domain or "" for n in f.node)
    keep = [o for o in model.opset_import if (o.domain or "") in used or (o.domain or "") in _MAIN]
    dropped = [o.domain for o in model.opset_import if o not in keep]
    del model.opset_import[:]
    model.opset_import.extend(keep)
    return dropped


def _const(model: ModelProto, name: str) -> Optional[list[int]]:
    from onnx import numpy_helper

    for init in model.graph.initializer:
        if init.name == name:
            return [int(v) for v in numpy_helper.to_array(init).reshape(-1)]
    for n in model.graph.node:
        if n.op_type == "Constant" and n.output[0] == name:
            value = _attr(n, "value")
            return None if value is None else [int(v) for v in numpy_helper.to_array(value).reshape(-1)]
    return None


def _lower_node(model: ModelProto, node: NodeProto, target: int) -> Optional[str]:
    """Rewrite one node to its form at opset ``target``; returns why not (None = done)."""
    from onnx import helper

    op = node.op_type
    if op == "Split":
        return "uses num_outputs" if _attr(node, "num_outputs") is not None else None
    if op == "Resize":
        if _attr(node, "antialias") or _attr(node, "axes"):
            return "uses antialias/axes"
        policy = _attr(node, "keep_aspect_ratio_policy")
        if policy not in (None, b"stretch"):
            return "uses keep_aspect_ratio_policy"
        if _attr(node, "coordinate_transformation_mode") == b"half_pixel_symmetric":
            return "uses half_pixel_symmetric"
        for name in ("antialias", "axes", "keep_aspect_ratio_policy"):
            _drop_attr(node, name)
        return None
    if op in _REDUCE:
        if target >= 18:  # axes are an input from 18 on; ReduceMax/Min 20 only added types
            return None
        if _attr(node, "noop_with_empty_axes"):
            return "uses noop_with_empty_axes"
        if len(node.input) > 1 and node.input[1]:
            axes = _const(model, node.input[1])
            if axes is None:
                return "takes its axes from a computed tensor"
            del node.input[1:]
            node.attribute.append(helper.make_attribute("axes", axes))
        return None
    if op == "Pad":
        if (len(node.input) > 3 and node.input[3]) or _attr(node, "mode") == b"wrap":
            return "uses axes or wrap mode"
        return None
    if op == "AveragePool":
        dil = _attr(node, "dilations")
        if isinstance(dil, list) and any(d != 1 for d in dil):  # INTS: a list
            return "uses dilations"
        _drop_attr(node, "dilations")  # all 1: opset 16's checker refuses the attribute itself
        return None
    if op in ("Cast", "CastLike", "QuantizeLinear", "DequantizeLinear"):
        bad = [a for a in ("saturate", "block_size", "output_dtype") if _attr(node, a) not in (None, 0, 1)]
        for name in ("saturate",):
            _drop_attr(node, name)
        return f"uses {bad[0]}" if bad else None
    if op in _TYPES_ONLY:
        return None
    return "has no older form"


def restamp(model: ModelProto, target: int) -> None:
    """Lower the ``ai.onnx`` opset node by node (see the module docstring); raises ConvertError."""
    from onnx import defs

    current = next(o.version for o in model.opset_import if o.domain in _MAIN)
    for node in model.graph.node:
        if node.domain not in _MAIN:
            continue
        if any(a.type in (5, 10) for a in node.attribute):  # GRAPH / GRAPHS: subgraphs not handled
            raise ConvertError(
                f"operator {node.op_type} ({node.name or '?'}) has a subgraph: cannot lower it"
            )
        try:
            now = defs.get_schema(node.op_type, current).since_version
        except Exception:  # noqa: BLE001 - onnx raises SchemaError, a pybind class
            raise ConvertError(f"operator {node.op_type} is unknown at opset {current}") from None
        try:
            then: Optional[int] = defs.get_schema(node.op_type, target).since_version
        except Exception:  # noqa: BLE001
            then = None
        if then is None:
            raise ConvertError(
                f"operator {node.op_type} does not exist before opset {now}; the target runtime needs "
                f"opset <= {target}: re-export the model without it"
            )
        if now == then:
            continue
        why = _lower_node(model, node, target)
        if why:
            raise ConvertError(
                f"operator {node.op_type} (opset {now} form) {why}: it has no opset-{target} form; "
                "re-export the model for an older opset"
            )
    for o in model.opset_import:
        if o.domain in _MAIN:
            o.version = target


def _lower_ir(model: ModelProto, ir: int) -> None:
    if model.ir_version <= ir:
        return
    types = [t.data_type for t in model.graph.initializer]
    types += [
        v.type.tensor_type.elem_type
        for v in (*model.graph.input, *model.graph.output, *model.graph.value_info)
    ]
    for t in types:
        if _TYPE_IR.get(t, 0) > ir:
            raise ConvertError(
                f"tensor element type {t} needs IR {_TYPE_IR[t]}; the target runtime reads IR <= {ir}"
            )
    model.ir_version = ir


def convert_model(
    model: ModelProto, target: str, log: Callable[[str], object] = lambda _m: None
) -> ModelProto:
    """A copy of ``model`` (an onnx ModelProto) that the ``target`` onnxruntime loads."""
    onnx = require_onnx()
    from onnx import version_converter

    limits = target_limits(target)
    out = onnx.ModelProto()
    out.CopyFrom(model)
    dropped = prune_opset_imports(out)
    if dropped:
        log(f"dropped unused opset imports: {', '.join(d or 'ai.onnx' for d in dropped)}")
    ml = next((o.version for o in out.opset_import if o.domain == "ai.onnx.ml"), 0)
    if ml > limits.ml_opset:
        op = next(n.op_type for n in out.graph.node if n.domain == "ai.onnx.ml")
        raise ConvertError(
            f"operator {op} (ai.onnx.ml opset {ml}) is newer than onnxruntime {limits.name} reads "
            f"(ai.onnx.ml <= {limits.ml_opset})"
        )
    opset = next((o.version for o in out.opset_import if o.domain in _MAIN), 0)
    if opset > limits.opset:
        try:
            converted = version_converter.convert_version(out, limits.opset)
            log(f"opset {opset} -> {limits.opset} (onnx version converter)")
            out = converted
        except Exception as exc:  # noqa: BLE001 - the converter raises bare RuntimeErrors
            first = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
            restamp(out, limits.opset)
            why = first.split(": ")[-1].replace("$", "")
            log(f"opset {opset} -> {limits.opset} (node by node; onnx's version converter said: {why})")
    _lower_ir(out, limits.ir)
    try:
        onnx.checker.check_model(out)
    except onnx.checker.ValidationError as exc:
        first = str(exc).strip().splitlines()[0]
        raise ConvertError(f"the converted model does not check at opset {limits.opset}: {first}") from None
    still = refusals(out.ir_version, {o.domain or "ai.onnx": o.version for o in out.opset_import}, limits)
    if still:
        raise ConvertError(f"could not reach onnxruntime {limits.name}'s limits: {', '.join(still)}")
    return out
