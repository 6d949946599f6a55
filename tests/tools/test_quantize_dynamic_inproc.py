"""``quantize_dynamic_model`` in process (tools/quantize_dynamic.py): the INT8 copy, its metadata
and comparison figures, and every refusal leaving no file behind. test_tensor_models.py runs it
through the CLI in a subprocess, which mutation testing cannot see (issue 36, tools-quantize-dynamic)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper
from support.layouts import make_sensor_model, make_text_classifier

from edge_agent.adapters.runtime.onnx_model import OnnxModel
from edge_agent.errors import QuantizeError
from edge_agent.tools.quantize_dynamic import quantize_dynamic_model


@pytest.fixture(scope="module")
def text(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_text_classifier(tmp_path_factory.mktemp("t") / "text.onnx", hidden=32, layers=1)


def test_a_token_model_gets_an_int8_copy_compared_with_fp32(text: Path, tmp_path: Path) -> None:
    out = tmp_path / "text-int8.onnx"
    r = quantize_dynamic_model(text, out, seq_len=16, checks=3)
    assert r.output == out and r.checks == 3 and out.is_file()
    model = onnx.load(str(out))
    ops = [n.op_type for n in model.graph.node]
    assert r.quantized_ops == ops.count("MatMulInteger") + ops.count("DynamicQuantizeMatMul") > 0
    meta = {p.key: p.value for p in model.metadata_props}
    assert json.loads(meta["quantization"]) == {"format": "dynamic", "weight_type": "int8"}
    src_meta = {p.key: p.value for p in onnx.load(str(text)).metadata_props}
    assert all(meta[k] == v for k, v in src_meta.items())  # the source's metadata is kept
    # measured here 0.079 and 3 of 3 (2 classes, seeds 0-2); INT8 rounding differs per host
    assert 0.0 < r.max_rel_diff < 1.0 and 2 / 3 <= r.top1_agreement <= 1.0
    assert OnnxModel(out, provider="cpu", warmup=False).info.quant_kind != "fp32"
    line = r.line()
    assert f"-> {out}: {r.quantized_ops} integer ops" in line and "on 3 generated inputs" in line
    assert line.startswith(
        "dynamic INT8 (weights int8, activations quantized per run; convolutions left float)"
    )
    assert line.endswith(" (check it on real data before shipping)")  # generated inputs are no data
    assert sorted(p.name for p in tmp_path.iterdir()) == ["text-int8.onnx"]  # no partial file left


def test_an_int8_model_is_refused_as_already_quantized(text: Path, tmp_path: Path) -> None:
    once = tmp_path / "once.onnx"
    quantize_dynamic_model(text, once, seq_len=8, checks=1)
    with pytest.raises(QuantizeError, match=r"once\.onnx: is already .*needs the FP32 model"):
        quantize_dynamic_model(once, tmp_path / "twice.onnx")
    assert not (tmp_path / "twice.onnx").exists()


def _tiny(path: Path, opset: int, matmul: bool) -> Path:
    """x [1, 8] float -> (MatMul by a constant 8 x 4 | Relu) -> y: valid at any opset >= 7."""
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 8])
    if matmul:
        w = numpy_helper.from_array(
            np.tile(np.arange(1, 5, dtype=np.float32), (8, 1)), "w"
        )  # y_j = j * sum(x)
        node, inits, shape = helper.make_node("MatMul", ["x", "w"], ["y"]), [w], [1, 4]
    else:
        node, inits, shape = helper.make_node("Relu", ["x"], ["y"]), [], [1, 8]
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, shape)
    graph = helper.make_graph([node], "tiny", [x], [y], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 7
    onnx.save(model, str(path))
    return path


def test_a_model_without_matmul_weights_is_refused_and_leaves_nothing(tmp_path: Path) -> None:
    src = _tiny(tmp_path / "relu.onnx", 13, matmul=False)
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(QuantizeError, match=r"relu\.onnx: no MatMul/Gemm with constant weights"):
        quantize_dynamic_model(src, out / "q.onnx", checks=1)
    assert list(out.iterdir()) == []


def test_an_old_opset_is_refused_in_one_line_and_opset_11_is_taken(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    old = _tiny(tmp_path / "old.onnx", 10, matmul=True)
    with pytest.raises(QuantizeError, match=r"old\.onnx: opset 10; dynamic quantization needs opset >= 11"):
        quantize_dynamic_model(old, out / "q.onnx")
    assert list(out.iterdir()) == []
    r = quantize_dynamic_model(_tiny(tmp_path / "new.onnx", 11, matmul=True), out / "q.onnx")
    assert r.quantized_ops == 1 and (out / "q.onnx").is_file() and r.checks == 8  # the default


def test_the_opset_is_the_default_domain_s_by_either_name_and_none_is_opset_0(tmp_path: Path) -> None:
    """The default domain is "" or "ai.onnx" in a model's opset imports; a model importing only
    another domain has no default opset at all: refused as opset 0, in one line."""
    for name, domain in (("named", "ai.onnx"), ("none", "com.example")):
        m = onnx.load(str(_tiny(tmp_path / f"{name}.onnx", 13, matmul=True)))
        del m.opset_import[:]
        m.opset_import.append(helper.make_opsetid(domain, 13 if domain == "ai.onnx" else 1))
        onnx.save(m, str(tmp_path / f"{name}.onnx"))
    assert quantize_dynamic_model(tmp_path / "named.onnx", tmp_path / "q.onnx", checks=1).quantized_ops == 1
    with pytest.raises(QuantizeError, match=r"none\.onnx: opset 0; dynamic quantization needs opset >= 11$"):
        quantize_dynamic_model(tmp_path / "none.onnx", tmp_path / "q2.onnx")
    assert not (tmp_path / "q2.onnx").exists()


def test_an_output_folder_that_does_not_exist_is_refused_first(text: Path, tmp_path: Path) -> None:
    with pytest.raises(QuantizeError, match="does not exist"):
        quantize_dynamic_model(text, tmp_path / "nope" / "q.onnx")


def test_convolutions_are_left_float(tmp_path: Path) -> None:
    """The sensor model: Conv1d then a MatMul head; only the MatMul becomes integer (ConvInteger is
    slower than float on CPUs, docs/performance.md)."""
    out = tmp_path / "q.onnx"
    r = quantize_dynamic_model(make_sensor_model(tmp_path / "sensor.onnx"), out, checks=1)
    ops = [n.op_type for n in onnx.load(str(out)).graph.node]
    assert "Conv" in ops and "ConvInteger" not in ops and r.quantized_ops == ops.count("MatMulInteger") >= 1


@pytest.mark.parametrize(
    ("error", "says"),
    [
        (RuntimeError("[ONNXRuntimeError] bad graph\n  at node 7"), "[ONNXRuntimeError] bad graph"),
        (ValueError(""), "ValueError"),
    ],
)
def test_an_onnxruntime_failure_is_one_line_and_leaves_nothing(
    text: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: Exception, says: str
) -> None:
    import onnxruntime.quantization

    def fails(*args: object, **kwargs: object) -> None:
        raise error

    monkeypatch.setattr(onnxruntime.quantization, "quantize_dynamic", fails)
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(QuantizeError) as exc:
        quantize_dynamic_model(text, out / "q.onnx")
    assert str(exc.value) == f"{text}: dynamic quantization failed in onnxruntime: {says}"
    assert list(out.iterdir()) == []


def test_an_interrupt_is_not_turned_into_an_error_line(
    text: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import onnxruntime.quantization

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(onnxruntime.quantization, "quantize_dynamic", interrupted)
    with pytest.raises(KeyboardInterrupt):
        quantize_dynamic_model(text, tmp_path / "q.onnx")
    assert list(tmp_path.iterdir()) == []


def test_the_figures_are_those_of_both_models_on_the_generated_inputs(text: Path, tmp_path: Path) -> None:
    """The line a user reads before shipping: the largest |fp32 - int8| over the largest |fp32|,
    and the share of inputs whose top class agrees, on ``checks`` inputs of ``seq_len`` tokens
    generated from seeds 0, 1, 2... (recomputed here from the two files)."""
    from edge_agent.tools.bench import synthetic_feeds

    out = tmp_path / "q.onnx"
    r = quantize_dynamic_model(text, out, seq_len=24, checks=3)
    ref = OnnxModel(text, provider="cpu", warmup=False)
    cand = OnnxModel(out, provider="cpu", warmup=False)
    rels, agree = [], 0
    for seed in range(3):
        feeds = synthetic_feeds(ref, 24, seed=seed)
        assert feeds["input_ids"].shape[1] == 24
        a, b = (np.asarray(m.run(feeds)[0], np.float64) for m in (ref, cand))
        rels.append(float(np.max(np.abs(a - b)) / np.max(np.abs(a))))
        agree += int(np.array_equal(a.argmax(1), b.argmax(1)))
    assert r.max_rel_diff == pytest.approx(max(rels), rel=1e-9)
    assert r.top1_agreement == pytest.approx(agree / 3)


def test_both_models_are_compared_on_the_cpu_and_nothing_is_left_in_the_working_folder(
    text: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The figures are the CPU's whatever the board (dynamic INT8 is a CPU format: a GPU provider
    would measure another kernel); the float copy it quantizes from lives in a temp folder."""
    from edge_agent.adapters.runtime import onnx_model

    opened: list[Any] = []

    class Recorded(onnx_model.OnnxModel):  # the real model, recorded
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            opened.append(self)

    monkeypatch.setattr(onnx_model, "OnnxModel", Recorded)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    out = tmp_path / "q.onnx"
    quantize_dynamic_model(text, out, seq_len=8, checks=1)
    assert len(opened) == 2 and opened[0].path == text
    assert [m.info.provider_reason for m in opened] == ["override: cpu", "override: cpu"]
    assert list(cwd.iterdir()) == [] and sorted(p.name for p in tmp_path.iterdir()) == ["cwd", "q.onnx"]


def test_the_inputs_are_128_tokens_long_by_default(text: Path, tmp_path: Path) -> None:
    """What `edge-agent quantize` compares on: 128 tokens, a BERT-sized sequence (shorter inputs
    hide the attention's error growth)."""
    from edge_agent.tools.bench import synthetic_feeds

    out = tmp_path / "q.onnx"
    r = quantize_dynamic_model(text, out, checks=2)
    ref = OnnxModel(text, provider="cpu", warmup=False)
    cand = OnnxModel(out, provider="cpu", warmup=False)
    rels = []
    for seed in range(2):
        feeds = synthetic_feeds(ref, 128, seed=seed)
        a, b = (np.asarray(m.run(feeds)[0], np.float64) for m in (ref, cand))
        rels.append(float(np.max(np.abs(a - b)) / np.max(np.abs(a))))
    assert r.max_rel_diff == pytest.approx(max(rels), rel=1e-9)
