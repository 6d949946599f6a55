"""Each operator ``model convert`` lowers node by node, and each it refuses (issue 19).

The promise to a Jetson Nano user: a model converted for onnxruntime 1.11 passes onnx's checker at
opset 16, carries no stamp 1.11 refuses, and computes the same outputs as the original; anything
that has no opset-16 form is one line naming the operator, what it uses and the fix.
"""

from __future__ import annotations

import contextlib
from typing import Any, Optional

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from edge_agent.core.runtime.ort_compat import TABLE, limits_for, refusals
from edge_agent.tools.convert import ConvertError, convert_model, prune_opset_imports, restamp, target_limits

X_SHAPE = [1, 4, 8, 8]


def _model(
    nodes: list[Any],
    inits: Optional[list[Any]] = None,
    opset: int = 20,
    ir: int = 9,
    extra_opsets: Optional[dict[str, int]] = None,
    x_type: int = TensorProto.FLOAT,
) -> Any:
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", x_type, X_SHAPE)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        inits or [],
    )
    imports = [helper.make_opsetid("", opset)]
    imports += [helper.make_opsetid(d, v) for d, v in (extra_opsets or {}).items()]
    m = helper.make_model(graph, opset_imports=imports)
    m.ir_version = ir
    if nodes:
        # the output's shape, which onnx's checker wants on a graph output; a model the test
        # means to be refused may not infer
        with contextlib.suppress(Exception):
            m = onnx.shape_inference.infer_shapes(m, strict_mode=True)
    return m


def _i64(name: str, values: list[int]) -> Any:
    return numpy_helper.from_array(np.array(values, np.int64), name)


def _f32(name: str, values: Any) -> Any:
    return numpy_helper.from_array(np.asarray(values, np.float32), name)


def _run(m: Any, x: np.ndarray) -> np.ndarray:
    s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return np.asarray(s.run(None, {"x": x})[0])


def _x(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=X_SHAPE).astype(np.float32)


def _lowered_like_the_original(m: Any, target: int = 16) -> Any:
    """restamp to ``target``; the result checks at that opset and computes what the original did."""
    src = onnx.ModelProto()
    src.CopyFrom(m)
    restamp(m, target)
    assert {o.domain: o.version for o in m.opset_import}[""] == target
    m.ir_version = 8
    onnx.checker.check_model(m)
    x = _x()
    np.testing.assert_allclose(_run(m, x), _run(src, x), rtol=1e-6, atol=1e-6)
    return m


def _attrs(node: Any) -> dict[str, Any]:
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def test_resize_without_the_new_attributes_is_lowered_and_they_are_dropped() -> None:
    node = helper.make_node(
        "Resize",
        ["x", "", "scales"],
        ["y"],
        mode="nearest",
        antialias=0,
        keep_aspect_ratio_policy="stretch",
        coordinate_transformation_mode="asymmetric",
    )
    out = _lowered_like_the_original(_model([node], [_f32("scales", [1, 1, 2, 2])]))
    assert _attrs(out.graph.node[0]) == {"mode": b"nearest", "coordinate_transformation_mode": b"asymmetric"}


@pytest.mark.parametrize(
    ("attrs", "why"),
    [
        ({"antialias": 1}, "uses antialias/axes"),
        ({"axes": [2, 3]}, "uses antialias/axes"),
        ({"keep_aspect_ratio_policy": "not_larger"}, "uses keep_aspect_ratio_policy"),
        ({"coordinate_transformation_mode": "half_pixel_symmetric"}, "uses half_pixel_symmetric"),
    ],
)
def test_resize_with_a_new_attribute_is_refused_naming_it(attrs: dict[str, Any], why: str) -> None:
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="linear", **attrs)
    m = _model([node], [_f32("scales", [1, 1, 2, 2])])
    with pytest.raises(ConvertError) as err:
        restamp(m, 16)
    assert str(err.value) == (
        f"operator Resize (opset-19 form) {why}: export the model at opset 16 or lower instead (Ultralytics: `yolo export format=onnx opset=16`)"
    )


