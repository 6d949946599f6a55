"""What ``quantize`` hands onnxruntime and what the INT8 file then holds (issue 19).

The real quantizer runs every time; a recorder keeps the arguments it was called with, so a flag
that never reaches it (``--reduce-range``, ``--method``, the float tail's exclusions, per-channel
weights, U8S8 on both targets) fails here, and the written model is read back for the same facts.
"""

from __future__ import annotations

import inspect
import json
import logging
import os
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime.quantization as oq
import pytest
from onnx import numpy_helper
from support.cpu import int8_saturates_here

from edge_agent.adapters.camera.images import read_image
from edge_agent.core.vision.preprocess import preprocess_detector
from edge_agent.errors import QuantizeError
from edge_agent.tools.quantize import _Reader, image_files, pick_samples, quantize_model

TAIL = {  # the toy detector's float tail (tests/support/toolchain.py): never quantized
    "head/reshape",
    "head/split",
    "head/box_sigmoid",
    "head/box_scale",
    "head/cls_sigmoid",
    "head/concat",
}


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Every quantize_static call's arguments; the real quantizer still runs."""
    seen: list[dict[str, Any]] = []
    real = oq.quantize_static

    def recording(src: str, dst: str, reader: Any, **kw: Any) -> Any:
        seen.append(dict(kw, src=src, dst=dst))
        return real(src, dst, reader, **kw)

    recording.__signature__ = inspect.signature(real)  # type: ignore[attr-defined]  # quantize_model reads it
    monkeypatch.setattr(oq, "quantize_static", recording)
    return seen


def _meta(path: Path) -> dict[str, str]:
    return {p.key: p.value for p in onnx.load(str(path)).metadata_props}


@pytest.mark.parametrize(
    ("method", "target", "reduce_range", "naive", "calib"),
    [
        ("minmax", "x86", False, False, oq.CalibrationMethod.MinMax),
        ("entropy", "arm64", True, False, oq.CalibrationMethod.Entropy),
        ("percentile", "x86", False, True, oq.CalibrationMethod.Percentile),
    ],
)
def test_every_option_reaches_the_quantizer(
    toy_dir: Path,
    tmp_path: Path,
    calls: list[dict[str, Any]],
    method: Any,
    target: Any,
    reduce_range: bool,
    naive: bool,
    calib: Any,
) -> None:
    out = tmp_path / "q.onnx"
    files = image_files(toy_dir / "calib")[:3]
    res = quantize_model(
        toy_dir / "toy-fp32.onnx",
        out,
        files,
        method=method,
        target=target,
        reduce_range=reduce_range,
        naive=naive,
        progress=False,
    )
    assert len(calls) == 1
    kw = calls[0]
    assert kw["quant_format"] == oq.QuantFormat.QDQ and kw["per_channel"] is True
    assert kw["reduce_range"] is reduce_range and kw["calibrate_method"] == calib
    # U8S8 on both targets (module docstring)
    assert (kw["activation_type"], kw["weight_type"]) == (oq.QuantType.QUInt8, oq.QuantType.QInt8)
    assert sorted(kw["nodes_to_exclude"]) == ([] if naive else sorted(TAIL))
    assert sorted(res.excluded_nodes) == sorted(kw["nodes_to_exclude"])
    assert kw["extra_options"] == ({"CalibPercentile": 99.999} if method == "percentile" else {})
    assert kw["calibration_providers"] == ["CPUExecutionProvider"]
    q = json.loads(_meta(out)["quantization"])
    assert q == {
        "format": "QDQ",
        "method": method,
        "target": target,
        "activation_type": "uint8",
        "weight_type": "int8 per-channel",
        "reduce_range": reduce_range,
        "samples": 3,
        "excluded_nodes": 0 if naive else 6,
        "naive": naive,
        "softmax_hoisted": 0,
        "task": "detect",
        "edge_agent_version": q["edge_agent_version"],
        "source": "toy-fp32.onnx",
        "source_quantization": "fp32",
    }
    from edge_agent import __version__

    assert q["edge_agent_version"] == __version__ and res.samples == 3 and res.output == out
    assert res.settings == q


