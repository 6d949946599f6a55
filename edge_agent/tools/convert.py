"""Down-convert an ONNX model so an older onnxruntime (a Jetson's) loads it.

The limits come from :mod:`edge_agent.core.runtime.ort_compat`. Three steps:

1. drop opset imports no node uses (onnxruntime's quantizer stamps ``ai.onnx.ml`` 5 and six
   other domains into every model it writes; an old runtime refuses the unused ``ai.onnx.ml``);
2. lower the ``ai.onnx`` opset: onnx's version converter first; when it has no adapter (it has
   none from Split 18, for instance), "restamp": every node whose operator did not change between
   the target opset and the model's is kept as is; a newer form that only admits more tensor types
   (Conv and MaxPool 22: bfloat16) is restamped when the node's own types fit the older form; the
   few whose newer form is an extension (Split without ``num_outputs``, Resize without
   antialias/axes, Reduce* with constant axes, Pad without axes) are rewritten to the older form
   (:mod:`edge_agent.tools.convert_ops`); anything else is refused naming the operator, what its
   schema changed and the fix;
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
from edge_agent.tools.convert_ops import forms, lower_node, type_refusal, value_types

if TYPE_CHECKING:
    from onnx import ModelProto


class ConvertError(EdgeAgentError):
    """The model cannot be expressed for the target runtime (names the operator or type)."""


_MAIN = ("", "ai.onnx")
# tensor element types and the IR version that introduced them (onnx.proto TensorProto.DataType)
_TYPE_IR = {17: 9, 18: 9, 19: 9, 20: 9, 21: 10, 22: 10, 23: 11}


def target_limits(target: str) -> RuntimeLimits:
    """The table row for ``--target-ort``; one clear error for a version it does not know."""
    if parse_version(target) is None:
        raise ConvertError(f"--target-ort {target!r}: expected an onnxruntime version such as 1.11 or 1.16")
    limits = limits_for(target)
    if limits is None:  # newer than the table (an older one gets the oldest row from limits_for)
        from edge_agent.core.runtime.ort_compat import TABLE

        limits = TABLE[-1]
    return limits


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


def _refuse(op: str, detail: str, target: int) -> ConvertError:
    return ConvertError(
        f"operator {op} {detail}: export the model at opset {target} or lower instead "
        f"(Ultralytics: `yolo export format=onnx opset={target}`)"
    )


def restamp(model: ModelProto, target: int) -> None:
    """Lower the ``ai.onnx`` opset node by node (see the module docstring); raises ConvertError."""
    from onnx import defs

    current = next(o.version for o in model.opset_import if o.domain in _MAIN)
    types = value_types(model)  # before any rewrite: onnx infers at the model's own opset
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
            raise _refuse(
                node.op_type, f"does not exist before opset {now} (the target reads <= {target})", target
            )
        if now == then:
            continue
        why = lower_node(model, node, target, forms(node.op_type, then, now))
        if why:
            raise _refuse(node.op_type, f"(opset-{now} form) {why}", target)
        bad = type_refusal(node, target, types)
        if bad:
            raise ConvertError(f"operator {node.op_type} ({node.name or '?'}): {bad}")
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