@pytest.mark.parametrize(
    "op", ["ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSumExp"]
)
def test_reduce_axes_from_an_initializer_become_the_attribute(op: str) -> None:
    node = helper.make_node(op, ["x", "axes"], ["y"], keepdims=1)
    out = _lowered_like_the_original(_model([node], [_i64("axes", [1, 3])]))
    assert list(out.graph.node[0].input) == ["x"]
    assert _attrs(out.graph.node[0]) == {"keepdims": 1, "axes": [1, 3]}


def test_reduce_axes_from_a_constant_node_become_the_attribute() -> None:
    const = helper.make_node("Constant", [], ["axes"], value=_i64("v", [2]))
    node = helper.make_node("ReduceSumSquare", ["x", "axes"], ["y"], keepdims=0)
    out = _lowered_like_the_original(_model([const, node]))
    assert _attrs(out.graph.node[1])["axes"] == [2]


def test_reduce_without_axes_reduces_everything_before_and_after() -> None:
    _lowered_like_the_original(_model([helper.make_node("ReduceLogSum", ["x"], ["y"], keepdims=1)]))


def test_reduce_with_a_constant_node_without_a_value_is_refused() -> None:
    shape = helper.make_node("Shape", ["x"], ["s"], start=2, end=3)
    node = helper.make_node("ReduceMean", ["x", "s"], ["y"])
    with pytest.raises(
        ConvertError, match=r"^operator ReduceMean \(opset-18 form\) takes its axes from a computed tensor"
    ):
        restamp(_model([shape, node]), 16)


def test_reduce_with_computed_or_noop_axes_is_refused() -> None:
    const = helper.make_node(
        "Constant", [], ["axes"], sparse_value=helper.make_sparse_tensor(_i64("v", [1]), _i64("i", [0]), [1])
    )
    with pytest.raises(ConvertError, match="takes its axes from a computed tensor"):
        restamp(_model([const, helper.make_node("ReduceMax", ["x", "axes"], ["y"])]), 16)
    node = helper.make_node("ReduceMax", ["x"], ["y"], noop_with_empty_axes=1)
    with pytest.raises(ConvertError, match=r"ReduceMax \(opset-20 form\) uses noop_with_empty_axes"):
        restamp(_model([node]), 16)


def test_reduce_is_left_alone_for_a_target_that_reads_input_axes() -> None:
    node = helper.make_node("ReduceMean", ["x", "axes"], ["y"], keepdims=1)
    m = _model([node, helper.make_node("IsInf", ["x"], ["inf"])], [_i64("axes", [1])])
    m.graph.node.pop()  # IsInf only made sure this stays a node-by-node case elsewhere
    restamp(m, 18)
    assert list(m.graph.node[0].input) == ["x", "axes"]


def test_pad_constant_mode_is_lowered_and_axes_or_wrap_refused() -> None:
    pads = _i64("pads", [0, 0, 1, 1, 0, 0, 1, 1])
    node = helper.make_node("Pad", ["x", "pads", "value"], ["y"], mode="reflect")
    _lowered_like_the_original(_model([node], [pads, _f32("value", 0.5)]))
    with_axes = helper.make_node("Pad", ["x", "p4", "", "axes"], ["y"])
    with pytest.raises(ConvertError, match=r"^operator Pad \(opset-19 form\) uses axes or wrap mode"):
        restamp(_model([with_axes], [_i64("p4", [1, 1, 1, 1]), _i64("axes", [2, 3])]), 16)
    wrap = helper.make_node("Pad", ["x", "pads"], ["y"], mode="wrap")
    with pytest.raises(ConvertError, match="uses axes or wrap mode"):
        restamp(_model([wrap], [pads]), 16)


