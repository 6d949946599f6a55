"""``edge-agent model convert`` / ``quantize --target-ort``: models an older onnxruntime loads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from support.toolchain import toy_detector_model

from edge_agent.adapters.runtime.onnx_model import OnnxModel
from edge_agent.app.cli.main import main
from edge_agent.errors import ModelError
from edge_agent.tools.convert import ConvertError, convert_model
from edge_agent.tools.quantize import image_files, quantize_model


def _stamps(m: Any) -> tuple[int, dict[str, int]]:
    return m.ir_version, {o.domain: o.version for o in m.opset_import}


def _run(m: Any, x: np.ndarray) -> np.ndarray:
    s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return np.asarray(s.run(None, {s.get_inputs()[0].name: x})[0])


def _one_op(op: str, opset: int, inputs: list[str], inits: list[Any], **attrs: Any) -> Any:
    node = helper.make_node(op, ["x", *inputs], ["y"], **attrs)
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        inits,
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 9
    return m


def test_opset_20_detector_is_lowered_for_1_11_with_identical_outputs() -> None:
    src = toy_detector_model(opset=20)  # Split 18, IR 9: onnx's converter has no adapter from Split 18
    out = convert_model(src, "1.11")
    assert _stamps(out) == (8, {"": 16})
    x = np.random.default_rng(0).uniform(0, 1, (1, 3, 64, 64)).astype(np.float32)
    np.testing.assert_array_equal(_run(src, x), _run(out, x))


def test_reduce_axes_input_becomes_the_old_attribute() -> None:
    axes = numpy_helper.from_array(np.array([2, 3], np.int64), "axes")
    src = _one_op("ReduceMean", 18, ["axes"], [axes], keepdims=1)
    out = convert_model(src, "1.11")
    node = out.graph.node[0]
    assert list(node.input) == ["x"] and helper.get_attribute_value(node.attribute[-1]) == [2, 3]
    x = np.random.default_rng(1).normal(size=(1, 4, 8, 8)).astype(np.float32)
    np.testing.assert_allclose(_run(src, x), _run(out, x), rtol=1e-6)


@pytest.mark.parametrize(
    ("model", "op"),
    [
        (
            _one_op("LayerNormalization", 17, ["s"], [numpy_helper.from_array(np.ones(8, np.float32), "s")]),
            "LayerNormalization",
        ),
        (_one_op("Split", 18, [], [], axis=1, num_outputs=2), "Split"),
    ],
)
def test_refused_in_one_line_naming_the_operator(model: Any, op: str) -> None:
    with pytest.raises(ConvertError) as err:
        convert_model(model, "1.11")
    assert f"operator {op}" in str(err.value) and "\n" not in str(err.value)


def test_cli_converts_validates_and_refuses(toy_dir: Path, tmp_path: Path, capsys: Any) -> None:
    src = tmp_path / "toy20.onnx"
    onnx.save(toy_detector_model(opset=20), str(src))
    out = tmp_path / "toy-ort1.11.onnx"
    rc = main(
        [
            "model",
            "convert",
            str(src),
            "--target-ort",
            "1.11",
            "-o",
            str(out),
            "--images",
            str(toy_dir / "val"),
        ]
    )
    text = capsys.readouterr().out
    assert (
        rc == 0
        and "IR 9, opset 20 -> IR 8, opset 16; loads on onnxruntime >= 1.11" in text
        and "PASS" in text
    )
    bad = tmp_path / "ln.onnx"
    onnx.save(
        _one_op("LayerNormalization", 17, ["s"], [numpy_helper.from_array(np.ones(8, np.float32), "s")]),
        str(bad),
    )
    rc = main(["model", "convert", str(bad), "--target-ort", "1.11", "-o", str(tmp_path / "x.onnx")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 1 and len(err) == 1 and "LayerNormalization" in err[0]
    assert not (tmp_path / "x.onnx").exists()


@pytest.mark.parametrize("opset", [20, 22])
def test_quantize_for_a_nano_stamps_only_what_1_11_reads(toy_dir: Path, tmp_path: Path, opset: int) -> None:
    """22: Conv in its opset-22 form, which quantize --target-ort 1.11 refused ("Conv ... no older form")."""
    src = tmp_path / "toy20.onnx"
    onnx.save(toy_detector_model(opset=opset), str(src))
    out = tmp_path / "toy.int8.onnx"
    res = quantize_model(src, out, image_files(toy_dir / "calib")[:4], progress=False, target_ort="1.11")
    assert _stamps(onnx.load(str(out))) == (8, {"": 16})  # no ai.onnx.ml 5 & co. from the quantizer
    assert res.settings["target_ort"] == "1.11"
    assert {n.op_type for n in onnx.load(str(out)).graph.node} >= {"QuantizeLinear", "DequantizeLinear"}


class _OldOrt:
    """The installed onnxruntime claiming to be the Nano's 1.11.1: the refusal comes before any session."""

    __version__ = "1.11.1"

    def get_available_providers(self) -> list[str]:
        return ["CPUExecutionProvider"]


def test_load_on_an_old_runtime_names_ir_opset_and_the_convert_command(tmp_path: Path) -> None:
    src = tmp_path / "new.onnx"
    onnx.save(toy_detector_model(opset=20), str(src))
    with pytest.raises(ModelError) as err:
        OnnxModel(src, ort_module=_OldOrt(), warmup=False)
    msg = str(err.value)
    assert "IR 9 > 8" in msg and "opset 20 > 16" in msg and "onnxruntime 1.11.1" in msg
    assert f"edge-agent model convert {src} --target-ort 1.11" in msg and "\n" not in msg


def test_inspect_names_ir_opset_and_the_oldest_runtime(tmp_path: Path, capsys: Any) -> None:
    src = tmp_path / "new.onnx"
    onnx.save(toy_detector_model(opset=20), str(src))
    assert main(["inspect", str(src)]) == 0
    assert "onnx         IR 9, opset 20: loads on onnxruntime >= 1.17\n" in capsys.readouterr().out
    assert main(["inspect", str(src), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert (info["ir_version"], info["min_onnxruntime"], info["loads_here"]) == (9, "1.17", True)


def test_cli_writes_the_converted_model_through_the_durable_helper(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """Complete or absent, then the directory fsync'd (adapters/host/durable.py), mode 0644 whatever the umask."""
    import stat

    from edge_agent.adapters.host import durable

    synced: list[Path] = []
    monkeypatch.setattr(durable, "fsync_dir", lambda p: synced.append(Path(p)))
    src = tmp_path / "toy20.onnx"
    onnx.save(toy_detector_model(opset=20), str(src))
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = out_dir / "toy-ort1.11.onnx"
    args = ["model", "convert", str(src), "--target-ort", "1.11", "-o", str(out), "--no-validate"]
    assert main(args) == 0, capsys.readouterr().err
    assert synced == [out_dir] and [p.name for p in out_dir.iterdir()] == [out.name]
    assert stat.S_IMODE(out.stat().st_mode) == 0o644
    assert onnx.load(str(out)).opset_import[0].version == 16
