"""Back to FP32, rule by rule (issue 19): per-channel scales on their own axis, the clamp a
QuantizeLinear implies, FP16 attributes and Cast targets. Each dequantized model is run against
its quantized source on the real onnxruntime."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from edge_agent.tools.dequantize import dequantize, fp16_to_fp32, has_fp16, to_float32


def _run(m: Any, x: np.ndarray) -> np.ndarray:
    # no graph optimisation: onnxruntime would fuse DequantizeLinear + MatMul into a kernel that
    # quantizes the activations too, and the reference would no longer be the exact arithmetic
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return np.asarray(s.run(None, {"x": x})[0])


def _model(nodes: list[Any], inits: list[Any], x_shape: list[int], x_type: int = TensorProto.FLOAT) -> Any:
    g = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", x_type, x_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        inits,
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def _copy(m: Any) -> Any:
    out = type(m)()
    out.CopyFrom(m)
    return out


@pytest.mark.parametrize(("axis", "w_shape"), [(1, [4, 3]), (1, [3, 3]), (0, [3, 3])])
def test_per_channel_weights_are_scaled_along_their_axis(axis: int, w_shape: list[int]) -> None:
    rng = np.random.default_rng(0)
    n = w_shape[axis]
    wq = rng.integers(-127, 128, w_shape).astype(np.int8)
    inits = [
        numpy_helper.from_array(wq, "wq"),
        numpy_helper.from_array(np.linspace(0.01, 0.05, n).astype(np.float32), "ws"),
        numpy_helper.from_array(np.arange(n).astype(np.int8) - 1, "wz"),
    ]
    nodes = [
        helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["w"], axis=axis),
        helper.make_node("MatMul", ["x", "w"], ["y"]),
    ]
    src = _model(nodes, inits, [2, w_shape[0]])
    out = dequantize(_copy(src))
    assert [n.op_type for n in out.graph.node] == ["MatMul"]
    x = rng.normal(size=(2, w_shape[0])).astype(np.float32)
    np.testing.assert_allclose(_run(out, x), _run(src, x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("zp", "clamps"),
    [(np.uint8(0), True), (np.int8(-128), True), (None, True), (np.uint8(128), False), (np.int8(0), False)],
)
def test_a_quantize_linear_that_clamps_at_zero_keeps_the_clamp(zp: Any, clamps: bool) -> None:
    """onnxruntime's QDQ quantizer folds a Relu into the QuantizeLinear after it (zero point at the
    type's minimum); the float copy must still clamp there, and only there."""
    inits = [numpy_helper.from_array(np.float32(0.02), "s")]
    q_in = ["x", "s"]
    if zp is not None:
        inits.append(numpy_helper.from_array(zp, "z"))
        q_in.append("z")
    nodes = [
        helper.make_node("QuantizeLinear", q_in, ["q"]),
        helper.make_node("DequantizeLinear", ["q", *q_in[1:]], ["d"]),
        helper.make_node("Mul", ["d", "two"], ["y"]),
    ]
    inits.append(numpy_helper.from_array(np.float32(2.0), "two"))
    src = _model(nodes, inits, [1, 8])
    out = dequantize(_copy(src))
    assert ("Relu" in [n.op_type for n in out.graph.node]) is clamps
    x = np.array([[-1.0, -0.3, -0.01, 0.0, 0.01, 0.3, 0.9, 1.2]], np.float32)
    got, want = _run(out, x), _run(src, x)
    np.testing.assert_allclose(got, want, atol=0.02 + 1e-6)  # within one quantization step (x2)
    assert bool(got.min() >= 0) is clamps


def test_fp16_attributes_and_cast_targets_become_float32() -> None:
    half = numpy_helper.from_array(np.array([1.5, -2.0], np.float16), "h")
    nodes = [
        helper.make_node(
            "Constant", [], ["c"], value=numpy_helper.from_array(np.array([0.5, 0.25], np.float16), "cv")
        ),
        helper.make_node("Cast", ["x"], ["xh"], to=TensorProto.FLOAT16),
        helper.make_node("Add", ["xh", "h"], ["a"]),
        helper.make_node("Mul", ["a", "c"], ["y"]),
    ]
    m = _model(nodes, [half], [1, 2])
    m.graph.output[0].type.tensor_type.elem_type = TensorProto.FLOAT16
    assert has_fp16(m)
    out, note = to_float32(_copy(m), "fp16")
    assert note == "FP16 model: converted to FP32 first" and not has_fp16(out)
    cast = next(n for n in out.graph.node if n.op_type == "Cast")
    assert helper.get_attribute_value(cast.attribute[0]) == TensorProto.FLOAT
    x = np.array([[1.0, 3.0]], np.float32)
    np.testing.assert_allclose(_run(out, x), (x + np.array([1.5, -2.0])) * np.array([0.5, 0.25]))
    m32 = fp16_to_fp32(_copy(m))
    assert not has_fp16(m32) and m32.graph.output[0].type.tensor_type.elem_type == TensorProto.FLOAT


def test_a_float_model_is_left_as_it_is() -> None:
    m = _model([helper.make_node("Relu", ["x"], ["y"])], [], [1, 2])
    before = m.SerializeToString()
    out, note = to_float32(m, "fp32")
    assert note == "" and out.SerializeToString() == before