def test_average_pool_with_unit_dilations_is_lowered_other_dilations_refused() -> None:
    ok = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[2, 2], dilations=[1, 1])
    out = _lowered_like_the_original(
        _model([ok])
    )  # found: the unit dilations were kept, opset 16 refused them
    assert _attrs(out.graph.node[0]) == {"kernel_shape": [2, 2]}
    _lowered_like_the_original(_model([helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3])]))
    bad = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[2, 2], dilations=[1, 2])
    with pytest.raises(ConvertError, match=r"^operator AveragePool \(opset-19 form\) uses dilations"):
        restamp(_model([bad]), 16)


@pytest.mark.parametrize("saturate", [0, 1])
def test_cast_loses_saturate_and_keeps_its_target_type(saturate: int) -> None:
    """(onnxruntime itself refuses saturate on a non-float8 cast, so the source cannot run here.)"""
    cast = helper.make_node("Cast", ["x"], ["h"], to=TensorProto.FLOAT16, saturate=saturate)
    back = helper.make_node("Cast", ["h"], ["y"], to=TensorProto.FLOAT)
    m = _model([cast, back])
    restamp(m, 16)
    m.ir_version = 8
    onnx.checker.check_model(m)
    assert _attrs(m.graph.node[0]) == {"to": TensorProto.FLOAT16}
    x = _x() * 1000
    np.testing.assert_array_equal(_run(m, x), x.astype(np.float16).astype(np.float32))


def test_quantize_dequantize_pair_is_lowered() -> None:
    q = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"])
    d = helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"])
    _lowered_like_the_original(_model([q, d], [_f32("s", 0.05), numpy_helper.from_array(np.uint8(128), "z")]))


def test_type_only_changes_keep_the_node_as_it_is() -> None:
    shape = helper.make_node("Shape", ["x"], ["s"])
    reshape = helper.make_node("Reshape", ["x", "s"], ["r"])
    ident = helper.make_node("Identity", ["r"], ["y"])
    m = _model([shape, reshape, ident])
    before = [n.SerializeToString() for n in m.graph.node]
    out = _lowered_like_the_original(m)
    assert [n.SerializeToString() for n in out.graph.node] == before


def test_an_operator_changed_otherwise_is_refused_naming_what_its_schema_changed() -> None:
    pool = helper.make_node("LpPool", ["x"], ["y"], kernel_shape=[2, 2], ceil_mode=1)
    with pytest.raises(ConvertError) as err:
        restamp(_model([pool]), 16)
    assert str(err.value) == (
        "operator LpPool (opset-18 form) changed at opset 18 (added attributes ceil_mode, dilations), "
        "which `model convert` has no rewrite for: export the model at opset 16 or lower instead "
        "(Ultralytics: `yolo export format=onnx opset=16`)"
    )


def test_a_type_only_newer_form_is_restamped_and_computes_alike() -> None:
    """IsInf 20 only admits more types (bfloat16, float8): an older form of the same node."""
    inf = helper.make_node("IsInf", ["x"], ["b"])
    cast = helper.make_node("Cast", ["b"], ["y"], to=TensorProto.FLOAT)
    _lowered_like_the_original(_model([inf, cast]))


def test_an_operator_newer_than_the_target_is_refused_naming_both_opsets() -> None:
    gelu = helper.make_node("Gelu", ["x"], ["y"])
    with pytest.raises(ConvertError) as err:
        restamp(_model([gelu]), 16)
    assert str(err.value) == (
        "operator Gelu does not exist before opset 20 (the target reads <= 16): export the model at "
        "opset 16 or lower instead (Ultralytics: `yolo export format=onnx opset=16`)"
    )


