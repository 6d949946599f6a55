"""``quantize`` takes what users have: FP16, dynamic INT8, QOperator and QDQ INT8 are brought back to
FP32 first (with a line saying so), and no failure leaves a file under the output name."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from edge_agent.adapters.runtime.onnx_model import OnnxModel
from edge_agent.app.cli.main import main
from edge_agent.errors import QuantizeError
from edge_agent.tools.dequantize import dequantize, to_float32
from edge_agent.tools.quantize import image_files, preprocess_for_quantization, quantize_model
from edge_agent.tools.validate import validate_models


class _Reader:
    def __init__(self, files: list[Path]) -> None:
        from edge_agent.adapters.camera.images import read_image
        from edge_agent.core.vision.preprocess import preprocess_detector

        self.data = iter([{"images": preprocess_detector(read_image(f), (64, 64))[0]} for f in files])

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self.data, None)


@pytest.fixture(scope="module")
def variants(toy_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The toy detector as users bring it: FP16, dynamic INT8 (ConvInteger), QOperator INT8."""
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_dynamic, quantize_static
    from onnxruntime.transformers.float16 import convert_float_to_float16

    d = tmp_path_factory.mktemp("variants")
    fp32 = toy_dir / "toy-fp32.onnx"
    out = {
        "fp16": d / "toy-fp16.onnx",
        "dynamic_int8": d / "toy-dyn.onnx",
        "qoperator_int8": d / "toy-qop.onnx",
    }
    onnx.save(convert_float_to_float16(onnx.load(str(fp32)), keep_io_types=False), str(out["fp16"]))
    quantize_dynamic(
        str(fp32), str(out["dynamic_int8"]), weight_type=QuantType.QUInt8, op_types_to_quantize=["Conv"]
    )
    calib = image_files(toy_dir / "calib")
    quantize_static(
        str(fp32),
        str(out["qoperator_int8"]),
        _Reader(calib),
        quant_format=QuantFormat.QOperator,
        per_channel=True,
    )
    return out


@pytest.mark.parametrize("kind", ["fp16", "dynamic_int8", "qoperator_int8"])
def test_each_input_kind_is_brought_back_to_float_and_quantized(
    variants: dict[str, Path], toy_dir: Path, tmp_path: Path, kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    src = variants[kind]
    assert OnnxModel(src, warmup=False).info.quant_kind == kind
    out = tmp_path / "out.onnx"
    rc = main(
        [
            "quantize",
            str(src),
            "--calib",
            str(toy_dir / "calib"),
            "--val",
            str(toy_dir / "val"),
            "-o",
            str(out),
        ]
    )
    err = capsys.readouterr().err
    assert rc == 0, err
    assert ("converted to FP32 first" if kind == "fp16" else "dequantized back to FP32 first") in err
    if kind != "fp16":
        assert "bounded by the original quantization" in err
    meta = {p.key: p.value for p in onnx.load(str(out)).metadata_props}
    q = json.loads(meta["quantization"])
    assert q["format"] == "QDQ" and q["source_quantization"] == kind and meta["task"] == "detect"
    assert OnnxModel(out, warmup=False).info.quant_kind == "qdq_int8"
    # and it holds the FP32 original's detections, not just its own source's
    rep = validate_models(
        toy_dir / "toy-fp32.onnx", out, image_files(toy_dir / "val"), toy_dir / "val", show_progress=False
    )
    assert rep.passed, rep.format_table()


def test_dequantized_models_compute_what_their_source_computes(
    variants: dict[str, Path], toy_dir: Path
) -> None:
    x = np.random.default_rng(0).uniform(0, 1, (1, 3, 64, 64)).astype(np.float32)
    for kind in ("dynamic_int8", "qoperator_int8"):
        m, _ = to_float32(onnx.load(str(variants[kind])), kind)
        onnx.checker.check_model(m)
        assert not {n.op_type for n in m.graph.node} & {"ConvInteger", "QLinearConv", "DynamicQuantizeLinear"}
        f = ort.InferenceSession(m.SerializeToString()).run(None, {"images": x})[0]
        ref = ort.InferenceSession(str(toy_dir / "toy-fp32.onnx")).run(None, {"images": x})[0]
        # the float copy computes the FP32 original's scores and boxes, up to the int8 weight grid (the
        # QOperator model itself quantized the output Concat: its scores move in steps of 0.23)
        assert np.abs(f[:, 4:] - ref[:, 4:]).max() < 0.02, kind
        assert np.abs(f[:, :4] - ref[:, :4]).max() < 1.0, kind


def test_an_op_that_cannot_be_dequantized_is_named(tmp_path: Path) -> None:
    from onnx import TensorProto, helper

    node = helper.make_node(
        "QLinearSoftmax", ["x", "s", "z", "s", "z"], ["y"], domain="com.microsoft", name="sm"
    )
    g = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.UINT8, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.UINT8, [1, 4])],
        [
            onnx.numpy_helper.from_array(np.array(0.1, np.float32), "s"),
            onnx.numpy_helper.from_array(np.array(0, np.uint8), "z"),
        ],
    )
    with pytest.raises(QuantizeError, match=r"cannot dequantize operator QLinearSoftmax .node 'sm'"):
        dequantize(helper.make_model(g))


