"""An operator form the installed onnxruntime has no kernel for: one line naming the operator, the
runtime and the fix, not ORT's raw ``NOT_IMPLEMENTED : Could not find an implementation for ...``."""

from __future__ import annotations

from pathlib import Path

import onnx
import onnxruntime as ort
import pytest
from hypothesis import given
from hypothesis import strategies as st
from onnx import TensorProto, helper

from edge_agent.adapters.runtime.onnx_model import OnnxModel
from edge_agent.core.runtime.ort_compat import kernel_refusal
from edge_agent.errors import ModelError

# what onnxruntime 1.16.3 said (its first line, which is all the adapter keeps)
RAW = "[ONNXRuntimeError] : 9 : NOT_IMPLEMENTED : Could not find an implementation for Add(14) node with name ''"


def test_the_raw_1_16_3_message_becomes_one_line_with_the_runtime_and_the_fix() -> None:
    assert kernel_refusal("/models/m.onnx", RAW, "1.16.3") == (
        "/models/m.onnx: onnxruntime 1.16.3 has no kernel for operator Add (opset-14 form) with this "
        "model's tensor types; convert it on a PC with `edge-agent model convert /models/m.onnx "
        "--target-ort 1.16 -o ./m-ort1.16.onnx` (older operator forms), or export the model with "
        "float32 tensors if it uses a type this runtime lacks (bfloat16, float8)"
    )


def test_the_node_name_is_given_when_the_model_has_one() -> None:
    raw = "NOT_IMPLEMENTED : Could not find an implementation for MaxPool(22) node with name '/model.9/m/MaxPool'"
    line = kernel_refusal("y.onnx", raw, "1.20.1")
    assert line is not None and "operator MaxPool (opset-22 form, node '/model.9/m/MaxPool')" in line
    assert "--target-ort 1.20 -o ./y-ort1.20.onnx" in line


@given(st.text(max_size=200))
def test_any_other_message_is_left_to_the_caller(text: str) -> None:
    if "Could not find an implementation for" not in text:
        assert kernel_refusal("m.onnx", text, "1.16.3") is None


def test_a_real_model_without_a_kernel_here_is_refused_in_that_one_line(tmp_path: Path) -> None:
    """bfloat16 Add: onnx defines it (Add 14), the installed onnxruntime's CPU provider has no kernel."""
    g = helper.make_graph(
        [helper.make_node("Add", ["x", "x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.BFLOAT16, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.BFLOAT16, [1, 4])],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
    m.ir_version = 8
    path = tmp_path / "bf16.onnx"
    onnx.save(m, str(path))
    with pytest.raises(ModelError) as err:
        OnnxModel(path, provider="cpu", warmup=False)
    line = str(err.value)
    target = ".".join(ort.__version__.split(".")[:2])
    assert line.startswith(
        f"{path}: onnxruntime {ort.__version__} has no kernel for operator Add (opset-14 form)"
    )
    assert f"--target-ort {target}" in line and "\n" not in line and "NOT_IMPLEMENTED" not in line
