"""Dequantizing what onnxruntime's own quantizers write (issue 19): dynamic INT8 MatMul and Conv with
per-tensor and per-channel weights (int8 and uint8), a QDQ graph whose output is a
DequantizeLinear, FP16 types everywhere. The float copy is compared with numpy's arithmetic on
the dequantized weights, so a scale on the wrong axis or a zero point dropped fails."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from edge_agent.tools.dequantize import dequantize, fp16_to_fp32, has_fp16, to_float32


def _run(m: Any, feeds: dict[str, np.ndarray]) -> np.ndarray:
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return np.asarray(s.run(None, feeds)[0])


def _float_model(node: Any, w: np.ndarray, x_shape: list[int], y_shape: list[int]) -> Any:
    g = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)],
        [numpy_helper.from_array(w, "w")],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def _dynamic(tmp_path: Path, m: Any, per_channel: bool, wtype: str, ops: list[str]) -> Any:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    onnx.save(m, str(tmp_path / "f.onnx"))
    quantize_dynamic(
        str(tmp_path / "f.onnx"),
        str(tmp_path / "d.onnx"),
        per_channel=per_channel,
        weight_type=getattr(QuantType, wtype),
        op_types_to_quantize=ops,
    )
    return onnx.load(str(tmp_path / "d.onnx"))


def _weight(q: Any, axis: int) -> np.ndarray:
    """The quantized model's weight as the int grid says: (w_q - zp) * scale along ``axis``."""
    inits = {i.name: numpy_helper.to_array(i) for i in q.graph.initializer}
    wq = next(v for k, v in inits.items() if k.endswith("_quantized"))
    s = next(v for k, v in inits.items() if k.endswith("_scale") and k.startswith("w"))
    z = next(v for k, v in inits.items() if k.endswith("_zero_point") and k.startswith("w"))
    shape = [1] * wq.ndim
    shape[axis] = s.size
    out: np.ndarray = (wq.astype(np.float32) - z.astype(np.float32).reshape(shape)) * s.reshape(shape)
    return out


@pytest.mark.parametrize("wtype", ["QInt8", "QUInt8"])
@pytest.mark.parametrize("per_channel", [False, True])
def test_a_dynamic_matmul_comes_back_with_its_weights_per_column(
    tmp_path: Path, per_channel: bool, wtype: str
) -> None:
    rng = np.random.default_rng(0)
    # columns of very different magnitude: a per-column scale applied per row is far off
    w = (rng.normal(0, 1, (6, 5)) * np.linspace(0.1, 3, 5)).astype(np.float32)
    src = _float_model(helper.make_node("MatMul", ["x", "w"], ["y"]), w, [2, 6], [2, 5])
    q = _dynamic(tmp_path, src, per_channel, wtype, ["MatMul"])
    assert "MatMulInteger" in [n.op_type for n in q.graph.node]
    wd = _weight(q, 1)
    out, note = to_float32(q, "dynamic_int8")
    assert note.startswith("dynamic int8 model: dequantized back to FP32 first")
    # the scale products and DynamicQuantizeLinear are gone, only the float weight is left
    assert [n.op_type for n in out.graph.node] == ["MatMul", "Identity"]
    assert [numpy_helper.to_array(i).dtype for i in out.graph.initializer] == [np.float32]
    x = rng.normal(0, 1, (2, 6)).astype(np.float32)
    np.testing.assert_allclose(_run(out, {"x": x}), x @ wd, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(_run(out, {"x": x}), x @ w, atol=0.05 * np.abs(x @ w).max())


@pytest.mark.parametrize("per_channel", [False, True])
def test_a_dynamic_conv_comes_back_as_onnxruntime_writes_it(tmp_path: Path, per_channel: bool) -> None:
    rng = np.random.default_rng(1)
    w = (rng.normal(0, 1, (4, 3, 3, 3)) * np.array([0.05, 0.5, 1.0, 4.0]).reshape(4, 1, 1, 1)).astype(
        np.float32
    )
    conv = helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])
    src = _float_model(conv, w, [1, 3, 6, 6], [1, 4, 6, 6])
    # onnxruntime 1.32 writes one scale per Conv even with per_channel (the per-channel form is the
    # hand-made model of test_a_dynamic_conv_with_per_channel_scales_comes_back)
    q = _dynamic(tmp_path, src, per_channel, "QUInt8", ["Conv"])
    assert "ConvInteger" in [n.op_type for n in q.graph.node]
    wd = _weight(q, 0)
    out, _ = to_float32(q, "dynamic_int8")
    assert [n.op_type for n in out.graph.node] == ["Conv", "Identity"]
    x = rng.normal(0, 1, (1, 3, 6, 6)).astype(np.float32)
    np.testing.assert_allclose(
        _run(out, {"x": x}), _run(_float_model(conv, wd, [1, 3, 6, 6], [1, 4, 6, 6]), {"x": x}), atol=1e-4
    )
    # the padding (an attribute of the ConvInteger) is kept: same output shape and close to the float
    want = _run(src, {"x": x})
    assert np.abs(_run(out, {"x": x}) - want).max() < 0.05 * np.abs(want).max()


