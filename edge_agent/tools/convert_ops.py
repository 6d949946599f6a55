"""How ``model convert`` rewrites one ``ai.onnx`` node to an older opset's form of its operator.

Two kinds of change between an operator's forms are rewritten:

* type-only steps (:data:`TYPE_ONLY`): the newer form differs from the one before only in the
  tensor types it admits (opset 22 added bfloat16 to Conv, MaxPool, ConvTranspose and 45 others;
  19 and 21 added float8 / int4 to Reshape, Shape, Transpose, ...). The node stays as it is; its
  actual tensor types must be ones the older form admits (:func:`type_refusal`, from onnx's own
  schemas), so a bfloat16 MaxPool is refused instead of failing on the device;
* extensions with a rule (:func:`lower_node`): the newer form added an attribute or an input that
  the node does not use, or uses with its old meaning (Split without ``num_outputs``, Resize
  without antialias/axes, Reduce* with constant axes, Pad without axes, GridSample's renamed
  modes, ...).

Anything else is refused in one line naming the operator, what changed in its schema, and the fix
(export at the older opset). The table is checked against ``onnx.defs`` for every operator and
every step from opset 14 to 22 by tests/tools/test_convert_schemas.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from collections.abc import Iterable

    from onnx import ModelProto, NodeProto
    from onnx.defs import OpSchema

# opset -> operators whose form new at that opset only admits more (or other) tensor types than
# the form before it (onnx's Changelog.md; tests/tools/test_convert_schemas.py compares the
# schemas). Left out although their schemas only differ in types: Resize 19 and Pad 19 (new
# attribute *values*: half_pixel_symmetric, wrap), ScatterElements/ScatterND 18 (reduction
# max/min): rules below; If/Loop/Scan: subgraphs are not lowered.
_TYPE_STEPS = {
    14: "Add CumSum Div Mul Relu Sub",
    15: "Pow",
    16: "GreaterOrEqual Identity LeakyRelu LessOrEqual PRelu Where",
    18: "OptionalGetElement",
    19: "Constant Equal Identity Reshape Shape Size",
    20: "ConstantOfShape IsInf IsNaN ReduceMax ReduceMin",
    21: "Cast CastLike Constant ConstantOfShape Flatten Identity Pad Reshape Shape Size Squeeze "
    "Transpose Unsqueeze",
    22: "Acos Acosh Asin Asinh Atan Atanh AveragePool Bernoulli Conv ConvTranspose Cos Cosh DeformConv "
    "Det Dropout Elu EyeLike GRU GlobalAveragePool GlobalLpPool GlobalMaxPool GridSample HardSigmoid "
    "HardSwish InstanceNormalization LSTM LpNormalization LpPool MaxPool MaxRoiPool MaxUnpool Mish "
    "Multinomial NegativeLogLikelihoodLoss RNN RandomNormal RandomNormalLike RandomUniform "
    "RandomUniformLike RoiAlign Round Selu Sin Sinh Softplus Softsign Tan ThresholdedRelu",
}
TYPE_ONLY = frozenset((op, v) for v, ops in _TYPE_STEPS.items() for op in ops.split())
REDUCE = (
    "ReduceMax",
    "ReduceMin",
    "ReduceProd",
    "ReduceL1",
    "ReduceL2",
    "ReduceLogSum",
    "ReduceLogSumExp",
    "ReduceMean",
    "ReduceSumSquare",
)
# GridSample 20 renamed its modes (and made "linear" the default); 16's names for the same kernels
_GRID_MODES = {b"linear": b"bilinear", b"cubic": b"bicubic", b"nearest": b"nearest"}
RULES = frozenset(
    (
        "Split",
        "Resize",
        "Pad",
        "AveragePool",
        "Cast",
        "CastLike",
        "QuantizeLinear",
        "DequantizeLinear",
        "GridSample",
        "ScatterElements",
        "ScatterND",
        *REDUCE,
    )
)


def attr(node: NodeProto, name: str) -> object:
    from onnx import helper

    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return None


def drop_attr(node: NodeProto, name: str) -> None:
    keep = [a for a in node.attribute if a.name != name]
    del node.attribute[:]
    node.attribute.extend(keep)


def _set_attr(node: NodeProto, name: str, value: object) -> None:
    from onnx import helper

    drop_attr(node, name)
    node.attribute.append(helper.make_attribute(name, value))


def _const(model: ModelProto, name: str) -> Optional[list[int]]:
    from onnx import numpy_helper

    for init in model.graph.initializer:
        if init.name == name:
            return [int(v) for v in numpy_helper.to_array(init).reshape(-1)]
    for n in model.graph.node:
        if n.op_type == "Constant" and n.output[0] == name:
            value = attr(n, "value")
            return None if value is None else [int(v) for v in numpy_helper.to_array(value).reshape(-1)]
    return None


def forms(op: str, after: int, upto: int) -> list[int]:
    """The opsets in (after, upto] at which ``op`` got a new form."""
    from onnx import defs

    out: list[int] = []
    for v in range(after + 1, upto + 1):
        try:
            since = int(defs.get_schema(op, v).since_version)
        except Exception:  # noqa: BLE001 - SchemaError: not defined at v
            continue
        if since > after and since not in out:
            out.append(since)
    return out


def schema_change(op: str, version: int) -> str:
    """What the form of ``op`` new at ``version`` changed, from onnx's schemas: ``added attributes
    ceil_mode, dilations``; ``only tensor types`` when nothing else did."""
    from onnx import defs

    new = defs.get_schema(op, version)
    try:
        old = defs.get_schema(op, version - 1)
    except Exception:  # noqa: BLE001
        return "is new"

    def attrs(s: OpSchema) -> dict[str, tuple[int, bool, bytes]]:
        return {n: (a.type, a.required, a.default_value.SerializeToString()) for n, a in s.attributes.items()}

    def params(ps: Iterable[OpSchema.FormalParameter]) -> list[tuple[str, str, str, int]]:
        return [(p.name, str(p.option), p.type_str, p.min_arity) for p in ps]

    a0, a1 = attrs(old), attrs(new)
    out = []
    added = sorted(set(a1) - set(a0))
    removed = sorted(set(a0) - set(a1))
    changed = sorted(k for k in a0.keys() & a1.keys() if a0[k] != a1[k])
    if added:
        out.append(f"added attribute{'s' if len(added) > 1 else ''} {', '.join(added)}")
    if removed:
        out.append(f"removed attribute{'s' if len(removed) > 1 else ''} {', '.join(removed)}")
    if changed:
        out.append(f"changed attribute{'s' if len(changed) > 1 else ''} {', '.join(changed)}")
    if params(old.inputs) != params(new.inputs) or (old.min_input, old.max_input) != (
        new.min_input,
        new.max_input,
    ):
        out.append("changed its inputs")
    if params(old.outputs) != params(new.outputs) or (old.min_output, old.max_output) != (
        new.min_output,
        new.max_output,
    ):
        out.append("changed its outputs")
    return " and ".join(out) or "only tensor types"


def type_name(elem_type: int) -> str:
    from onnx import TensorProto

    return str(TensorProto.DataType.Name(elem_type)).lower()


def type_refusal(node: NodeProto, version: int, types: dict[str, int]) -> Optional[str]:
    """Why ``node`` does not fit the form of its operator at opset ``version`` by the tensor types
    it has (``types``: name -> element type, where known); None when it fits."""
    from onnx import defs

    schema = defs.get_schema(node.op_type, version)
    allowed = {c.type_param_str: set(c.allowed_type_strs) for c in schema.type_constraints}
    variadic = defs.OpSchema.FormalParameterOption.Variadic
    for kind, formals, actual in (
        ("input", schema.inputs, node.input),
        ("output", schema.outputs, node.output),
    ):
        for i, name in enumerate(actual):
            if not formals or (i >= len(formals) and formals[-1].option != variadic):
                break
            if not name or types.get(name, 0) == 0:
                continue
            formal = formals[min(i, len(formals) - 1)]
            text = type_name(types[name])
            if f"tensor({text})" not in allowed.get(formal.type_str, {formal.type_str}):
                return (
                    f"its {kind} '{name}' is {text}, which the opset-{schema.since_version} form does not "
                    "take: export the model with float32 tensors"
                )
    return None


def value_types(model: ModelProto) -> dict[str, int]:
    """Element type of every tensor onnx's shape inference can tell (initializers, inputs, ...)."""
    import onnx

    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:  # noqa: BLE001 - an uninferable model: what the file itself says
        inferred = model
    types = {t.name: int(t.data_type) for t in inferred.graph.initializer}
    g = inferred.graph
    for v in (*g.input, *g.output, *g.value_info):
        if v.type.HasField("tensor_type"):
            types[v.name] = int(v.type.tensor_type.elem_type)
    return types