def test_unknown_operators_and_subgraphs_are_refused() -> None:
    with pytest.raises(ConvertError, match=r"^operator NoSuchOp is unknown at opset 20$"):
        restamp(_model([helper.make_node("NoSuchOp", ["x"], ["y"])]), 16)
    branch = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["o"])],
        "b",
        [],
        [helper.make_tensor_value_info("o", TensorProto.FLOAT, None)],
    )
    cond = helper.make_node("If", ["c"], ["y"], name="gate", then_branch=branch, else_branch=branch)
    with pytest.raises(ConvertError, match=r"^operator If \(gate\) has a subgraph: cannot lower it$"):
        restamp(_model([cond], [numpy_helper.from_array(np.array(True), "c")]), 16)


def test_other_domains_are_left_to_their_own_stamp() -> None:
    ms = helper.make_node("FusedGemm", ["x", "x"], ["y"], domain="com.microsoft")
    m = _model([ms], extra_opsets={"com.microsoft": 1})
    restamp(m, 16)
    assert {o.domain: o.version for o in m.opset_import} == {"": 16, "com.microsoft": 1}


def test_unused_domains_are_pruned_used_ones_and_function_domains_kept() -> None:
    relu = helper.make_node("Relu", ["x"], ["y"])
    m = _model([relu], extra_opsets={"ai.onnx.ml": 5, "com.microsoft": 1, "local": 1, "fn.dom": 1})
    fn = helper.make_function(
        "local",
        "MyRelu",
        ["a"],
        ["b"],
        [helper.make_node("Relu", ["a"], ["b"])],
        [helper.make_opsetid("", 20)],
    )
    m.functions.append(fn)
    fn2 = helper.make_function(
        "other", "F", ["a"], ["b"], [helper.make_node("G", ["a"], ["b"], domain="fn.dom")], []
    )
    m.functions.append(fn2)
    dropped = prune_opset_imports(m)
    assert sorted(dropped) == ["ai.onnx.ml", "com.microsoft"]
    assert {o.domain: o.version for o in m.opset_import} == {"": 20, "local": 1, "fn.dom": 1}


def test_an_ml_opset_newer_than_the_target_is_refused_naming_the_operator_and_the_limit() -> None:
    norm = helper.make_node("Normalizer", ["x"], ["y"], domain="ai.onnx.ml", norm="MAX")
    m = _model([norm], opset=16, ir=8, extra_opsets={"ai.onnx.ml": 4})
    with pytest.raises(ConvertError) as err:
        convert_model(m, "1.11")
    assert str(err.value) == (
        "operator Normalizer (ai.onnx.ml opset 4) is newer than onnxruntime 1.11 reads (ai.onnx.ml <= 3)"
    )
    m2 = _model([norm], opset=16, ir=8, extra_opsets={"ai.onnx.ml": 3})
    m2.graph.output[0].type.CopyFrom(m2.graph.input[0].type)
    assert {o.domain: o.version for o in convert_model(m2, "1.11").opset_import}["ai.onnx.ml"] == 3


def test_an_opset_one_above_the_target_is_lowered_and_loads_alike() -> None:
    """opset 17 for 1.11 (16): the converter's path; the log says which path it took."""
    relu = helper.make_node("Relu", ["x"], ["y"])
    lines: list[str] = []
    out = convert_model(_model([relu], opset=17, ir=8), "1.11", lines.append)
    assert (out.ir_version, {o.domain: o.version for o in out.opset_import}) == (8, {"": 16})
    assert lines == ["opset 17 -> 16 (onnx version converter)"]
    x = _x()
    np.testing.assert_array_equal(_run(out, x), np.maximum(x, 0))


def test_the_node_by_node_path_is_logged_with_the_converter_s_reason() -> None:
    axes = _i64("axes", [1])
    m = _model([helper.make_node("ReduceMax", ["x", "axes"], ["y"], keepdims=1)], [axes], ir=10)
    lines: list[str] = []
    out = convert_model(m, "1.11", lines.append)
    assert out.ir_version == 8 and {o.domain: o.version for o in out.opset_import} == {"": 16}
    assert not refusals(out.ir_version, {"": 16}, TABLE[5])
    x = _x()
    np.testing.assert_allclose(_run(out, x), _run(m, x))
    assert any(line.startswith("opset 20 -> 16 (") for line in lines), lines


