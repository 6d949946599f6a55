"""``quantize``'s options reach the quantizer and the calibration is the one given (issue 19).

Each is read back from the INT8 model itself: the input's activation scale is what the
calibration images imply, ``--reduce-range`` leaves 7-bit weights, ``--method`` changes the
activation ranges, the FP32 copy of a quantized source is the model the INT8 one was made from.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper

from edge_agent.adapters.runtime.onnx_model import OnnxModel
from edge_agent.tools.quantize import image_files, quantize_model


def _inits(m: Any) -> dict[str, np.ndarray]:
    return {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}


def _input_scale(path: Path) -> float:
    m = onnx.load(str(path))
    q = next(n for n in m.graph.node if n.op_type == "QuantizeLinear" and n.input[0] == "images")
    return float(_inits(m)[q.input[1]])


def _flat(folder: Path, values: list[int]) -> list[Path]:
    """Uniform 64x64 images (the toy detector's size: no letterbox padding in the range)."""
    folder.mkdir()
    out = []
    for i, v in enumerate(values):
        p = folder / f"{i}.png"
        cv2.imwrite(str(p), np.full((64, 64, 3), v, np.uint8))
        out.append(p)
    return out


@pytest.mark.parametrize("brightest", [90, 200])
def test_the_input_range_is_the_calibration_images(toy_dir: Path, tmp_path: Path, brightest: int) -> None:
    files = _flat(tmp_path / "calib", [10, brightest, 40])
    out = tmp_path / "q.onnx"
    res = quantize_model(toy_dir / "toy-fp32.onnx", out, files, progress=False)
    # uint8 activations, min/max calibration: the range 0 .. brightest/255 over 255 steps
    assert _input_scale(out) == pytest.approx(brightest / 255 / 255, rel=1e-3)
    assert res.samples == 3
    assert (
        json.loads({p.key: p.value for p in onnx.load(str(out)).metadata_props}["quantization"])["samples"]
        == 3
    )


def _conv_weights(path: Path) -> list[np.ndarray]:
    m = onnx.load(str(path))
    inits = _inits(m)
    return [
        inits[n.input[0]]
        for n in m.graph.node
        if n.op_type == "DequantizeLinear"
        and inits.get(n.input[0]) is not None
        and inits[n.input[0]].dtype == np.int8
    ]


@pytest.mark.parametrize("reduce_range", [False, True])
def test_reduce_range_gives_seven_bit_weights(toy_dir: Path, tmp_path: Path, reduce_range: bool) -> None:
    out = tmp_path / "q.onnx"
    quantize_model(
        toy_dir / "toy-fp32.onnx",
        out,
        image_files(toy_dir / "calib")[:4],
        reduce_range=reduce_range,
        progress=False,
        target="arm64",
    )
    weights = _conv_weights(out)
    assert weights, "no int8 weights in the quantized model"
    peak = max(int(np.abs(w.astype(np.int32)).max()) for w in weights)
    assert peak == (64 if reduce_range else 127)
    q = json.loads({p.key: p.value for p in onnx.load(str(out)).metadata_props}["quantization"])
    assert q["reduce_range"] is reduce_range and q["target"] == "arm64"
    assert (q["activation_type"], q["weight_type"]) == ("uint8", "int8 per-channel")


def _scales(path: Path) -> dict[str, float]:
    m = onnx.load(str(path))
    inits = _inits(m)
    return {n.input[0]: float(inits[n.input[1]]) for n in m.graph.node if n.op_type == "QuantizeLinear"}


def test_the_calibration_method_changes_the_ranges(toy_dir: Path, tmp_path: Path) -> None:
    files = image_files(toy_dir / "calib")
    got = {}
    for method in ("minmax", "percentile"):
        out = tmp_path / f"{method}.onnx"
        quantize_model(toy_dir / "toy-fp32.onnx", out, files, method=method, progress=False)  # type: ignore[arg-type]
        got[method] = _scales(out)
    assert got["minmax"].keys() == got["percentile"].keys()
    # the 99.999th percentile clips the extremes: never wider, narrower somewhere
    assert all(got["percentile"][k] <= got["minmax"][k] * (1 + 1e-6) for k in got["minmax"])
    assert any(got["percentile"][k] < got["minmax"][k] * 0.999 for k in got["minmax"])


def test_a_quantized_source_leaves_its_float_copy_the_int8_model_was_made_from(
    quant_models: dict[str, Path], tmp_path: Path
) -> None:
    files = _flat(tmp_path / "calib", [30, 120, 220])
    out, copy = tmp_path / "q.onnx", tmp_path / "float.onnx"
    quantize_model(quant_models["qdq_int8"], out, files, progress=False, float_copy=copy)
    ref = OnnxModel(copy, warmup=False)
    assert ref.info.quant_kind == "fp32"
    # the float model the QDQ one was quantized from, on the int8 weight grid: within its error
    x = np.random.default_rng(0).uniform(0, 1, (1, 3, 32, 32)).astype(np.float32)
    fp32 = ort.InferenceSession(str(quant_models["fp32"]), providers=["CPUExecutionProvider"])
    want = fp32.run(None, {fp32.get_inputs()[0].name: x})[0]
    got = ref.run_single(x)[0]
    assert np.abs(got - want).max() < 0.05 * np.abs(want).max(), (got, want)
    meta = {p.key: p.value for p in onnx.load(str(out)).metadata_props}
    q = json.loads(meta["quantization"])
    assert q["source_quantization"] == "qdq_int8" and "dequantized back to FP32" in q["source_note"]
    assert q["source"] == quant_models["qdq_int8"].name


def test_an_fp32_source_writes_no_float_copy(toy_dir: Path, tmp_path: Path) -> None:
    copy = tmp_path / "float.onnx"
    out = tmp_path / "q.onnx"
    quantize_model(
        toy_dir / "toy-fp32.onnx", out, _flat(tmp_path / "c", [50, 150]), progress=False, float_copy=copy
    )
    assert not copy.exists() and out.is_file()
    q = json.loads({p.key: p.value for p in onnx.load(str(out)).metadata_props}["quantization"])
    assert "source_note" not in q and q["source_quantization"] == "fp32" and "target_ort" not in q