def _rank(model: ModelProto, name: str) -> Optional[int]:
    g = model.graph
    for v in (*g.input, *g.value_info, *g.output):
        if v.name == name and v.type.tensor_type.HasField("shape"):
            return len(v.type.tensor_type.shape.dim)
    return None


def lower_node(model: ModelProto, node: NodeProto, target: int, steps: list[int]) -> Optional[str]:
    """Rewrite one node to its form at opset ``target`` (``steps``: the opsets since then at which
    its operator changed); returns why not, worded to follow "operator X ..." (None = done)."""
    from onnx import helper

    op = node.op_type
    if op not in RULES:
        other = [v for v in steps if (op, v) not in TYPE_ONLY]
        if not other:
            return None
        return (
            f"changed at opset {other[0]} ({schema_change(op, other[0])}), which `model convert` has no "
            "rewrite for"
        )
    if op == "Split":
        return "uses num_outputs" if attr(node, "num_outputs") is not None else None
    if op == "Resize":
        if attr(node, "antialias") or attr(node, "axes"):
            return "uses antialias/axes"
        policy = attr(node, "keep_aspect_ratio_policy")
        if policy not in (None, b"stretch"):
            return "uses keep_aspect_ratio_policy"
        if attr(node, "coordinate_transformation_mode") == b"half_pixel_symmetric":
            return "uses half_pixel_symmetric"
        for name in ("antialias", "axes", "keep_aspect_ratio_policy"):
            drop_attr(node, name)
        return None
    if op in REDUCE:
        if target >= 18:  # axes are an input from 18 on; ReduceMax/Min 20 only added types
            return None
        if attr(node, "noop_with_empty_axes"):
            return "uses noop_with_empty_axes"
        if len(node.input) > 1 and node.input[1]:
            axes = _const(model, node.input[1])
            if axes is None:
                return "takes its axes from a computed tensor"
            del node.input[1:]
            node.attribute.append(helper.make_attribute("axes", axes))
        return None
    if op == "Pad":
        if (len(node.input) > 3 and node.input[3]) or attr(node, "mode") == b"wrap":
            return "uses axes or wrap mode"
        return None
    if op == "AveragePool":
        dil = attr(node, "dilations")
        if isinstance(dil, list) and any(d != 1 for d in dil):  # INTS: a list
            return "uses dilations"
        drop_attr(node, "dilations")  # all 1: opset 16's checker refuses the attribute itself
        return None
    if op == "GridSample":
        if target >= 20 or 20 not in steps:
            return None
        mode = attr(node, "mode")
        mode = b"linear" if mode is None else mode
        if mode not in _GRID_MODES or _rank(model, node.input[0]) != 4:
            return "uses a mode or input rank its opset-16 form lacks"
        _set_attr(node, "mode", _GRID_MODES[mode].decode())
        return None
    if op in ("ScatterElements", "ScatterND"):  # 16 added reduction add/mul, 18 max/min
        reduction = attr(node, "reduction")
        newer = (b"max", b"min") if target >= 16 else (b"add", b"mul", b"max", b"min")
        return (
            f"uses reduction {reduction.decode()}"
            if isinstance(reduction, bytes) and reduction in newer
            else None
        )
    bad = [a for a in ("saturate", "block_size", "output_dtype") if attr(node, a) not in (None, 0, 1)]
    drop_attr(node, "saturate")  # Cast, CastLike, QuantizeLinear, DequantizeLinear
    return f"uses {bad[0]}" if bad else None