def test_unused_ml_import_is_dropped_and_logged() -> None:
    m = _model([helper.make_node("Relu", ["x"], ["y"])], opset=16, ir=8, extra_opsets={"ai.onnx.ml": 5})
    lines: list[str] = []
    out = convert_model(m, "1.11", lines.append)
    assert lines == ["dropped unused opset imports: ai.onnx.ml"]
    assert {o.domain: o.version for o in out.opset_import} == {"": 16}
    assert [o.domain for o in m.opset_import] == ["", "ai.onnx.ml"]  # the input model is not touched


@pytest.mark.parametrize(("ir", "kept"), [(7, 7), (8, 8), (9, 8), (10, 8)])
def test_ir_is_lowered_to_the_target_and_never_raised(ir: int, kept: int) -> None:
    m = _model([helper.make_node("Relu", ["x"], ["y"])], opset=13, ir=ir)
    assert convert_model(m, "1.11").ir_version == kept


@pytest.mark.parametrize("where", ["initializer", "input"])
def test_a_tensor_type_newer_than_the_target_ir_is_refused_naming_it(where: str) -> None:
    if where == "initializer":
        f8 = helper.make_tensor("w", TensorProto.FLOAT8E4M3FN, [1], [1.0])
        m = _model([helper.make_node("Relu", ["x"], ["y"])], [f8], opset=16, ir=9)
    else:
        m = _model([helper.make_node("Identity", ["x"], ["y"])], opset=16, ir=10, x_type=TensorProto.INT4)
    t, need = (17, 9) if where == "initializer" else (22, 10)
    with pytest.raises(ConvertError) as err:
        convert_model(m, "1.11")
    assert str(err.value) == f"tensor element type {t} needs IR {need}; the target runtime reads IR <= 8"


def test_a_newer_ir_type_is_fine_for_a_target_that_reads_it() -> None:
    f8 = helper.make_tensor("w", TensorProto.FLOAT8E4M3FN, [1], [1.0])
    m = _model([helper.make_node("Relu", ["x"], ["y"])], [f8], opset=19, ir=10)
    assert convert_model(m, "1.16").ir_version == 9


@pytest.mark.parametrize(
    ("target", "row"),
    [
        ("1.11", "1.11"),
        ("1.11.1", "1.11"),
        ("1.13", "1.13"),
        ("1.99", TABLE[-1].name),
        ("1.2", TABLE[0].name),
    ],
)
def test_target_limits_rows(target: str, row: str) -> None:
    assert target_limits(target).name == row
    if limits_for(target) is not None:
        assert target_limits(target) == limits_for(target)


@pytest.mark.parametrize("target", ["", "eleven", "v1.11"])
def test_target_limits_refuses_what_is_not_a_version(target: str) -> None:
    with pytest.raises(ConvertError) as err:
        target_limits(target)
    assert str(err.value) == (
        f"--target-ort {target!r}: expected an onnxruntime version such as 1.11 or 1.16"
    )


def test_a_model_the_checker_refuses_after_lowering_is_one_line() -> None:
    relu = helper.make_node("Relu", ["x"], ["y"])
    m = _model([relu, helper.make_node("Relu", ["x"], ["y"])], opset=16, ir=8)  # y written twice
    with pytest.raises(ConvertError) as err:
        convert_model(m, "1.11")
    assert str(err.value).startswith("the converted model does not check at opset 16: ")
    assert "\n" not in str(err.value)