def test_weights_are_int8_per_output_channel_and_activations_uint8(toy_dir: Path, tmp_path: Path) -> None:
    """What the INT8 file holds: one weight scale per output channel on axis 0 (a single scale per
    tensor, or the input-channel axis, would be a different and less accurate model)."""
    out = tmp_path / "q.onnx"
    quantize_model(toy_dir / "toy-fp32.onnx", out, image_files(toy_dir / "calib")[:3], progress=False)
    m = onnx.load(str(out))
    inits = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    producer = {o: n for n in m.graph.node for o in n.output}
    convs = {n.name: n for n in m.graph.node if n.op_type == "Conv"}
    for name, out_ch in (("stem/conv", 16), ("body/conv", 24), ("head/conv", 7)):
        dq = producer[convs[name].input[1]]
        assert dq.op_type == "DequantizeLinear"
        w, scale = inits[dq.input[0]], inits[dq.input[1]]
        assert w.dtype == np.int8 and w.shape[0] == out_ch
        assert scale.shape == (out_ch,)
        assert next(a.i for a in dq.attribute if a.name == "axis") == 0
        act = producer[convs[name].input[0]]
        assert inits[act.input[2]].dtype == np.uint8  # the activation's zero point


def test_the_int8_model_computes_what_the_float_one_does(toy_dir: Path, tmp_path: Path) -> None:
    import onnxruntime as ort

    out = tmp_path / "q.onnx"
    quantize_model(toy_dir / "toy-fp32.onnx", out, image_files(toy_dir / "calib"), progress=False)
    x = preprocess_detector(read_image(image_files(toy_dir / "val")[0]), (64, 64))[0]
    f = ort.InferenceSession(str(toy_dir / "toy-fp32.onnx")).run(None, {"images": x})[0]
    q = ort.InferenceSession(str(out)).run(None, {"images": x})[0]
    assert np.abs(q[:, 4:] - f[:, 4:]).max() < 0.05  # scores 0..1
    assert np.abs(q[:, :4] - f[:, :4]).max() < 3.0  # boxes in pixels of 64