def test_a_graph_output_made_by_a_dequantize_linear_is_kept_as_float(tmp_path: Path) -> None:
    """QDQ around the last op: the output name stays, its type becomes float, the clamp stays."""
    s = numpy_helper.from_array(np.float32(0.05), "s")
    z = numpy_helper.from_array(np.uint8(128), "z")
    nodes = [
        helper.make_node("Mul", ["x", "x"], ["sq"]),
        helper.make_node("QuantizeLinear", ["sq", "s", "z"], ["q"]),
        helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"]),
    ]
    g = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
        [s, z],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    out = dequantize(m)
    assert [n.op_type for n in out.graph.node] == ["Mul", "Identity"]
    assert [o.name for o in out.graph.output] == ["y"] and not list(out.graph.initializer)
    x = np.array([[-3.0, -0.5, 0.5, 2.0]], np.float32)
    np.testing.assert_allclose(_run(out, {"x": x}), x * x)


def test_fp16_inputs_value_info_and_dtype_attributes_become_float32() -> None:
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("EyeLike", ["r"], ["e"], dtype=TensorProto.FLOAT16),
        helper.make_node("Add", ["r", "e"], ["y"]),
    ]
    g = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [2, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [2, 2])],
        value_info=[helper.make_tensor_value_info("r", TensorProto.FLOAT16, [2, 2])],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    assert has_fp16(m)  # no initializer at all: found by the input's type
    fp16_to_fp32(m)
    assert not has_fp16(m)
    assert m.graph.value_info[0].type.tensor_type.elem_type == TensorProto.FLOAT
    assert m.graph.input[0].type.tensor_type.elem_type == TensorProto.FLOAT
    x = np.array([[-1.0, 2.0], [3.0, -4.0]], np.float32)
    np.testing.assert_allclose(_run(m, {"x": x}), np.maximum(x, 0) + np.eye(2, dtype=np.float32))


def test_has_fp16_looks_at_initializers_inputs_and_outputs() -> None:
    def model(init_dt: Any, in_t: int, out_t: int) -> Any:
        g = helper.make_graph(
            [helper.make_node("Identity", ["x"], ["y"])],
            "g",
            [helper.make_tensor_value_info("x", in_t, [1])],
            [helper.make_tensor_value_info("y", out_t, [1])],
            [numpy_helper.from_array(np.zeros(1, init_dt), "k")],
        )
        return helper.make_model(g)

    f, h = TensorProto.FLOAT, TensorProto.FLOAT16
    assert not has_fp16(model(np.float32, f, f))
    assert has_fp16(model(np.float16, f, f))
    assert has_fp16(model(np.float32, h, f))
    assert has_fp16(model(np.float32, f, h))


def test_a_quantized_model_with_fp16_parts_gets_both_steps() -> None:
    """A 'mixed' or INT8 model that also carries FP16 tensors: FP16 fixed, then dequantized."""
    nodes = [
        helper.make_node("DequantizeLinear", ["wq", "ws"], ["w"]),
        helper.make_node("Cast", ["w"], ["wh"], to=TensorProto.FLOAT16),
        helper.make_node("Cast", ["wh"], ["wf"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["x", "wf"], ["m"]),
        helper.make_node("Add", ["m", "h"], ["y"]),
    ]
    g = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])],
        [
            numpy_helper.from_array(np.array([10, -20], np.int8), "wq"),
            numpy_helper.from_array(np.float32(0.5), "ws"),
            numpy_helper.from_array(np.array([0.25, 0.5], np.float32), "h"),
        ],
    )
    g.initializer.append(numpy_helper.from_array(np.array([1.0, 1.0], np.float16), "unused16"))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    for kind in ("mixed", "qdq_int8"):
        mm = onnx.ModelProto()
        mm.CopyFrom(m)
        out, note = to_float32(mm, kind)
        assert note.startswith(f"{kind.replace('_', ' ')} model: dequantized back to FP32 first")
        assert not has_fp16(out) and "DequantizeLinear" not in [n.op_type for n in out.graph.node]
        # no float16 left anywhere, not even as a Cast target in the middle of the graph
        casts = [helper.get_attribute_value(n.attribute[0]) for n in out.graph.node if n.op_type == "Cast"]
        assert casts == [TensorProto.FLOAT, TensorProto.FLOAT]
        x = np.array([[1.0, 2.0]], np.float32)
        np.testing.assert_allclose(_run(out, {"x": x}), x * np.array([5.0, -10.0]) + np.array([0.25, 0.5]))


