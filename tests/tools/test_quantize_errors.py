"""``quantize`` fails in one line: an unwritable output before any calibration, and an onnxruntime
refusal of the dequantized copy without naming our temp files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from edge_agent.app.cli.main import main
from edge_agent.tools.quantize import image_files


def _calib_that_cannot_be_read(tmp_path: Path) -> Path:
    """A calibration folder whose only image is not an image: reading it would fail in calibration."""
    d = tmp_path / "calib"
    d.mkdir()
    (d / "broken.jpg").write_bytes(b"not a jpeg at all")
    return d


@pytest.mark.parametrize("where", ["missing", "a-directory"])
def test_a_bad_output_path_fails_before_calibration(
    toy_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    out = tmp_path / "missing" / "dir" / "x.onnx" if where == "missing" else tmp_path
    rc = main(["quantize", str(toy_dir / "toy-fp32.onnx"), "--calib", str(_calib_that_cannot_be_read(tmp_path)),
               "-o", str(out)])  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 1 and len(err) == 1, err
    # the output is named; the unreadable calibration image was never reached
    assert str(out) in err[0] and ("does not exist" in err[0] or "is a directory" in err[0])
    assert "broken.jpg" not in err[0]


def _refused_by_onnxruntime() -> onnx.ModelProto:
    """A graph onnxruntime will not load: Add of a float input and an int8 constant (a type error)."""
    g = helper.make_graph(
        [helper.make_node("Add", ["images", "k"], ["output0"])],
        "bad",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, 64, 64])],
        [helper.make_tensor_value_info("output0", TensorProto.FLOAT, [1, 3, 64, 64])],
        [numpy_helper.from_array(np.zeros((1,), np.int8), "k")],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def test_an_unusable_dequantized_copy_is_one_line_naming_the_model(
    toy_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A QOperator INT8 model whose float copy onnxruntime refuses (a type error, as with the
    zero-score QOperator model): the user's model and the way out, never the temp file."""
    from onnxruntime.quantization import QuantFormat, quantize_static

    from edge_agent.adapters.camera.images import read_image
    from edge_agent.core.vision.preprocess import preprocess_detector

    feeds = iter(
        [{"images": preprocess_detector(read_image(f), (64, 64))[0]} for f in image_files(toy_dir / "calib")]
    )

    class Reader:
        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(feeds, None)

    qop = tmp_path / "toy-qop.onnx"
    quantize_static(str(toy_dir / "toy-fp32.onnx"), str(qop), Reader(), quant_format=QuantFormat.QOperator)
    monkeypatch.setattr(
        "edge_agent.tools.quantize.to_float32", lambda model, kind: (_refused_by_onnxruntime(), "x")
    )
    out = tmp_path / "out.onnx"
    rc = main(["quantize", str(qop), "--calib", str(toy_dir / "calib"), "-o", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 1 and len(err) == 1, err
    assert str(qop) in err[0] and "Type" in err[0] and "quantize its FP32/FP16 source instead" in err[0]
    assert "edge-agent-quant-" not in err[0] and "float32.onnx" not in err[0]
    assert f"{qop}: <FP32 copy of toy-qop.onnx>: onnxruntime cannot load it: " in err[0]
    assert not out.exists() and not list(tmp_path.glob(".out.onnx.*"))