def _every_qoperator_float_model(path: Any) -> Any:
    rng = np.random.default_rng(0)

    def w(name: str, shape: list[int]) -> Any:
        return numpy_helper.from_array(rng.normal(0, 0.3, shape).astype(np.float32), name)

    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Sigmoid", ["c2"], ["s2"]),
        helper.make_node("Mul", ["c2", "s2"], ["m2"]),
        helper.make_node("Add", ["m2", "r1"], ["a2"]),
        helper.make_node("LeakyRelu", ["a2"], ["l2"], alpha=0.1),
        helper.make_node("AveragePool", ["l2"], ["p2"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("MaxPool", ["a2"], ["q2"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Concat", ["p2", "q2"], ["cat"], axis=1),
        helper.make_node("GlobalAveragePool", ["cat"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Gemm", ["f", "w3", "b3"], ["gm"], transB=1),
        helper.make_node("MatMul", ["gm", "w4"], ["y"]),
    ]
    inits = [
        w("w1", [8, 3, 3, 3]),
        w("b1", [8]),
        w("w2", [8, 8, 3, 3]),
        w("w3", [6, 16]),
        w("b3", [6]),
        w("w4", [6, 5]),
    ]
    g = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5])],
        inits,
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return m


QOPS = {
    "QLinearConv",
    "QLinearSigmoid",
    "QLinearMul",
    "QLinearAdd",
    "QLinearLeakyRelu",
    "QLinearAveragePool",
    "QLinearConcat",
    "QLinearGlobalAveragePool",
    "QGemm",
    "QLinearMatMul",
}


@pytest.mark.parametrize("per_channel", [False, True])
def test_every_qoperator_kind_comes_back_as_its_float_op(tmp_path: Any, per_channel: bool) -> None:
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static

    src = _every_qoperator_float_model(tmp_path / "f.onnx")
    rng = np.random.default_rng(1)
    calib = iter([{"x": rng.uniform(-1, 1, (1, 3, 8, 8)).astype(np.float32)} for _ in range(8)])

    class Reader:
        def get_next(self) -> Any:
            return next(calib, None)

    q = tmp_path / "q.onnx"
    quantize_static(
        str(tmp_path / "f.onnx"),
        str(q),
        Reader(),  # type: ignore[arg-type]
        quant_format=QuantFormat.QOperator,
        per_channel=per_channel,
        activation_type=QuantType.QUInt8,
        weight_type=QuantType.QInt8,
    )
    qm = onnx.load(str(q))
    assert {n.op_type for n in qm.graph.node} >= QOPS
    out, note = to_float32(qm, "qoperator_int8")
    assert note.startswith("qoperator int8 model: dequantized back to FP32 first")
    ops = [n.op_type for n in out.graph.node]
    assert not [o for o in ops if o.startswith("Q") or o.endswith("Linear")], ops
    assert {"Conv", "Relu", "Sigmoid", "Mul", "Add", "LeakyRelu", "AveragePool", "MaxPool", "Concat"} <= set(
        ops
    )
    assert {"GlobalAveragePool", "Gemm", "MatMul"} <= set(ops)
    assert out.graph.output[0].type.tensor_type.elem_type == TensorProto.FLOAT
    for seed in range(4):
        x = np.random.default_rng(10 + seed).uniform(-1, 1, (1, 3, 8, 8)).astype(np.float32)
        want = _run(src, x)
        # weights on the int8 grid, activations float: within 3 % of the output's scale
        assert np.abs(_run(out, x) - want).max() < 0.03 * np.abs(want).max()


@pytest.mark.parametrize("op", ["QAttention", "QLinearSoftmax", "ConvIntegerX"])
def test_an_operator_it_cannot_bring_back_is_named(op: str) -> None:
    from edge_agent.errors import QuantizeError

    node = helper.make_node(op, ["x"], ["y"], name="n1", domain="com.microsoft")
    m = _model([node], [], [1, 2])
    if op == "ConvIntegerX":
        node = helper.make_node("MatMulInteger", ["x", "w"], ["y"], name="n1")
        m = _model(
            [node], [numpy_helper.from_array(np.ones((2, 2), np.int8), "w")], [1, 2], TensorProto.UINT8
        )
        with pytest.raises(
            QuantizeError, match=r"^cannot dequantize MatMulInteger 'n1': no Cast -> Mul\(scale\) after it$"
        ):
            dequantize(m)
        return
    with pytest.raises(QuantizeError) as err:
        dequantize(m)
    assert (
        str(err.value)
        == f"cannot dequantize operator {op} (node 'n1'); quantize the FP32/FP16 source instead"
    )


def test_a_channels_last_pool_and_a_computed_scale_are_refused() -> None:
    from edge_agent.errors import QuantizeError

    c = [numpy_helper.from_array(np.float32(0.1), "s"), numpy_helper.from_array(np.uint8(0), "z")]
    pool = helper.make_node(
        "QLinearGlobalAveragePool",
        ["x", "s", "z", "s", "z"],
        ["y"],
        name="gap",
        domain="com.microsoft",
        channels_last=1,
    )
    with pytest.raises(
        QuantizeError, match=r"^cannot dequantize QLinearGlobalAveragePool 'gap' with channels_last$"
    ):
        dequantize(_model([pool], c, [1, 2, 2, 2], TensorProto.UINT8))
    conv = helper.make_node("QLinearConv", ["x", "s", "z", "wq", "xs", "wz", "s", "z"], ["y"], name="cv")
    consts = [
        *c,
        numpy_helper.from_array(np.ones((1, 2, 1, 1), np.int8), "wq"),
        numpy_helper.from_array(np.int8(0), "wz"),
    ]
    relu = helper.make_node("Relu", ["x"], ["xs"])
    with pytest.raises(QuantizeError, match=r"^cannot dequantize: scale 'xs' is not a constant$"):
        dequantize(_model([relu, conv], consts, [1, 2, 2, 2], TensorProto.UINT8))