@pytest.mark.parametrize("zp", [0, 3])
def test_a_dynamic_conv_with_per_channel_scales_comes_back(zp: int) -> None:
    """A per-output-channel dynamic INT8 Conv as it must be written to compute: scales ``[C, 1, 1]``
    (the Mul after the Cast broadcasts over NCHW) and one zero point for all channels. Its float copy
    failed with a numpy broadcast error, reported as "quantization failed in onnxruntime"."""
    rng = np.random.default_rng(2)
    w = (rng.normal(0, 1, (4, 3, 3, 3)) * np.array([0.05, 0.5, 1.0, 4.0]).reshape(4, 1, 1, 1)).astype(
        np.float32
    )
    s = (np.abs(w).reshape(4, -1).max(1) / 120).astype(np.float32)
    wq = (np.round(w / s.reshape(4, 1, 1, 1)) + zp).astype(np.int8)
    nodes = [
        helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]),
        helper.make_node("Mul", ["xs", "ws"], ["sprod"]),
        helper.make_node("ConvInteger", ["xq", "wq", "xz", "wz"], ["ci"], pads=[1, 1, 1, 1]),
        helper.make_node("Cast", ["ci"], ["cf"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["cf", "sprod"], ["y"]),
    ]
    inits = [
        numpy_helper.from_array(wq, "wq"),
        numpy_helper.from_array(s.reshape(4, 1, 1), "ws"),
        numpy_helper.from_array(np.int8(zp), "wz"),
    ]
    g = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 6, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 6, 6])],
        inits,
    )
    q = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    q.ir_version = 8
    x = rng.normal(0, 1, (1, 3, 6, 6)).astype(np.float32)
    want = _run(q, {"x": x})  # the INT8 model itself (activations quantized on the fly)
    out, _ = to_float32(q, "dynamic_int8")
    assert [n.op_type for n in out.graph.node] == ["Conv", "Identity"]
    wd = (wq.astype(np.float32) - zp) * s.reshape(4, 1, 1, 1)
    conv = helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])
    exact = _run(_float_model(conv, wd, [1, 3, 6, 6], [1, 4, 6, 6]), {"x": x})
    np.testing.assert_allclose(_run(out, {"x": x}), exact, atol=1e-4)
    assert np.abs(_run(out, {"x": x}) - want).max() < 0.03 * np.abs(want).max()


def _graph_model(
    nodes: list[Any],
    inits: list[Any],
    x_shape: list[int],
    y_shape: Any = None,
    x_type: int = TensorProto.FLOAT,
) -> Any:
    g = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", x_type, x_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)],
        inits,
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def test_a_qdq_weight_given_by_constant_nodes_is_folded() -> None:
    """PyTorch's QDQ export gives weights, scales and zero points as Constant nodes, not initializers."""
    wq = np.array([[10, -20, 30], [40, 50, -60]], np.int8)
    consts = {"wq": wq, "ws": np.float32(0.5), "wz": np.int8(4)}
    nodes = [
        helper.make_node("Constant", [], [k], value=numpy_helper.from_array(v, f"{k}_value"))
        for k, v in consts.items()
    ]
    nodes += [
        helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["w"]),
        helper.make_node("MatMul", ["x", "w"], ["y"]),
    ]
    m = _graph_model(nodes, [], [1, 2])
    out = dequantize(m)
    assert [n.op_type for n in out.graph.node] == ["MatMul"]
    x = np.array([[1.0, 2.0]], np.float32)
    np.testing.assert_allclose(_run(out, {"x": x}), x @ ((wq.astype(np.float32) - 4) * 0.5))