def test_a_failure_inside_onnxruntime_leaves_nothing(
    toy_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """quantize_static writes half a file and raises (as it does on an FP16 graph): no out.onnx, no
    debris, and one line naming the model instead of onnxruntime's bare exception."""
    import onnxruntime.quantization as oq

    def half_written(_src: str, dst: str, *_a: object, **_k: object) -> None:
        Path(dst).write_bytes(b"\x08\x07partial")
        raise RuntimeError("[ONNXRuntimeError] : 1 : FAIL : Type Error: simulated")

    monkeypatch.setattr(oq, "quantize_static", half_written)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    with pytest.raises(
        QuantizeError, match=r"toy-fp32.onnx: quantization failed in onnxruntime: .*simulated"
    ):
        quantize_model(
            toy_dir / "toy-fp32.onnx", out_dir / "x.onnx", image_files(toy_dir / "calib"), progress=False
        )
    assert list(out_dir.iterdir()) == []


def test_an_existing_output_survives_a_failed_run(toy_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "x.onnx"
    out.write_bytes(b"the previous good model")
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "a.jpg").write_bytes(b"not a jpeg")
    with pytest.raises(Exception, match=r"a\.jpg"):
        quantize_model(toy_dir / "toy-fp32.onnx", out, image_files(bad), progress=False)
    assert out.read_bytes() == b"the previous good model"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad", "x.onnx"]


# ---- quant_pre_process without sympy (onnxruntime >= 1.32 no longer installs it) ------------------

_PRE = """
import sys
{block}
from pathlib import Path
from edge_agent.tools.quantize import preprocess_for_quantization
import logging; logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
preprocess_for_quantization(Path(sys.argv[1]), Path(sys.argv[2]))
import onnx; onnx.checker.check_model(sys.argv[2]); print("PREPROCESSED")
"""
_BLOCK = """
class _NoSympy:
    def find_spec(self, name, path=None, target=None):
        if name == "sympy" or name.startswith("sympy."):
            raise ImportError("sympy made unimportable by the test")
sys.meta_path.insert(0, _NoSympy())
"""
# an importable sympy whose use fails: onnxruntime's symbolic shape inference raises half way,
# after quant_pre_process has already touched its input -- the retry must start from the file
_BROKEN = """
import types
fake = types.ModuleType("sympy")
def _broken(*a, **k):
    raise RuntimeError("sympy stand-in: symbolic shape inference fails here")
fake.__getattr__ = lambda name: _broken
sys.modules["sympy"] = fake
import importlib.machinery; fake.__spec__ = importlib.machinery.ModuleSpec("sympy", None)
"""


def _pre(block: str, src: Path, dst: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _PRE.format(block=block), str(src), str(dst)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=str(dst.parent),
    )


def test_preprocess_with_sympy_unimportable(toy_dir: Path, tmp_path: Path) -> None:
    r = _pre(_BLOCK, toy_dir / "toy-fp32.onnx", tmp_path / "pre.onnx")
    assert r.returncode == 0 and "PREPROCESSED" in r.stdout, r.stderr
    assert "without symbolic shape inference" in r.stderr


def test_preprocess_retries_from_the_file_when_symbolic_inference_fails(
    toy_dir: Path, tmp_path: Path
) -> None:
    """The bug: the retry reused the ModelProto the first attempt had moved to external data in a temp
    dir (ValidationError: 'Data of TensorProto ... should be stored in .../foo.bin')."""
    r = _pre(_BROKEN, toy_dir / "toy-fp32.onnx", tmp_path / "pre.onnx")
    assert r.returncode == 0 and "PREPROCESSED" in r.stdout, r.stderr
    assert "symbolic shape inference failed" in r.stderr and "pre-processing without it" in r.stderr
    assert "foo.bin" not in r.stderr


def test_preprocess_with_real_sympy(toy_dir: Path, tmp_path: Path) -> None:
    try:
        import sympy  # noqa: F401
    except ImportError:
        pytest.skip(
            "sympy is not installed here (onnxruntime >= 1.32 does not pull it in); the branches above run"
        )
    r = _pre("", toy_dir / "toy-fp32.onnx", tmp_path / "pre.onnx")
    assert r.returncode == 0 and "PREPROCESSED" in r.stdout, r.stderr
    assert "symbolic shape inference failed" not in r.stderr


def test_preprocess_in_process_needs_no_sympy_either(toy_dir: Path, tmp_path: Path) -> None:
    preprocess_for_quantization(toy_dir / "toy-fp32.onnx", tmp_path / "pre.onnx")
    onnx.checker.check_model(str(tmp_path / "pre.onnx"))
    assert os.path.getsize(tmp_path / "pre.onnx") > 1000


@pytest.mark.shared
def test_the_shared_dynamic_model_dequantizes_to_the_shared_fp32_exactly(shared_dir: Path) -> None:
    """The README says the shared FP32 model was made by dequantizing the dynamic one: so must ours be."""
    m, note = to_float32(onnx.load(str(shared_dir / "models/yolov8n-coco-int8-dynamic.onnx")), "dynamic_int8")
    assert "dequantized back to FP32" in note
    x = np.random.default_rng(1).uniform(0, 1, (1, 3, 640, 640)).astype(np.float32)
    a = ort.InferenceSession(m.SerializeToString()).run(None, {"images": x})[0]
    b = ort.InferenceSession(str(shared_dir / "models/yolov8n-coco-fp32.onnx")).run(None, {"images": x})[0]
    np.testing.assert_allclose(a, b, atol=1e-4)


def test_the_quantized_model_is_committed_through_the_durable_helper(
    toy_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Data fsync'd, renamed, directory fsync'd (adapters/host/durable.py): a power cut after "done"
    leaves the model, not an empty file under its name."""
    from edge_agent.adapters.host import durable

    synced: list[str] = []
    real_fsync = os.fsync
    monkeypatch.setattr(durable, "fsync_dir", lambda p: synced.append(f"dir {Path(p).name}"))
    monkeypatch.setattr(durable.os, "fsync", lambda fd: (synced.append("file"), real_fsync(fd))[1])
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    quantize_model(
        toy_dir / "toy-fp32.onnx", out_dir / "x.onnx", image_files(toy_dir / "calib")[:2], progress=False
    )
    assert synced == ["file", "dir out"] and [p.name for p in out_dir.iterdir()] == ["x.onnx"]