def test_the_main_opset_is_kept_when_only_other_domains_have_nodes() -> None:
    norm = helper.make_node("Normalizer", ["x"], ["y"], domain="ai.onnx.ml", norm="MAX")
    m = _model([norm], opset=16, ir=8, extra_opsets={"ai.onnx.ml": 3, "com.microsoft": 1})
    assert prune_opset_imports(m) == ["com.microsoft"]
    assert {o.domain: o.version for o in m.opset_import} == {"": 16, "ai.onnx.ml": 3}


def test_a_model_without_a_main_opset_import_converts() -> None:
    norm = helper.make_node("Normalizer", ["x"], ["y"], domain="ai.onnx.ml", norm="MAX")
    m = _model([norm], opset=16, ir=8, extra_opsets={"ai.onnx.ml": 3})
    m.graph.output[0].type.CopyFrom(m.graph.input[0].type)
    del m.opset_import[0]
    out = convert_model(m, "1.11")
    assert {o.domain: o.version for o in out.opset_import} == {"ai.onnx.ml": 3}


def test_several_unused_imports_are_named_in_one_line() -> None:
    m = _model(
        [helper.make_node("Relu", ["x"], ["y"])],
        opset=16,
        ir=8,
        extra_opsets={"ai.onnx.ml": 5, "com.microsoft": 1},
    )
    lines: list[str] = []
    convert_model(m, "1.11", lines.append)
    assert lines == ["dropped unused opset imports: ai.onnx.ml, com.microsoft"]


def test_the_axes_constant_is_the_one_named_not_the_first_constant() -> None:
    other = helper.make_node("Constant", [], ["zero"], value=_i64("z", [0]))
    const = helper.make_node("Constant", [], ["axes"], value=_i64("v", [2]))
    node = helper.make_node("ReduceMax", ["x", "axes"], ["r"], keepdims=1)
    add = helper.make_node("Add", ["r", "zf"], ["y"])
    out = _lowered_like_the_original(_model([other, const, node, add], [_f32("zf", 0.0)]))
    assert _attrs(out.graph.node[2])["axes"] == [2]


def test_split_with_num_outputs_is_refused_with_its_reason() -> None:
    split = helper.make_node("Split", ["x"], ["a", "b"], axis=1, num_outputs=2)
    with pytest.raises(ConvertError) as err:
        restamp(_model([split, helper.make_node("Add", ["a", "b"], ["y"])]), 16)
    assert str(err.value) == (
        "operator Split (opset-18 form) uses num_outputs: export the model at opset 16 or lower instead (Ultralytics: `yolo export format=onnx opset=16`)"
    )


def test_an_empty_axes_attribute_on_resize_is_dropped() -> None:
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="nearest")
    node.attribute.append(onnx.AttributeProto(name="axes", type=onnx.AttributeProto.INTS))
    m = _model([node], [_f32("scales", [1, 1, 2, 2])])
    restamp(m, 16)
    assert "axes" not in _attrs(m.graph.node[0])
    m.ir_version = 8
    onnx.checker.check_model(m)


def test_reduce_keeps_its_axes_input_for_an_opset_18_target() -> None:
    """ReduceMax changed at 20 (not its axes): lowered to 18, the axes stay an input, as 18 reads them."""
    node = helper.make_node("ReduceMax", ["x", "axes"], ["y"], keepdims=1)
    m = _model([node], [_i64("axes", [1])])
    out = _lowered_like_the_original(m, target=18)
    assert list(out.graph.node[0].input) == ["x", "axes"] and "axes" not in _attrs(out.graph.node[0])


def test_lowering_goes_on_past_other_domains_and_unchanged_nodes() -> None:
    ms = helper.make_node("FusedGemm", ["x", "x"], ["f"], domain="com.microsoft")
    relu = helper.make_node("Relu", ["x"], ["r"])
    red = helper.make_node("ReduceMax", ["r", "axes"], ["y"], keepdims=1)
    m = _model([ms, relu, red], [_i64("axes", [1])], extra_opsets={"com.microsoft": 1})
    restamp(m, 16)
    assert list(m.graph.node[2].input) == ["r"] and _attrs(m.graph.node[2])["axes"] == [1]


