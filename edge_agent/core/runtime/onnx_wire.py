"""Just enough of the ONNX protobuf wire format to list a model's operators, without ``onnx``.

The runtime must tell FP32 / FP16 / QDQ / QOperator / dynamic INT8 models apart (to warn about
slow dynamic-INT8 convolutions) but ``onnx`` is not a runtime dependency, and onnxruntime does not
expose the graph. Protobuf's wire format is simple: walk ModelProto -> graph -> node -> op_type
and skip every other field by its length (initializers are skipped without being copied).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Literal, Optional, Union

QuantKind = Literal["fp32", "fp16", "qdq_int8", "qoperator_int8", "dynamic_int8", "mixed"]

# field numbers from onnx.proto3
_MODEL_IR_VERSION, _MODEL_PRODUCER, _MODEL_GRAPH, _MODEL_OPSET = 1, 2, 7, 8
_GRAPH_NODE, _GRAPH_INITIALIZER = 1, 5
_NODE_OP_TYPE, _NODE_DOMAIN = 4, 7
_OPSET_DOMAIN, _OPSET_VERSION = 1, 2
_TENSOR_DATA_TYPE = 2
_FLOAT16 = 10


class WireError(ValueError):
    """The bytes are not a well-formed protobuf message (truncated or not ONNX)."""


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise WireError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise WireError("varint too long")


def iter_fields(buf: bytes) -> list[tuple[int, int, Union[int, bytes]]]:
    """(field number, wire type, value) of one message; length-delimited and fixed-size values are
    bytes, varints ints."""
    out: list[tuple[int, int, Union[int, bytes]]] = []
    pos, end = 0, len(buf)
    while pos < end:
        key, pos = _varint(buf, pos)
        num, wt = key >> 3, key & 7
        if num == 0:
            raise WireError("field number 0")
        if wt == 0:
            val, pos = _varint(buf, pos)
            out.append((num, wt, val))
        elif wt in (1, 5):  # fixed64 / fixed32: an unpacked float or double is one of these
            size = 8 if wt == 1 else 4
            if pos + size > end:
                raise WireError("truncated message")
            out.append((num, wt, buf[pos : pos + size]))
            pos += size
        elif wt == 2:
            length, pos = _varint(buf, pos)
            if pos + length > end:
                raise WireError(f"field {num} runs past the end ({pos + length} > {end} bytes)")
            out.append((num, wt, buf[pos : pos + length]))
            pos += length
        else:
            raise WireError(f"unsupported wire type {wt}")
    return out


def _int(v: Union[int, bytes]) -> int:
    if not isinstance(v, int):
        raise WireError("expected a varint field")
    return v


def _bytes(v: Union[int, bytes]) -> bytes:
    if not isinstance(v, bytes):
        raise WireError("expected a length-delimited field")
    return v


@dataclass
class GraphSummary:
    ir_version: int = 0
    producer: str = ""
    opsets: dict[str, int] = field(default_factory=dict)
    op_counts: Counter[str] = field(default_factory=Counter)
    fp16_initializers: int = 0

    @property
    def quant_kind(self) -> QuantKind:
        return classify_quantization(self.op_counts, self.fp16_initializers)


def summarize(model_bytes: bytes) -> GraphSummary:
    """Operators, opsets and producer of a serialized ModelProto. Raises WireError when malformed."""
    s = GraphSummary()
    graph: Union[int, bytes, None] = None
    for num, wt, val in iter_fields(model_bytes):
        if num == _MODEL_IR_VERSION and wt == 0:
            s.ir_version = _int(val)
        elif num == _MODEL_PRODUCER and wt == 2:
            s.producer = _bytes(val).decode("utf-8", "replace")
        elif num == _MODEL_OPSET and wt == 2:
            dom, ver = "", 0
            for n2, _w2, v2 in iter_fields(_bytes(val)):
                if n2 == _OPSET_DOMAIN:
                    dom = _bytes(v2).decode()
                elif n2 == _OPSET_VERSION:
                    ver = _int(v2)
            s.opsets[dom or "ai.onnx"] = ver
        elif num == _MODEL_GRAPH and wt == 2:
            graph = val
    if graph is None:
        raise WireError("no graph in the model")
    for num, wt, val in iter_fields(_bytes(graph)):
        if num == _GRAPH_NODE and wt == 2:
            for n2, w2, v2 in iter_fields(_bytes(val)):
                if n2 == _NODE_OP_TYPE and w2 == 2:
                    s.op_counts[_bytes(v2).decode("utf-8", "replace")] += 1
        elif num == _GRAPH_INITIALIZER and wt == 2:
            for n2, w2, v2 in iter_fields(_bytes(val)):
                if n2 == _TENSOR_DATA_TYPE and w2 == 0 and v2 == _FLOAT16:
                    s.fp16_initializers += 1
    return s


def classify_quantization(op_counts: Counter[str], fp16_initializers: int = 0) -> QuantKind:
    """Name the quantization scheme from the operator mix."""
    dynamic = op_counts["ConvInteger"] + op_counts["MatMulInteger"] + op_counts["DynamicQuantizeLinear"]
    qop = op_counts["QLinearConv"] + op_counts["QLinearMatMul"]
    qdq = op_counts["QuantizeLinear"] + op_counts["DequantizeLinear"]
    candidates: tuple[tuple[QuantKind, int], ...] = (("dynamic_int8", dynamic), ("qoperator_int8", qop))
    kinds: list[QuantKind] = [k for k, n in candidates if n]
    if not kinds and qdq:
        kinds.append("qdq_int8")
    if len(kinds) > 1:
        return "mixed"
    if kinds:
        return kinds[0]
    return "fp16" if fp16_initializers else "fp32"


_GRAPH_OUTPUT = 12
_NODE_INPUT, _NODE_OUTPUT = 1, 2
_TENSOR_FLOAT_DATA, _TENSOR_NAME, _TENSOR_RAW_DATA = 4, 8, 9
_FLOAT = 1
# ops that move values without changing them: a quantized output seen through them is still quantized
_PASSTHROUGH = ("Transpose", "Reshape", "Identity", "Squeeze", "Unsqueeze", "Flatten")


def _scalar_float(tensor: bytes) -> tuple[str, Optional[float]]:
    """(name, value) of a TensorProto holding one float32; value None for anything else."""
    import struct

    name, dtype, raw, floats = "", 0, b"", []
    for num, wt, val in iter_fields(tensor):
        if num == _TENSOR_NAME and wt == 2:
            name = _bytes(val).decode("utf-8", "replace")
        elif num == _TENSOR_DATA_TYPE and wt == 0:
            dtype = _int(val)
        elif num == _TENSOR_RAW_DATA and wt == 2:
            raw = _bytes(val)
        elif num == _TENSOR_FLOAT_DATA and wt == 2:
            b = _bytes(val)
            floats += list(struct.unpack(f"<{len(b) // 4}f", b))
        elif num == _TENSOR_FLOAT_DATA and wt == 5:  # one unpacked float
            floats.append(struct.unpack("<f", _bytes(val))[0])
    if dtype != _FLOAT:
        return name, None
    if len(raw) == 4:
        return name, float(struct.unpack("<f", raw)[0])
    return name, (float(floats[0]) if len(floats) == 1 else None)


def output_dequant_scales(model_bytes: bytes) -> dict[str, float]:
    """Graph outputs made by a ``DequantizeLinear`` (possibly seen through reshapes/transposes) with a
    scalar scale -> that scale. A score in (0, 1) under a scale of 8 rounds to 0: the commonest
    INT8 failure (the output Concat of pixel boxes and scores quantized as one tensor)."""
    graph: Optional[bytes] = None
    for num, wt, val in iter_fields(model_bytes):
        if num == _MODEL_GRAPH and wt == 2:
            graph = _bytes(val)
    if graph is None:
        raise WireError("no graph in the model")
    producer: dict[str, tuple[str, list[str]]] = {}
    scalars: dict[str, float] = {}
    outputs: list[str] = []
    for num, wt, val in iter_fields(graph):
        if num == _GRAPH_NODE and wt == 2:
            op, ins, outs = "", [], []
            for n2, w2, v2 in iter_fields(_bytes(val)):
                if w2 != 2:
                    continue
                if n2 == _NODE_OP_TYPE:
                    op = _bytes(v2).decode("utf-8", "replace")
                elif n2 == _NODE_INPUT:
                    ins.append(_bytes(v2).decode("utf-8", "replace"))
                elif n2 == _NODE_OUTPUT:
                    outs.append(_bytes(v2).decode("utf-8", "replace"))
            for o in outs:
                producer[o] = (op, ins)
        elif num == _GRAPH_INITIALIZER and wt == 2:
            name, value = _scalar_float(_bytes(val))
            if value is not None:
                scalars[name] = value
        elif num == _GRAPH_OUTPUT and wt == 2:
            for n2, w2, v2 in iter_fields(_bytes(val)):
                if n2 == 1 and w2 == 2:
                    outputs.append(_bytes(v2).decode("utf-8", "replace"))
    found: dict[str, float] = {}
    for out in outputs:
        name = out
        for _ in range(8):
            op, ins = producer.get(name, ("", []))
            if op in _PASSTHROUGH and ins:
                name = ins[0]
                continue
            if op == "DequantizeLinear" and len(ins) >= 2 and ins[1] in scalars:
                found[out] = scalars[ins[1]]
            break
    return found