def test_the_reader_feeds_each_image_once_then_stops(
    toy_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = image_files(toy_dir / "calib")[:3]
    seen: list[int] = []
    r = _Reader("images", files, lambda img: np.full((1,), img.shape[1], np.float32), progress=True)
    for _ in range(3):
        got = r.get_next()
        assert got is not None and list(got) == ["images"]
        seen.append(int(got["images"][0]))
    assert seen == [read_image(f).shape[1] for f in files]
    assert r.get_next() is None and r.get_next() is None and r.i == 3
    # not a terminal under pytest: one line per tenth, the last one for all three images
    assert capsys.readouterr().err.splitlines()[-1] == "calibrating: 3/3 (100%)"
    r.rewind()
    assert r.i == 0 and r.get_next() is not None and r.i == 1
    quiet = _Reader("images", files, lambda img: np.zeros((1,), np.float32), progress=False)
    while quiet.get_next() is not None:
        pass
    assert capsys.readouterr().err == ""  # --no-progress (and -q) print no bar


def test_the_sample_count_is_the_images_given(toy_dir: Path, tmp_path: Path) -> None:
    for n in (1, 5):
        out = tmp_path / f"q{n}.onnx"
        res = quantize_model(
            toy_dir / "toy-fp32.onnx", out, image_files(toy_dir / "calib")[:n], progress=False
        )
        assert res.samples == n and json.loads(_meta(out)["quantization"])["samples"] == n


def test_pick_samples_spreads_over_the_list_without_repeats() -> None:
    files = [Path(f"{i}.jpg") for i in range(5)]
    assert pick_samples(files, 5) == files and pick_samples(files, 9) == files
    assert pick_samples(files, -1) == files
    assert pick_samples(files, 4) == [files[0], files[1], files[3], files[4]]
    assert pick_samples(files, 1) == [files[0]]
    assert pick_samples(files, 2) == [files[0], files[4]]


def test_image_files_walks_class_folders_and_any_suffix_case(tmp_path: Path) -> None:
    import cv2

    for rel in ("b/2.JPG", "a/1.png", "a/sub/3.jpeg", "0.jpg"):
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        cv2.imwrite(str(p.with_suffix(".png")), np.zeros((4, 4, 3), np.uint8))
        p.with_suffix(".png").rename(p)
    (tmp_path / "a" / "notes.txt").write_text("x")
    (tmp_path / "dir.jpg").mkdir()
    assert [p.relative_to(tmp_path).as_posix() for p in image_files(tmp_path)] == [
        "0.jpg",
        "a/1.png",
        "a/sub/3.jpeg",
        "b/2.JPG",
    ]
    with pytest.raises(QuantizeError) as e:
        image_files(tmp_path / "a" / "sub" / "none")
    assert str(e.value) == f"{tmp_path / 'a' / 'sub' / 'none'}: not a directory of images"
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(QuantizeError) as e:
        image_files(empty)
    assert (
        str(e.value) == f"{empty}: no images found (looked for .jpg, .jpeg, .png, .webp, .bmp, .tif, .tiff)"
    )


def test_no_calibration_images_is_refused(toy_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(QuantizeError) as e:
        quantize_model(toy_dir / "toy-fp32.onnx", tmp_path / "q.onnx", [], progress=False)
    assert str(e.value) == "no calibration images"


def test_an_interrupt_leaves_nothing_and_is_not_reworded(
    toy_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(_src: str, dst: str, *_a: object, **_k: object) -> None:
        Path(dst).write_bytes(b"half")
        raise KeyboardInterrupt

    monkeypatch.setattr(oq, "quantize_static", interrupted)
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(KeyboardInterrupt):
        quantize_model(
            toy_dir / "toy-fp32.onnx", out / "q.onnx", image_files(toy_dir / "calib")[:2], progress=False
        )
    assert list(out.iterdir()) == []


@pytest.mark.parametrize(
    ("exc", "line"),
    [
        (RuntimeError("first line\nsecond line"), "first line"),
        (ValueError(""), "ValueError"),
        (RuntimeError("  \n "), "RuntimeError"),
    ],
)
def test_an_onnxruntime_failure_is_its_first_line_naming_the_model(
    toy_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, exc: Exception, line: str
) -> None:
    def failing(*_a: object, **_k: object) -> None:
        raise exc

    monkeypatch.setattr(oq, "quantize_static", failing)
    src = toy_dir / "toy-fp32.onnx"
    with pytest.raises(QuantizeError) as e:
        quantize_model(src, tmp_path / "q.onnx", image_files(toy_dir / "calib")[:1], progress=False)
    # an FP32 source: no hint about quantizing the FP32 source instead
    assert str(e.value) == f"{src}: quantization failed in onnxruntime: {line}"


def test_a_failure_naming_the_temp_files_names_the_users_model(
    toy_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def failing(src: str, *_a: object, **_k: object) -> None:
        tmp = Path(src).parent
        raise RuntimeError(f"Load model from {tmp / 'float32.onnx'} failed; also {tmp / 'pre.onnx'}")

    monkeypatch.setattr(oq, "quantize_static", failing)
    src = toy_dir / "toy-fp32.onnx"
    with pytest.raises(QuantizeError) as e:
        quantize_model(src, tmp_path / "q.onnx", image_files(toy_dir / "calib")[:1], progress=False)
    assert str(e.value) == (
        f"{src}: quantization failed in onnxruntime: Load model from <FP32 copy of toy-fp32.onnx> failed; "
        "also <temp dir>/pre.onnx"
    )


def test_an_edge_agent_error_naming_the_temp_dir_is_reworded(
    toy_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Our own one-line errors pass as they are unless they name the temp dir (then: the model)."""

    def failing(src: str, *_a: object, **_k: object) -> None:
        raise QuantizeError(f"{Path(src).parent / 'pre.onnx'}: bad")

    monkeypatch.setattr(oq, "quantize_static", failing)
    src = toy_dir / "toy-fp32.onnx"
    with pytest.raises(QuantizeError) as e:
        quantize_model(src, tmp_path / "q.onnx", image_files(toy_dir / "calib")[:1], progress=False)
    assert str(e.value) == f"{src}: <temp dir>/pre.onnx: bad"

    def plain(*_a: object, **_k: object) -> None:
        raise QuantizeError("calib/x.jpg: empty file")

    monkeypatch.setattr(oq, "quantize_static", plain)
    with pytest.raises(QuantizeError) as e:
        quantize_model(src, tmp_path / "q.onnx", image_files(toy_dir / "calib")[:1], progress=False)
    assert str(e.value) == "calib/x.jpg: empty file"


# ---- pre-processing, in process (the subprocess tests in test_quantize_inputs.py see the same
# branches from outside; mutation testing credits only these) ------------------------------------


def _opset(path: Path) -> int:
    return next(o.version for o in onnx.load(str(path)).opset_import if o.domain in ("", "ai.onnx"))


@pytest.fixture
def pre_calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str, dict[str, Any], str]]:
    """quant_pre_process calls: (input, output, options, working dir); the real one runs."""
    import onnxruntime.quantization.shape_inference as si

    seen: list[tuple[str, str, dict[str, Any], str]] = []
    real = si.quant_pre_process

    def recording(src: str, dst: str, **kw: Any) -> Any:
        seen.append((src, dst, kw, os.getcwd()))
        return real(src, dst, **kw)

    monkeypatch.setattr(si, "quant_pre_process", recording)
    return seen


def test_preprocess_without_sympy_skips_only_the_symbolic_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pre_calls: list[Any], caplog: pytest.LogCaptureFixture
) -> None:
    from support.toolchain import build_toy_detector

    from edge_agent.tools import quantize

    src = build_toy_detector(tmp_path / "old.onnx", opset=11)
    monkeypatch.setattr(quantize, "_have_sympy", lambda: False)
    out = tmp_path / "work" / "pre.onnx"
    out.parent.mkdir()
    here = os.getcwd()
    caplog.set_level(logging.INFO, logger="edge_agent.tools.quantize")
    quantize.preprocess_for_quantization(src, out)
    assert os.getcwd() == here
    assert len(pre_calls) == 1
    first_in, first_out, kw, cwd = pre_calls[0]
    assert kw == {"skip_symbolic_shape": True} and Path(first_out) == out.resolve()
    assert cwd == str(out.parent.resolve())  # its debris goes beside the output, not into the user's cwd
    assert _opset(Path(first_in)) == 13 and _opset(out) == 13  # per-channel QDQ needs 13, no more
    onnx.checker.check_model(str(out))
    assert [r.getMessage() for r in caplog.records] == [
        "converting opset 11 -> 13 (per-channel QDQ needs 13)",
        "sympy is not installed: quantization pre-processing without symbolic shape inference",
    ]


def test_preprocess_retries_without_the_symbolic_pass_when_it_fails(
    toy_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import onnxruntime.quantization.shape_inference as si

    from edge_agent.tools import quantize

    seen: list[tuple[str, dict[str, Any]]] = []
    dsts: list[str] = []
    real = si.quant_pre_process

    def symbolic_fails(src: str, dst: str, **kw: Any) -> Any:
        seen.append((src, kw))
        dsts.append(dst)
        if not kw.get("skip_symbolic_shape"):
            raise Exception("Incomplete symbolic shape inference\nsecond line")
        return real(src, dst, **kw)

    monkeypatch.setattr(si, "quant_pre_process", symbolic_fails)
    monkeypatch.setattr(quantize, "_have_sympy", lambda: True)
    caplog.set_level(logging.INFO, logger="edge_agent.tools.quantize")
    quantize.preprocess_for_quantization(toy_dir / "toy-fp32.onnx", tmp_path / "pre.onnx")
    # both from the same file (a ModelProto the first attempt touched cannot be retried)
    assert [kw for _, kw in seen] == [{}, {"skip_symbolic_shape": True}] and seen[0][0] == seen[1][0]
    assert dsts == [str((tmp_path / "pre.onnx").resolve())] * 2
    onnx.checker.check_model(str(tmp_path / "pre.onnx"))
    warn = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warn == [
        "symbolic shape inference failed (Incomplete symbolic shape inference); pre-processing without it"
    ]


def test_preprocess_failure_without_a_message_is_named_by_its_type(
    toy_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import onnxruntime.quantization.shape_inference as si

    from edge_agent.tools import quantize

    real = si.quant_pre_process

    def fails(src: str, dst: str, **kw: Any) -> Any:
        if not kw:
            raise KeyError()
        return real(src, dst, **kw)

    monkeypatch.setattr(si, "quant_pre_process", fails)
    monkeypatch.setattr(quantize, "_have_sympy", lambda: True)
    quantize.preprocess_for_quantization(toy_dir / "toy-fp32.onnx", tmp_path / "pre.onnx")
    assert "symbolic shape inference failed (KeyError)" in caplog.text


def test_an_onnxruntime_without_quant_pre_process_still_gets_opset_13(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """onnxruntime 1.11 (JetPack 4) has no quant_pre_process: the opset upgrade alone, said once."""
    import sys

    import onnxruntime
    from support.toolchain import build_toy_detector

    from edge_agent.tools.quantize import preprocess_for_quantization

    src = build_toy_detector(tmp_path / "old.onnx", opset=11)
    monkeypatch.setitem(sys.modules, "onnxruntime.quantization.shape_inference", None)
    caplog.set_level(logging.INFO, logger="edge_agent.tools.quantize")
    preprocess_for_quantization(src, tmp_path / "pre.onnx")
    assert _opset(tmp_path / "pre.onnx") == 13
    warn = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warn == [
        f"onnxruntime {onnxruntime.__version__} has no quant_pre_process (1.13+): quantizing without its "
        "shape inference and graph optimisation (results may differ from a newer onnxruntime)"
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.onnx", "pre.onnx"]


def test_a_model_at_opset_13_or_newer_is_not_converted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from support.toolchain import toy_detector_model

    from edge_agent.tools.quantize import _upgrade_opset

    caplog.set_level(logging.INFO, logger="edge_agent.tools.quantize")
    for opset in (13, 17):
        m = toy_detector_model(opset=opset)
        assert _upgrade_opset(onnx, m) is m
    assert "converting" not in caplog.text
    old = toy_detector_model(opset=12)
    up = _upgrade_opset(onnx, old)
    assert next(o.version for o in up.opset_import if o.domain == "") == 13
    assert [r.getMessage() for r in caplog.records] == [
        "converting opset 12 -> 13 (per-channel QDQ needs 13)"
    ]
    # the main domain may be spelled "ai.onnx" (the same operator set)
    spelled = toy_detector_model(opset=11)
    spelled.opset_import[0].domain = "ai.onnx"
    assert next(o.version for o in _upgrade_opset(onnx, spelled).opset_import if o.domain == "ai.onnx") == 13
    new_spelled = toy_detector_model(opset=17)
    new_spelled.opset_import[0].domain = "ai.onnx"
    assert _upgrade_opset(onnx, new_spelled) is new_spelled  # never down-converted to 13


def test_have_sympy_is_whether_it_imports(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys
    import types

    from edge_agent.tools.quantize import _have_sympy

    monkeypatch.setitem(sys.modules, "sympy", None)
    assert _have_sympy() is False
    monkeypatch.setitem(sys.modules, "sympy", types.ModuleType("sympy"))
    assert _have_sympy() is True


def test_the_working_dir_comes_back_after_a_failure(tmp_path: Path) -> None:
    from edge_agent.tools.quantize import _working_dir

    here = os.getcwd()
    with pytest.raises(RuntimeError), _working_dir(tmp_path):
        assert os.getcwd() == str(tmp_path)
        raise RuntimeError
    assert os.getcwd() == here


# ---- calibration sees what the runtime feeds: letterbox for YOLO, stretch for RT-DETR ------------


def _rtdetr_like(path: Path) -> Path:
    """[1, 2 queries, 4 + 3 classes] from a 32x32 input; metadata names it an RT-DETR."""
    rng = np.random.default_rng(0)
    nodes = [
        onnx.helper.make_node("Conv", ["images", "wc"], ["c"]),
        onnx.helper.make_node("Flatten", ["c"], ["f"]),
        onnx.helper.make_node("MatMul", ["f", "wm"], ["m"]),
        onnx.helper.make_node("Reshape", ["m", "shape"], ["r"]),
        onnx.helper.make_node("Sigmoid", ["r"], ["output0"]),
    ]
    g = onnx.helper.make_graph(
        nodes,
        "rtdetr",
        [onnx.helper.make_tensor_value_info("images", onnx.TensorProto.FLOAT, [1, 3, 32, 32])],
        [onnx.helper.make_tensor_value_info("output0", onnx.TensorProto.FLOAT, [1, 2, 7])],
        [
            numpy_helper.from_array(rng.normal(0, 0.5, (2, 3, 1, 1)).astype(np.float32), "wc"),
            numpy_helper.from_array(rng.normal(0, 0.05, (2048, 14)).astype(np.float32), "wm"),
            numpy_helper.from_array(np.array([1, 2, 7], np.int64), "shape"),
        ],
    )
    m = onnx.helper.make_model(g, opset_imports=[onnx.helper.make_opsetid("", 17)])
    m.ir_version = 9
    for k, v in {
        "task": "detect",
        "model": "rtdetr-l",
        "imgsz": "[32, 32]",
        "names": "{0: 'a', 1: 'b', 2: 'c'}",
    }.items():
        m.metadata_props.add(key=k, value=v)
    onnx.save(m, str(path))
    return path


def _dark_wide(folder: Path, n: int = 2) -> list[Path]:
    """Dark, twice as wide as high: letterboxing adds grey (114) bars, stretching adds nothing."""
    import cv2

    folder.mkdir()
    out = []
    for i in range(n):
        p = folder / f"{i}.png"
        cv2.imwrite(str(p), np.full((32, 64, 3), 20 + 10 * i, np.uint8))
        out.append(p)
    return out


def _input_scale(path: Path) -> float:
    m = onnx.load(str(path))
    inits = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    q = next(n for n in m.graph.node if n.op_type == "QuantizeLinear" and n.input[0] == "images")
    return float(inits[q.input[1]])


def test_an_rtdetr_is_calibrated_on_stretched_images(tmp_path: Path) -> None:
    from edge_agent.adapters.runtime.onnx_model import OnnxModel
    from edge_agent.tools.quantize import make_preprocess

    src = _rtdetr_like(tmp_path / "rtdetr.onnx")
    files = _dark_wide(tmp_path / "calib")
    img = read_image(files[1])
    blob = make_preprocess(OnnxModel(src, warmup=False))(img)
    np.testing.assert_array_equal(blob, preprocess_detector(img, (32, 32), stretch=True)[0])
    out = tmp_path / "q.onnx"
    quantize_model(src, out, files, progress=False)
    # the brightest calibration pixel is 30: no letterbox grey (114) in the range
    assert _input_scale(out) == pytest.approx(30 / 255 / 255, rel=1e-3)


def test_a_yolo_detector_is_calibrated_on_letterboxed_images(toy_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "q.onnx"
    quantize_model(toy_dir / "toy-fp32.onnx", out, _dark_wide(tmp_path / "calib"), progress=False)
    assert _input_scale(out) == pytest.approx(114 / 255 / 255, rel=1e-3)


def test_for_a_nano_the_metadata_and_the_arithmetic_survive_the_lowering(
    toy_dir: Path, tmp_path: Path
) -> None:
    """``--target-ort 1.11``: lowered before and after the quantizer, still the same detector with the
    same names/imgsz/stride, and stamped for 1.11 in its settings."""
    import onnxruntime as ort

    out = tmp_path / "q.onnx"
    res = quantize_model(
        toy_dir / "toy-fp32.onnx", out, image_files(toy_dir / "calib")[:4], progress=False, target_ort="1.11"
    )
    meta = _meta(out)
    assert {k: meta[k] for k in ("task", "imgsz", "stride")} == {
        "task": "detect",
        "imgsz": "[64, 64]",
        "stride": "4",
    }
    q = json.loads(meta["quantization"])
    assert q["target_ort"] == "1.11" and res.settings["target_ort"] == "1.11" and q["samples"] == 4
    assert sorted(res.excluded_nodes) == sorted(TAIL)
    x = preprocess_detector(read_image(image_files(toy_dir / "val")[1]), (64, 64))[0]
    f = ort.InferenceSession(str(toy_dir / "toy-fp32.onnx")).run(None, {"images": x})[0]
    got = ort.InferenceSession(str(out)).run(None, {"images": x})[0]
    # 0.05; 0.08 on an x86 host without VNNI, whose INT8 kernels saturate (support.cpu): measured
    # 0.056 there (an AVX2 EPYC)
    assert np.abs(got[:, 4:] - f[:, 4:]).max() < (0.08 if int8_saturates_here() else 0.05)


def test_the_source_metadata_wins_over_what_the_quantizer_writes(tmp_path: Path) -> None:
    from edge_agent.tools.quantize import _write_metadata

    src, dst = tmp_path / "src.onnx", tmp_path / "dst.onnx"
    from support.toolchain import toy_detector_model

    m = toy_detector_model()
    onnx.save(m, str(src))
    del m.metadata_props[:]
    for k, v in {"names": "stale", "producer_note": "from the quantizer"}.items():
        m.metadata_props.add(key=k, value=v)
    onnx.save(m, str(dst))
    _write_metadata(onnx, src, dst, {"b": 1, "a": [2]})
    meta = _meta(dst)
    assert meta["names"] == "{0: 'c0', 1: 'c1', 2: 'c2'}" and meta["producer_note"] == "from the quantizer"
    assert meta["quantization"] == '{"a": [2], "b": 1}' and meta["task"] == "detect"
    assert len(onnx.load(str(dst)).metadata_props) == len(meta)  # each key once


def test_the_output_checks_name_the_path_and_what_is_wrong(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from edge_agent.tools import quantize
    from edge_agent.tools.quantize import check_output

    check_output(tmp_path / "new.onnx")  # a writable folder: fine
    monkeypatch.chdir(tmp_path)
    check_output(Path("bare.onnx"))  # no folder given: the working directory
    for dst, line in (
        (tmp_path, f"{tmp_path}: is a directory; give the output file's path (-o DIR/NAME.onnx)"),
        (
            tmp_path / "no" / "q.onnx",
            f"{tmp_path / 'no' / 'q.onnx'}: the output folder {tmp_path / 'no'} does not exist",
        ),
    ):
        with pytest.raises(QuantizeError) as e:
            check_output(dst)
        assert str(e.value) == line
    # root passes every permission check, so the refusal of a read-only folder is asked of os.access
    asked: list[tuple[str, int]] = []

    def read_only(path: Any, mode: int) -> bool:
        asked.append((str(path), mode))
        return not mode & os.W_OK

    monkeypatch.setattr(quantize.os, "access", read_only)
    with pytest.raises(QuantizeError) as e:
        check_output(tmp_path / "q.onnx")
    assert str(e.value) == f"{tmp_path / 'q.onnx'}: the output folder {tmp_path} is not writable"
    assert asked == [(str(tmp_path), os.W_OK | os.X_OK)]


def test_a_model_without_node_names_still_keeps_its_tail_float(tmp_path: Path) -> None:
    """Exporters often leave nodes unnamed, and the quantizer excludes by name: the tail must be
    found and excluded all the same (named first, the names saved with the model it quantizes)."""
    from support.toolchain import toy_detector_model

    m = toy_detector_model()
    for n in m.graph.node:
        n.name = ""
    src = tmp_path / "unnamed.onnx"
    onnx.save(m, str(src))
    calib = tmp_path / "calib"
    from support.toolchain import write_scenes

    out = tmp_path / "q.onnx"
    res = quantize_model(src, out, write_scenes(calib, 3, seed=0), progress=False)
    assert len(res.excluded_nodes) == 6 and all(res.excluded_nodes)
    q = onnx.load(str(out))
    producer = {o: n for n in q.graph.node for o in n.output}
    final = producer["output0"]
    assert final.op_type == "Concat"
    assert {producer[i].op_type for i in final.input} == {"Mul", "Sigmoid"}
    tail = {"flat", "box_raw", "cls_raw", "box_sig", "box_px", "cls", "output0"}
    assert not tail & {i for n in q.graph.node if n.op_type == "QuantizeLinear" for i in n.input}


def test_the_models_quantize_only_inspects_are_cpu_sessions_without_warm_up(
    toy_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The source and the float reference are opened to read their kind, input and metadata: on a
    Jetson the default provider would build a TensorRT engine (minutes) and warm it up for nothing."""
    from edge_agent.adapters.runtime import onnx_model as runtime

    made: list[tuple[str, Any, Any]] = []
    real = runtime.OnnxModel

    class Recording(real):  # type: ignore[misc, valid-type]
        def __init__(self, path: Any, *a: Any, **kw: Any) -> None:
            made.append((Path(path).name, kw.get("provider", "<default>"), kw.get("warmup", "<default>")))
            super().__init__(path, *a, **kw)

    monkeypatch.setattr(runtime, "OnnxModel", Recording)
    quantize_model(
        toy_dir / "toy-fp32.onnx", tmp_path / "q.onnx", image_files(toy_dir / "calib")[:2], progress=False
    )
    assert len(made) == 2 and made[0][0] == "toy-fp32.onnx"
    assert {(p, w) for _, p, w in made} == {("cpu", False)}


def test_a_quantized_source_is_logged_with_what_was_done_to_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A library caller (no CLI) learns from the log that the FP32 copy came from an INT8 model, and
    the Nano lowering says what it did."""
    from onnxruntime.quantization import QuantFormat, quantize_static
    from support.toolchain import write_scenes

    calib = write_scenes(tmp_path / "calib", 3, seed=1)
    feeds = iter([{"images": preprocess_detector(read_image(f), (64, 64))[0]} for f in calib])

    class Reader:
        def get_next(self) -> Any:
            return next(feeds, None)

    from support.toolchain import build_toy_detector

    fp32 = build_toy_detector(tmp_path / "toy.onnx")
    qdq = tmp_path / "toy-qdq.onnx"
    quantize_static(str(fp32), str(qdq), Reader(), quant_format=QuantFormat.QDQ)  # type: ignore[arg-type]
    caplog.set_level(logging.INFO, logger="edge_agent.tools.quantize")
    quantize_model(qdq, tmp_path / "q.onnx", calib, progress=False, target_ort="1.11")
    lines = [r.getMessage() for r in caplog.records if r.name == "edge_agent.tools.quantize"]
    assert any(
        m.startswith("toy-qdq.onnx: qdq int8 model: dequantized back to FP32 first; the result's accuracy")
        for m in lines
    ), lines
    assert "opset 17 -> 16 (onnx version converter)" in lines  # convert's own lines reach the log
    # and the second lowering's, after the quantizer stamped its opset imports into the INT8 model
    assert any(m.startswith("dropped unused opset imports: ai.onnx.ml") for m in lines), lines


def test_reduce_range_is_off_unless_asked(toy_dir: Path, tmp_path: Path, calls: list[dict[str, Any]]) -> None:
    """Full 8-bit weights by default; 7-bit only with --reduce-range (accuracy costs)."""
    out = tmp_path / "q.onnx"
    res = quantize_model(toy_dir / "toy-fp32.onnx", out, image_files(toy_dir / "calib")[:2], progress=False)
    assert calls[0]["reduce_range"] is False and res.settings["reduce_range"] is False
    assert (res.settings["method"], res.settings["target"]) == ("minmax", "x86")