def _conv_integer_model(
    w_zero_point: bool, scale_from_input: bool = False, computed_weight: bool = False
) -> Any:
    nodes = [helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"])]
    nodes.append(helper.make_node("Mul", ["xs", "sx" if scale_from_input else "ws"], ["sprod"]))
    w_in = "wq"
    if computed_weight:
        nodes.append(helper.make_node("Neg", ["wq"], ["wneg"]))
        w_in = "wneg"
    ins = ["xq", w_in, "xz"] + (["wz"] if w_zero_point else [])
    nodes += [
        helper.make_node("ConvInteger", ins, ["ci"], name="ci"),
        helper.make_node("Cast", ["ci"], ["cf"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["cf", "sprod"], ["y"]),
    ]
    inits = [
        numpy_helper.from_array(np.array([[[[3]], [[-5]]], [[[7]], [[2]]]], np.int8), "wq"),
        numpy_helper.from_array(np.float32(0.25), "ws"),
        numpy_helper.from_array(np.int8(1), "wz"),
    ]
    m = _graph_model(nodes, inits, [1, 2, 3, 3], [1, 2, 3, 3])
    if scale_from_input:
        m.graph.input.append(helper.make_tensor_value_info("sx", TensorProto.FLOAT, []))
    return m


@pytest.mark.parametrize("w_zero_point", [False, True])
def test_a_conv_integer_with_or_without_its_weight_zero_point(w_zero_point: bool) -> None:
    """ConvInteger's w_zero_point is optional (three inputs): absent means 0."""
    m = _conv_integer_model(w_zero_point)
    out, _ = to_float32(m, "dynamic_int8")
    zp = 1.0 if w_zero_point else 0.0
    w = (np.array([[[[3]], [[-5]]], [[[7]], [[2]]]], np.float32) - zp) * 0.25
    x = np.random.default_rng(3).normal(0, 1, (1, 2, 3, 3)).astype(np.float32)
    exact = _run(
        _float_model(helper.make_node("Conv", ["x", "w"], ["y"]), w, [1, 2, 3, 3], [1, 2, 3, 3]), {"x": x}
    )
    np.testing.assert_allclose(_run(out, {"x": x}), exact, atol=1e-5)


def test_a_conv_integer_it_cannot_read_is_refused_in_one_line() -> None:
    from edge_agent.errors import QuantizeError

    with pytest.raises(QuantizeError) as e:
        dequantize(_conv_integer_model(True, scale_from_input=True))
    assert str(e.value) == "cannot dequantize ConvInteger 'ci': weight scale not found"
    with pytest.raises(QuantizeError) as e:
        dequantize(_conv_integer_model(True, computed_weight=True))
    assert str(e.value) == "cannot dequantize: weight 'wneg' is not a constant"


def test_two_conv_integers_on_one_quantized_input_keep_their_own_weights() -> None:
    """Both ConvIntegers read the same DynamicQuantizeLinear (and its zero point): each float Conv
    gets its own weight, never the other one's."""
    nodes = [
        helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]),
        helper.make_node("Mul", ["xs", "ws"], ["sprod"]),
    ]
    for k in ("a", "b"):
        nodes += [
            helper.make_node("ConvInteger", ["xq", f"w{k}", "xz"], [f"ci{k}"]),
            helper.make_node("Cast", [f"ci{k}"], [f"cf{k}"], to=TensorProto.FLOAT),
            helper.make_node("Mul", [f"cf{k}", "sprod"], [f"y{k}"]),
        ]
    nodes.append(helper.make_node("Concat", ["ya", "yb"], ["y"], axis=1))
    wa = np.array([[[[2]], [[0]]]], np.int8)
    wb = np.array([[[[0]], [[-3]]]], np.int8)
    inits = [
        numpy_helper.from_array(wa, "wa"),
        numpy_helper.from_array(wb, "wb"),
        numpy_helper.from_array(np.float32(0.5), "ws"),
    ]
    out, _ = to_float32(_graph_model(nodes, inits, [1, 2, 2, 2], [1, 2, 2, 2]), "dynamic_int8")
    x = np.arange(8, dtype=np.float32).reshape(1, 2, 2, 2)
    got = _run(out, {"x": x})
    np.testing.assert_allclose(got[:, 0], x[:, 0] * 1.0)
    np.testing.assert_allclose(got[:, 1], x[:, 1] * -1.5)


def test_two_channels_are_per_channel_too() -> None:
    """Two scales and two zero points along axis 0 of a [2, 3] weight (not broadcast on the last axis)."""
    wq = np.array([[10, 20, 30], [-10, -20, -30]], np.int8)
    inits = [
        numpy_helper.from_array(wq, "wq"),
        numpy_helper.from_array(np.array([0.5, 2.0], np.float32), "ws"),
        numpy_helper.from_array(np.array([1, -1], np.int8), "wz"),
    ]
    nodes = [
        helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["w"], axis=0),
        helper.make_node("Gemm", ["x", "w"], ["y"], transB=1),
    ]
    out = dequantize(_graph_model(nodes, inits, [1, 3]))
    x = np.array([[1.0, 1.0, 1.0]], np.float32)
    want = x @ ((wq.astype(np.float32) - np.array([[1], [-1]])) * np.array([[0.5], [2.0]])).T
    np.testing.assert_allclose(_run(out, {"x": x}), want)


