"""Back to FP32: what ``quantize`` does first to an FP16, dynamic INT8, QOperator or QDQ model.

Users bring the file they have. Static quantization needs a float graph, so:

* FP16 -> FP32: every float16 initializer, Constant, Cast target and graph input/output type;
* dynamic INT8 (``DynamicQuantizeLinear`` + ``ConvInteger``/``MatMulInteger`` -> Cast -> Mul by the
  scale product): ``Conv``/``MatMul`` with the weights dequantized, ``(w - zp) * scale``;
* QOperator (``QLinearConv``, ``QLinearMatMul``, com.microsoft ``QLinearAdd/Mul/Concat/Sigmoid/
  LeakyRelu/GlobalAveragePool/AveragePool``, ``QGemm``): the float op on dequantized inputs;
* QDQ: ``QuantizeLinear -> DequantizeLinear`` pairs dropped, dequantized initializers folded.

Weights keep the int8 grid, so the accuracy is bounded by the original quantization (the shared
FP32 YOLOv8n was made exactly this way from a dynamic INT8 export). Anything else quantized is
refused with the op's name.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Optional

import numpy as np
import numpy.typing as npt

from edge_agent.errors import QuantizeError
from edge_agent.tools import require_onnx

if TYPE_CHECKING:
    from onnx import ModelProto, NodeProto, TensorProto

log = logging.getLogger(__name__)

FloatArray = npt.NDArray[np.float32]


def _deq(
    q: npt.NDArray[Any], scale: npt.NDArray[Any], zp: Optional[npt.NDArray[Any]], axis: int
) -> FloatArray:
    """``(q - zp) * scale`` with per-axis scale/zero point broadcast along ``axis``.

    A dynamic INT8 Conv's per-output-channel scale is stored ``[C, 1, 1]`` (so that its Mul
    broadcasts over NCHW) and ConvInteger allows one zero point for all channels: both handled.
    """
    qf = q.astype(np.float32)
    s = np.asarray(scale, np.float32)
    z = np.zeros((), np.float32) if zp is None else np.asarray(zp, np.float32)
    if s.size > 1:
        shape = [1] * qf.ndim
        shape[axis % qf.ndim] = s.size
        s = s.reshape(shape)
        if z.size > 1:
            z = z.reshape(shape)
    out: FloatArray = ((qf - z) * s).astype(np.float32)
    return out


def _clamps_at_zero(zp: Optional[npt.NDArray[Any]]) -> bool:
    """A QuantizeLinear with this zero point maps every negative value to 0 (no zero point: uint8 0)."""
    if zp is None:
        return True
    if not np.issubdtype(zp.dtype, np.integer):
        return False
    return bool(np.all(np.asarray(zp) == np.iinfo(zp.dtype).min))


def has_fp16(model: ModelProto) -> bool:
    onnx = require_onnx()
    f16 = onnx.TensorProto.FLOAT16
    g = model.graph
    return any(i.data_type == f16 for i in g.initializer) or any(
        v.type.tensor_type.elem_type == f16 for v in list(g.input) + list(g.output)
    )


def fp16_to_fp32(model: ModelProto) -> ModelProto:
    """Every float16 tensor, attribute and type of ``model`` (in place) becomes float32."""
    onnx = require_onnx()
    from onnx import numpy_helper

    f16, f32 = onnx.TensorProto.FLOAT16, onnx.TensorProto.FLOAT

    def fix_tensor(t: TensorProto) -> None:
        if t.data_type == f16:
            t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float32), t.name))

    g = model.graph
    for init in g.initializer:
        fix_tensor(init)
    for node in g.node:
        for a in node.attribute:
            if a.type == onnx.AttributeProto.TENSOR:
                fix_tensor(a.t)
            elif a.name in ("to", "dtype") and a.type == onnx.AttributeProto.INT and a.i == f16:
                a.i = f32
    for v in list(g.input) + list(g.output) + list(g.value_info):
        if v.type.tensor_type.elem_type == f16:
            v.type.tensor_type.elem_type = f32
    return model


_QLINEAR_UNARY = {"QLinearSigmoid": "Sigmoid", "QLinearLeakyRelu": "LeakyRelu"}
_QLINEAR_BINARY = {"QLinearAdd": "Add", "QLinearMul": "Mul"}


def dequantize(model: ModelProto) -> ModelProto:
    """A float copy of a QDQ / QOperator / dynamic INT8 ``model`` (see the module docstring)."""
    onnx = require_onnx()
    from onnx import helper, numpy_helper

    g = model.graph
    consts: dict[str, npt.NDArray[Any]] = {i.name: numpy_helper.to_array(i) for i in g.initializer}
    for n in g.node:
        if n.op_type == "Constant" and n.attribute and n.attribute[0].type == onnx.AttributeProto.TENSOR:
            consts[n.output[0]] = numpy_helper.to_array(n.attribute[0].t)
    consumers: dict[str, list[NodeProto]] = {}
    for n in g.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n)
    alias: dict[str, str] = {}  # a quantized tensor -> the float tensor standing for it
    prescaled: set[str] = set()  # *Integer outputs already emitted in float scale
    new_nodes: list[NodeProto] = []
    new_inits: list[TensorProto] = []

    def f(name: str) -> str:
        return alias.get(name, name)

    def const(name: str, what: str) -> npt.NDArray[Any]:
        if name not in consts:
            raise QuantizeError(f"cannot dequantize: {what} '{name}' is not a constant")
        return consts[name]

    def add_init(name: str, arr: npt.NDArray[Any]) -> str:
        new_inits.append(numpy_helper.from_array(arr, name))
        consts[name] = arr
        return name

    def deq_input(name: str, scale: str, zp: str, axis: int = 1) -> str:
        """Float name for a quantized input: a folded constant or the float tensor it stands for."""
        if name in alias:
            return alias[name]
        if name in consts:
            zpa = consts.get(zp) if zp else None
            return add_init(f"{name}_deq_f32", _deq(consts[name], const(scale, "scale"), zpa, axis))
        return name  # an op we already turned float produced it

    def emit(
        op: str, ins: list[str], out: str, node: NodeProto, domain: str = "", drop: tuple[str, ...] = ()
    ) -> None:
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute if a.name not in drop}
        new_nodes.append(
            helper.make_node(op, ins, [out], name=(node.name or out) + "_f32", domain=domain, **attrs)
        )

    def fused_relu(node: NodeProto, out: str, y_scale: str, y_zp: str) -> None:
        """onnxruntime drops a Relu after a quantized Conv/MatMul/Add when the output's zero point sits at
        the type's minimum (the clamp at 0 is implicit in uint8/int8): put it back as a real Relu."""
        zp = consts.get(y_zp)
        if zp is None or y_scale not in consts:
            return
        qmin = np.iinfo(zp.dtype).min if np.issubdtype(zp.dtype, np.integer) else 0
        if np.all(np.asarray(zp) == qmin):
            pre = f"{out}_before_relu"
            new_nodes[-1].output[0] = pre
            new_nodes.append(helper.make_node("Relu", [pre], [out], name=f"{out}_fused_relu"))

    def integer_op(node: NodeProto, float_op: str, w_axis: int) -> None:
        """ConvInteger/MatMulInteger -> Conv/MatMul with float weights; scale taken from the Mul after the Cast."""
        out = node.output[0]
        casts = [c for c in consumers.get(out, []) if c.op_type == "Cast"]
        muls = [m for c in casts for m in consumers.get(c.output[0], []) if m.op_type == "Mul"]
        if not muls:
            raise QuantizeError(
                f"cannot dequantize {node.op_type} '{node.name}': no Cast -> Mul(scale) after it"
            )
        mul = muls[0]
        other = next(i for i in mul.input if i != casts[0].output[0])
        prod = next((p for p in g.node if other in p.output), None)
        w_scale_name = next((i for i in (prod.input if prod is not None else []) if i in consts), None)
        if w_scale_name is None:
            raise QuantizeError(f"cannot dequantize {node.op_type} '{node.name}': weight scale not found")
        w = const(node.input[1], "weight")
        wzp = consts.get(node.input[3]) if len(node.input) > 3 and node.input[3] else None
        wf = _deq(w, consts[w_scale_name], wzp, w_axis)
        emit(float_op, [f(node.input[0]), add_init(f"{node.input[1]}_f32", wf)], out, node)
        prescaled.add(out)

    for node in g.node:
        op, ins, outs = node.op_type, list(node.input), list(node.output)
        if op == "QuantizeLinear" and _clamps_at_zero(
            consts.get(ins[2]) if len(ins) > 2 and ins[2] else None
        ):
            # onnxruntime's QDQ quantizer drops a Relu before a QuantizeLinear whose zero point is
            # the type's minimum (the clamp at 0 is implicit): the float copy needs it back
            new_nodes.append(
                helper.make_node("Relu", [f(ins[0])], [f"{outs[0]}_relu"], name=f"{outs[0]}_relu")
            )
            alias[outs[0]] = f"{outs[0]}_relu"
        elif op == "QuantizeLinear" or op == "DynamicQuantizeLinear":
            alias[outs[0]] = f(ins[0])
        elif op == "DequantizeLinear":
            axis = next((a.i for a in node.attribute if a.name == "axis"), 1)
            x = ins[0]
            if x in consts:
                zp = consts.get(ins[2]) if len(ins) > 2 and ins[2] else None
                add_init(outs[0], _deq(consts[x], const(ins[1], "scale"), zp, axis))
            else:
                alias[outs[0]] = f(x)
        elif op == "ConvInteger":
            integer_op(node, "Conv", 0)
        elif op == "MatMulInteger":
            integer_op(node, "MatMul", 1)
        elif op == "Cast" and ins[0] in prescaled:
            alias[outs[0]] = ins[0]
            prescaled.add(outs[0])
        elif op == "Mul" and any(f(i) in prescaled or i in prescaled for i in ins):
            alias[outs[0]] = next(f(i) for i in ins if i in prescaled or f(i) in prescaled)
        elif op == "QLinearConv":
            x = deq_input(ins[0], ins[1], ins[2])
            x_scale = const(ins[1], "scale")
            ws = const(ins[4], "scale")
            wf = _deq(const(ins[3], "weight"), ws, consts.get(ins[5]), 0)
            conv_in = [x, add_init(f"{ins[3]}_f32", wf)]
            if len(ins) > 8 and ins[8]:
                bias = const(ins[8], "bias").astype(np.float32) * (
                    np.float32(x_scale) * ws.astype(np.float32)
                )
                conv_in.append(add_init(f"{ins[8]}_f32", bias.astype(np.float32).reshape(-1)))
            emit("Conv", conv_in, outs[0], node)
            fused_relu(node, outs[0], ins[6], ins[7])
        elif op == "QLinearMatMul":
            emit(
                "MatMul",
                [deq_input(ins[0], ins[1], ins[2]), deq_input(ins[3], ins[4], ins[5], 1)],
                outs[0],
                node,
            )
            fused_relu(node, outs[0], ins[6], ins[7])
        elif op in _QLINEAR_BINARY:
            a, b = deq_input(ins[0], ins[1], ins[2]), deq_input(ins[3], ins[4], ins[5])
            emit(_QLINEAR_BINARY[op], [a, b], outs[0], node)
            fused_relu(node, outs[0], ins[6], ins[7])
        elif op in _QLINEAR_UNARY:
            emit(_QLINEAR_UNARY[op], [deq_input(ins[0], ins[1], ins[2])], outs[0], node)
        elif op == "QLinearConcat":
            parts = [deq_input(ins[i], ins[i + 1], ins[i + 2]) for i in range(2, len(ins), 3)]
            emit("Concat", parts, outs[0], node)
        elif op in ("QLinearGlobalAveragePool", "QLinearAveragePool"):
            if any(a.name == "channels_last" and a.i for a in node.attribute):
                raise QuantizeError(f"cannot dequantize {op} '{node.name}' with channels_last")
            emit(
                op[len("QLinear") :],
                [deq_input(ins[0], ins[1], ins[2])],
                outs[0],
                node,
                drop=("channels_last",),
            )
        elif op == "QGemm":
            a, b = deq_input(ins[0], ins[1], ins[2]), deq_input(ins[3], ins[4], ins[5], 0)
            gin = [a, b]
            if len(ins) > 6 and ins[6]:
                c = (
                    const(ins[6], "bias").astype(np.float32)
                    * np.float32(const(ins[1], "scale"))
                    * const(ins[4], "scale").astype(np.float32)
                )
                gin.append(add_init(f"{ins[6]}_f32", c.astype(np.float32)))
            emit("Gemm", gin, outs[0], node)
            if len(ins) > 8:
                fused_relu(node, outs[0], ins[7], ins[8])
        elif op.startswith("QLinear") or op.endswith("Integer") or op in ("QGemm", "QAttention"):
            raise QuantizeError(
                f"cannot dequantize operator {op} (node '{node.name}'); quantize the FP32/FP16 source instead"
            )
        else:  # a float op, or one that moves quantized values (MaxPool, Resize, Reshape...): now on floats
            n2 = onnx.NodeProto()
            n2.CopyFrom(node)
            del n2.input[:]
            n2.input.extend(f(i) for i in ins)
            new_nodes.append(n2)

    # graph outputs that were produced by a dropped node: an Identity from the float tensor
    for o in g.output:
        if o.name in alias and alias[o.name] != o.name:
            new_nodes.append(
                helper.make_node("Identity", [alias[o.name]], [o.name], name=f"{o.name}_deq_out")
            )
        o.type.tensor_type.elem_type = onnx.TensorProto.FLOAT
    used = {o.name for o in g.output}
    live: list[NodeProto] = []
    for n in reversed(new_nodes):  # drop what no longer feeds an output (scale products, dead Q/DQ)
        if any(o in used for o in n.output):
            live.append(n)
            used.update(n.input)
    live.reverse()
    inits = [i for i in list(g.initializer) + new_inits if i.name in used]
    del g.node[:]
    g.node.extend(live)
    del g.initializer[:]
    g.initializer.extend({i.name: i for i in inits}.values())
    del g.value_info[:]
    leftover = sorted({n.op_type for n in live if n.op_type in ("QuantizeLinear", "DequantizeLinear")})
    if leftover:
        log.info("dequantize: %s left on graph inputs", ", ".join(leftover))
    return model


def to_float32(model: ModelProto, kind: str) -> tuple[ModelProto, str]:
    """``model`` as FP32 plus the line telling the user what was done (``kind``: ModelInfo.quant_kind)."""
    if kind == "fp16" or has_fp16(model):
        fp16_to_fp32(model)
        note = "FP16 model: converted to FP32 first"
        if kind == "fp16":
            return model, note
    if kind in ("dynamic_int8", "qoperator_int8", "qdq_int8", "mixed"):
        dequantize(model)
        return model, (
            f"{kind.replace('_', ' ')} model: dequantized back to FP32 first; the result's accuracy is "
            "bounded by the original quantization (validate it against the FP32 source if you have it)"
        )
    return model, ""
