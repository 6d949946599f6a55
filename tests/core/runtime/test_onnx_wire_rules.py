"""core/runtime/onnx_wire.py on graphs built for it: which output scale the broken-model guard sees (through
which ops, from which tensor encodings), the operator census and quantization kind, and the wire
errors (one reason each) for bytes that are not a model."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from edge_agent.core.runtime.onnx_wire import (
    WireError,
    classify_quantization,
    iter_fields,
    output_dequant_scales,
    summarize,
)


def _varint(n: int) -> bytes:
    out = b""
    while True:
        b, n = n & 0x7F, n >> 7
        out += bytes([b | (0x80 if n else 0)])
        if not n:
            return out


def _field(num: int, wt: int, payload: bytes | int) -> bytes:
    key = _varint(num << 3 | wt)
    if wt == 0:
        assert isinstance(payload, int)
        return key + _varint(payload)
    assert isinstance(payload, bytes)
    return key + (_varint(len(payload)) + payload if wt == 2 else payload)


def _model(
    nodes: list,
    inits: list,
    outputs: list[str],
    producer: str = "",
    opsets: tuple = (("", 17),),
) -> bytes:
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs],
        inits,
    )
    m = helper.make_model(
        graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets], producer_name=producer
    )
    return m.SerializeToString()


def _dq(out: str = "y", scale: str = "s") -> list:
    return [
        helper.make_node("QuantizeLinear", ["x", scale, "zp"], ["q"]),
        helper.make_node("DequantizeLinear", ["q", scale, "zp"], [out]),
    ]


ZP = numpy_helper.from_array(np.array(0, np.uint8), "zp")


def test_a_dequantized_output_s_scale_is_read_from_raw_data_and_from_float_data() -> None:
    raw = numpy_helper.from_array(np.array(8.0, np.float32), "s")
    assert raw.raw_data
    assert output_dequant_scales(_model(_dq(), [raw, ZP], ["y"])) == {"y": 8.0}
    packed = helper.make_tensor("s", TensorProto.FLOAT, [], [0.25])
    assert not packed.raw_data and list(packed.float_data) == [0.25]
    assert output_dequant_scales(_model(_dq(), [packed, ZP], ["y"])) == {"y": 0.25}


def test_an_unpacked_float_data_scale_is_read_too() -> None:
    """``float_data`` written as one fixed32 field (unpacked, legal protobuf) rather than packed."""
    model = _model(_dq(), [ZP], ["y"])
    tensor = _field(2, 0, TensorProto.FLOAT) + _field(4, 5, np.float32(0.5).tobytes()) + _field(8, 2, b"s")
    # the initializer appended to the graph (field 7 of the model, field 5 of the graph)
    fields = iter_fields(model)
    graph = next(v for n, w, v in fields if n == 7)
    assert isinstance(graph, bytes)
    new_graph = graph + _field(5, 2, tensor)
    rebuilt = b"".join(_field(n, w, new_graph if n == 7 else v) for n, w, v in fields)
    assert output_dequant_scales(rebuilt) == {"y": 0.5}


@pytest.mark.parametrize(
    ("scale", "why"),
    [
        (numpy_helper.from_array(np.array([8.0, 8.0], np.float32), "s"), "per-channel"),
        (helper.make_tensor("s", TensorProto.FLOAT, [2], [8.0, 8.0]), "two floats"),
        (numpy_helper.from_array(np.array(8.0, np.float64), "s"), "double"),
        (numpy_helper.from_array(np.array(8.0, np.float16), "s"), "half"),
        (numpy_helper.from_array(np.array(8.0, np.float32), "other"), "not the DQ's scale"),
    ],
)
def test_only_a_scalar_float32_scale_counts(scale: object, why: str) -> None:
    assert output_dequant_scales(_model(_dq(), [scale, ZP], ["y"])) == {}, why


def test_the_scale_is_seen_through_up_to_seven_reshaping_ops() -> None:
    s = numpy_helper.from_array(np.array(4.0, np.float32), "s")
    ops = ["Transpose", "Reshape", "Identity", "Squeeze", "Unsqueeze", "Flatten", "Identity", "Identity"]

    def chain(n: int) -> list:
        nodes = _dq("d0")
        for i in range(n):
            nodes.append(helper.make_node(ops[i], [f"d{i}"], [f"d{i + 1}"]))
        return nodes

    assert output_dequant_scales(_model(chain(7), [s, ZP], ["d7"])) == {"d7": 4.0}
    assert output_dequant_scales(_model(chain(8), [s, ZP], ["d8"])) == {}
    sig = [*_dq("d0"), helper.make_node("Sigmoid", ["d0"], ["out"])]  # changes the values
    assert output_dequant_scales(_model(sig, [s, ZP], ["out"])) == {}


def test_every_dequantized_output_is_listed_and_the_others_not() -> None:
    s = numpy_helper.from_array(np.array(8.0, np.float32), "s")
    t = numpy_helper.from_array(np.array(0.01, np.float32), "t")
    nodes = [
        *_dq("boxes", "s"),
        helper.make_node("QuantizeLinear", ["x", "t", "zp"], ["q2"]),
        helper.make_node("DequantizeLinear", ["q2", "t", "zp"], ["scores"]),
        helper.make_node("Relu", ["x"], ["plain"]),
        helper.make_node("Identity", [], ["nothing"]),  # a passthrough with no input
    ]
    got = output_dequant_scales(_model(nodes, [s, t, ZP], ["boxes", "scores", "plain", "nothing", "x"]))
    assert got == {"boxes": 8.0, "scores": pytest.approx(0.01)}


def test_a_dequantize_without_a_scale_input_is_not_a_finding() -> None:
    s = numpy_helper.from_array(np.array(8.0, np.float32), "s")
    nodes = [helper.make_node("DequantizeLinear", ["s"], ["y"])]
    assert output_dequant_scales(_model(nodes, [s], ["y"])) == {}


def test_bytes_without_a_graph_are_refused() -> None:
    no_graph = _field(1, 0, 8) + _field(2, 2, b"me")
    for fn in (output_dequant_scales, summarize):
        with pytest.raises(WireError, match=r"^no graph in the model$"):
            fn(no_graph)


def test_summary_of_a_known_model() -> None:
    nodes = [*_dq(), helper.make_node("Relu", ["y"], ["r"]), helper.make_node("Relu", ["r"], ["r2"])]
    half = numpy_helper.from_array(np.ones(3, np.float16), "h")
    half2 = numpy_helper.from_array(np.ones(2, np.float16), "h2")
    s = numpy_helper.from_array(np.array(0.1, np.float32), "s")
    data = _model(nodes, [s, ZP, half, half2], ["r2"], "exporter é", (("", 17), ("com.microsoft", 1)))
    g = summarize(data)
    assert g.ir_version > 0 and g.producer == "exporter é"
    assert g.opsets == {"ai.onnx": 17, "com.microsoft": 1}
    assert g.op_counts == {"QuantizeLinear": 1, "DequantizeLinear": 1, "Relu": 2}
    assert g.fp16_initializers == 2 and g.quant_kind == "qdq_int8"


@pytest.mark.parametrize(
    ("ops", "fp16", "kind"),
    [
        ({}, 0, "fp32"),
        ({}, 1, "fp16"),
        ({"Conv": 3}, 2, "fp16"),
        ({"DequantizeLinear": 1}, 0, "qdq_int8"),
        ({"QuantizeLinear": 1}, 1, "qdq_int8"),
        ({"ConvInteger": 1, "QuantizeLinear": 1}, 0, "dynamic_int8"),
        ({"MatMulInteger": 1}, 0, "dynamic_int8"),
        ({"DynamicQuantizeLinear": 1}, 0, "dynamic_int8"),
        ({"QLinearConv": 1, "DequantizeLinear": 2}, 0, "qoperator_int8"),
        ({"QLinearMatMul": 1}, 0, "qoperator_int8"),
        ({"QLinearMatMul": 1, "MatMulInteger": 1}, 0, "mixed"),
    ],
)
def test_quantization_kind_from_the_operator_mix(ops: dict[str, int], fp16: int, kind: str) -> None:
    assert classify_quantization(Counter(ops), fp16) == kind


def test_fields_of_every_wire_type_are_walked() -> None:
    msg = (
        _field(1, 0, 300)
        + _field(2, 1, b"\1" * 8)
        + _field(3, 2, b"abc")
        + _field(4, 5, b"\2" * 4)
        + _field(5, 0, 0)
        + _field(2**20, 2, b"")
    )
    got = iter_fields(msg)
    assert [(n, w) for n, w, _ in got] == [(1, 0), (2, 1), (3, 2), (4, 5), (5, 0), (2**20, 2)]
    assert [v for n, _, v in got if n in (1, 3, 5)] == [300, b"abc", 0]
    assert _varint(2**63 - 1) and iter_fields(_field(1, 0, 2**63 - 1)) == [(1, 0, 2**63 - 1)]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\x08", "truncated varint"),
        (b"\x08" + b"\xff" * 10 + b"\x01", "varint too long"),  # over 64 bits
        (b"\x00\x01", "field number 0"),
        (b"\x0b", "unsupported wire type 3"),
        (b"\x0c", "unsupported wire type 4"),
        (b"\x1a\x05abc", "field 3 runs past the end (7 > 5 bytes)"),
        (b"\x11" + b"\0" * 7, "truncated message"),
        (b"\x15" + b"\0" * 3, "truncated message"),
    ],
)
def test_malformed_bytes_give_one_reason(data: bytes, message: str) -> None:
    with pytest.raises(WireError) as exc:
        iter_fields(data)
    assert str(exc.value) == message


def test_a_dequantize_without_a_zero_point_input_counts_too() -> None:
    s = numpy_helper.from_array(np.array(8.0, np.float32), "s")
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s"], ["q"]),
        helper.make_node("DequantizeLinear", ["q", "s"], ["y"]),
    ]
    assert output_dequant_scales(_model(nodes, [s], ["y"])) == {"y": 8.0}