@pytest.mark.parametrize("op", ["QuantizeLinear", "CastLike"])
def test_saturate_is_dropped_from_quantize_and_castlike(op: str) -> None:
    if op == "QuantizeLinear":
        node = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], saturate=1)
        tail = helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"])
        inits = [_f32("s", 0.05), numpy_helper.from_array(np.uint8(128), "z")]
    else:
        node = helper.make_node("CastLike", ["x", "like"], ["q"], saturate=1)
        tail = helper.make_node("Cast", ["q"], ["y"], to=TensorProto.FLOAT)
        inits = [numpy_helper.from_array(np.array([1], np.float16), "like")]
    m = _model([node, tail], inits)
    restamp(m, 16)
    assert "saturate" not in _attrs(m.graph.node[0])
    m.ir_version = 8
    onnx.checker.check_model(m)
    x = _x() * 3
    want = np.clip(np.round(x / 0.05) + 128, 0, 255) - 128 if op == "QuantizeLinear" else x.astype(np.float16)
    scale = 0.05 if op == "QuantizeLinear" else 1.0
    np.testing.assert_allclose(_run(m, x), want.astype(np.float32) * scale, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(
    ("op", "attrs", "why"),
    [
        ("DequantizeLinear", {"block_size": 2}, "block_size"),
        ("QuantizeLinear", {"output_dtype": TensorProto.UINT8}, "output_dtype"),
        ("QuantizeLinear", {"block_size": 4, "output_dtype": TensorProto.INT8}, "block_size"),
    ],
)
def test_opset_21_quantization_attributes_are_refused_naming_the_first(
    op: str, attrs: dict[str, Any], why: str
) -> None:
    node = helper.make_node(op, ["x", "s"], ["y"], **attrs)
    m = _model([node], [_f32("s", [0.1])], opset=21)
    with pytest.raises(ConvertError) as err:
        restamp(m, 16)
    assert str(err.value) == (
        f"operator {op} (opset-21 form) uses {why}: export the model at opset 16 or lower instead (Ultralytics: `yolo export format=onnx opset=16`)"
    )


def test_an_unnamed_node_with_a_subgraph_is_named_by_a_question_mark() -> None:
    branch = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["o"])],
        "b",
        [],
        [helper.make_tensor_value_info("o", TensorProto.FLOAT, None)],
    )
    loop = helper.make_node("If", ["c"], ["y"], then_branch=branch, else_branch=branch)
    with pytest.raises(ConvertError, match=r"^operator If \(\?\) has a subgraph: cannot lower it$"):
        restamp(_model([loop], [numpy_helper.from_array(np.array(True), "c")]), 16)


def _split18() -> Any:
    split = helper.make_node("Split", ["x", "split"], ["a", "b"], axis=1)
    cat = helper.make_node("Concat", ["b", "a"], ["y"], axis=1)
    return _model([split, cat], [_i64("split", [1, 3])])


def test_the_node_by_node_path_names_what_the_converter_said() -> None:
    src = _split18()
    lines: list[str] = []
    out = convert_model(src, "1.11", lines.append)
    assert lines == [
        "opset 20 -> 16 (node by node; onnx's version converter said: No Adapter From Version 18 for Split)"
    ]
    x = _x()
    np.testing.assert_array_equal(_run(out, x), _run(src, x))


def test_the_checker_s_reason_is_in_the_refusal() -> None:
    relu = helper.make_node("Relu", ["x"], ["y"])
    m = _model([relu, helper.make_node("Relu", ["x"], ["y"])], opset=16, ir=8)
    with pytest.raises(ConvertError) as err:
        convert_model(m, "1.11")
    assert str(err.value) == (
        "the converted model does not check at opset 16: Graph must be in single static assignment (SSA) form, "
        "however 'y' has been used as output names multiple times."
    )