def test_fp16_leaves_integer_casts_alone() -> None:
    """Only float16 types become float32: a Cast to int64 (indices, shapes) stays int64."""
    nodes = [
        helper.make_node("Cast", ["x"], ["xi"], to=TensorProto.INT64),
        helper.make_node("Cast", ["xi"], ["xh"], to=TensorProto.FLOAT16),
        helper.make_node("Cast", ["xh"], ["y"], to=TensorProto.FLOAT),
    ]
    m = _graph_model(nodes, [numpy_helper.from_array(np.zeros(1, np.float16), "unused")], [1, 3])
    fp16_to_fp32(m)
    assert [helper.get_attribute_value(n.attribute[0]) for n in m.graph.node] == [
        TensorProto.INT64,
        TensorProto.FLOAT,
        TensorProto.FLOAT,
    ]
    x = np.array([[1.7, -2.2, 3.9]], np.float32)
    np.testing.assert_allclose(_run(m, {"x": x}), np.trunc(x))


def test_a_qlinear_matmul_with_a_constant_uint8_operand_keeps_its_zero_point() -> None:
    """QOperator with a constant operand quantized as an activation (uint8, zero point 128)."""
    s = numpy_helper.from_array
    b = np.array([[128, 200], [10, 128]], np.uint8)
    inits = [
        s(np.float32(0.1), "xs"),
        s(np.uint8(128), "xz"),
        s(b, "bq"),
        s(np.float32(0.05), "bs"),
        s(np.uint8(128), "bz"),
        s(np.float32(0.05), "ys"),
        s(np.uint8(128), "yz"),
    ]
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
        helper.make_node("QLinearMatMul", ["xq", "xs", "xz", "bq", "bs", "bz", "ys", "yz"], ["yq"]),
        helper.make_node("DequantizeLinear", ["yq", "ys", "yz"], ["y"]),
    ]
    q = _graph_model(nodes, inits, [1, 2])
    x = np.array([[1.0, -0.5]], np.float32)
    out = dequantize(_graph_model(nodes, inits, [1, 2]))
    want = x @ ((b.astype(np.float32) - 128) * 0.05)
    np.testing.assert_allclose(_run(out, {"x": x}), want, atol=1e-6)
    np.testing.assert_allclose(_run(q, {"x": x}), want, atol=0.026)  # the INT8 model, within an output step


def test_a_constant_operand_with_a_computed_scale_is_refused_naming_the_scale() -> None:
    from edge_agent.errors import QuantizeError

    s = numpy_helper.from_array
    inits = [s(np.float32(0.1), "xs"), s(np.uint8(128), "z"), s(np.array([[1, 2]], np.uint8), "bq")]
    nodes = [
        helper.make_node("Relu", ["xs"], ["bs"]),
        helper.make_node(
            "QLinearAdd",
            ["x", "xs", "z", "bq", "bs", "z", "xs", "z"],
            ["y"],
            domain="com.microsoft",
            name="add",
        ),
    ]
    with pytest.raises(QuantizeError) as e:
        dequantize(_graph_model(nodes, inits, [1, 2], x_type=TensorProto.UINT8))
    assert str(e.value) == "cannot dequantize: scale 'bs' is not a constant"


def test_a_per_channel_dequantize_linear_without_axis_uses_axis_1() -> None:
    """The operator's default axis is 1: four column scales of a [3, 4] MatMul weight."""
    wq = np.arange(12, dtype=np.int8).reshape(3, 4) - 6
    s = np.array([0.1, 0.2, 0.4, 0.8], np.float32)
    inits = [numpy_helper.from_array(wq, "wq"), numpy_helper.from_array(s, "ws")]
    nodes = [
        helper.make_node("DequantizeLinear", ["wq", "ws"], ["w"]),
        helper.make_node("MatMul", ["x", "w"], ["y"]),
    ]
    out = dequantize(_graph_model(nodes, inits, [1, 3]))
    x = np.array([[1.0, -1.0, 2.0]], np.float32)
    np.testing.assert_allclose(_run(out, {"x": x}), x @ (wq.astype(np.float32) * s), rtol=1e-6)
