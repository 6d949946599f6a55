"""``edge-agent inspect``: what mutation testing found no test reading (app-inspect area): the
help page, the "?" of what a model does not say, a detector output it does not understand or one
that cannot score as a warning, an RT-DETR's stretched input, a stride other than 32 in the
dynamic H/W example, MB as 10^6 bytes, --json indented, and --provider / --threads reaching the
session."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from support.layouts import coco_names, const_model
from support.models import make_format_detector

from edge_agent.adapters.runtime.onnx_model import OnnxModel
from edge_agent.app.cli.main import main
from edge_agent.errors import ModelError

ROOT = Path(__file__).resolve().parents[3]
DETECTOR = ROOT / "models" / "demo-detector.onnx"
SENSOR = ROOT / "models" / "demo-sensor.onnx"


def inspect(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str], str]:
    rc = main(["inspect", *args])
    out, err = capsys.readouterr()
    return rc, out.splitlines(), err


def described(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, object]:
    assert main(["inspect", "--json", *args]) == 0
    return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]


def test_what_a_model_does_not_say_is_a_question_mark_and_an_unknown_output_a_warning(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    odd = const_model(tmp_path / "odd.onnx", {"output0": np.zeros((1, 2, 3), np.float32)})
    rc, lines, err = inspect(capsys, str(odd))
    assert rc == 0
    assert lines[2] == "producer     ?  opsets {'ai.onnx': 17}"
    assert lines[4] == "task         ?  imgsz None  stride None"
    (warning,) = err.splitlines()
    assert warning.startswith(
        f"edge-agent inspect: warning: {odd}: output 'output0': output shape [1, 2, 3] is not a detector "
        "output this agent understands: "
    )
    info = described(capsys, str(odd))
    assert info["warnings"] == [warning.removeprefix("edge-agent inspect: warning: ")]
    assert "task_used" not in info and "format" not in info


def test_a_model_newer_than_the_table_loads_on_a_runtime_it_cannot_name(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    model = onnx.load(str(const_model(tmp_path / "m.onnx", {"output0": np.zeros((1, 2, 3), np.float32)})))
    model.opset_import[0].version, model.ir_version = 24, 11  # past ort_compat's last row (1.22)
    path = tmp_path / "o24.onnx"
    onnx.save(model, str(path))
    try:
        OnnxModel(str(path), warmup=False)
    except ModelError as exc:
        pytest.skip(f"this onnxruntime does not load opset 24: {exc}")
    rc, lines, _ = inspect(capsys, str(path))
    assert rc == 0 and lines[3] == "onnx         IR 11, opset 24: loads on onnxruntime >= ?"


def test_a_detector_that_cannot_score_is_a_warning_naming_the_fix(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    zero = make_format_detector(tmp_path / "zero.onnx", score_gain=0.0)
    rc, lines, err = inspect(capsys, str(zero))
    assert rc == 0 and "input size   64x64 (letterboxed)" in lines
    assert err.splitlines() == [
        f"edge-agent inspect: warning: {zero}: cannot produce detection scores: every class score is 0 on "
        "the probe image (best 0); fix: re-quantize the FP32 (or FP16/dynamic INT8) model with "
        "`edge-agent quantize MODEL --calib DIR`, which keeps the post-processing head float"
    ]
    info = described(capsys, str(zero))
    assert info["task_used"] == "detect" and info["warnings"] == [
        err.splitlines()[0].removeprefix("edge-agent inspect: warning: ")
    ]


def test_an_rt_detr_is_fed_its_input_stretched(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    meta = {"names": coco_names(), "imgsz": "[64, 64]", "description": "Ultralytics RT-DETR-l model"}
    detr = const_model(tmp_path / "detr.onnx", {"output0": np.zeros((1, 300, 84), np.float32)}, meta)
    rc, lines, _ = inspect(capsys, str(detr))
    assert rc == 0 and lines[-1] == "input size   64x64 (stretched, no letterbox)"
    assert lines[-2].startswith("format       rtdetr [1, Q, 4+nc] (RT-DETR: ")


def test_the_dynamic_hw_example_uses_the_models_stride(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = np.zeros((1, 84, 100), np.float32)
    meta = {"names": coco_names(), "imgsz": "[640, 640]", "stride": "64"}
    path = const_model(
        tmp_path / "d.onnx", {"output0": out}, meta, (1, 3, "h", "w"), {"output0": ["b", 84, "a"]}
    )
    assert described(capsys, str(path))["input_size"] == (
        "dynamic H/W: each image letterboxed into the smallest 64-multiple rectangle inside 640x640 "
        "(as Ultralytics; e.g. 1080x810 -> 640x512); the camera loop keeps 640x640"  # 480 up to 64s: 512
    )


def test_a_megabyte_is_a_million_bytes(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path, pad, size = tmp_path / "m.onnx", 0, 1_235_000
    while True:  # metadata padding until the file has exactly that size
        model = onnx.load(str(SENSOR))
        model.metadata_props.add(key="pad", value="x" * pad)
        onnx.save(model, str(path))
        have = path.stat().st_size
        if have == size:
            break
        pad += size - have
    rc, lines, _ = inspect(capsys, str(path))
    assert rc == 0 and lines[1].startswith("size         1.24 MB  sha256 "), lines[1]


def test_json_is_indented_one_key_a_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", "--json", str(DETECTOR)]) == 0
    out = capsys.readouterr().out
    assert out == json.dumps(json.loads(out), indent=2) + "\n" and '\n  "path": ' in out


def test_the_provider_and_the_threads_reach_the_session(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[OnnxModel] = []
    real_init = OnnxModel.__init__

    def init(self: OnnxModel, *a: object, **k: object) -> None:
        real_init(self, *a, **k)  # type: ignore[arg-type]
        made.append(self)

    monkeypatch.setattr(OnnxModel, "__init__", init)
    rc, _, _ = inspect(capsys, str(DETECTOR), "--threads", "3")
    assert rc == 0 and [m.session.get_session_options().intra_op_num_threads for m in made] == [3]
    # this onnxruntime has no XNNPACK: asking for it is an error, not a silent CPU run
    rc, lines, err = inspect(capsys, str(DETECTOR), "--provider", "xnnpack")
    assert rc == 1 and lines == [] and "XnnpackExecutionProvider" in err


# the help page as an operator reads it (whitespace folded)
HELP = (
    "usage: edge-agent inspect [-h] [--labels LABELS] [--classifier-preprocess SPEC] [--json] "
    "[--provider PROVIDER] [--threads THREADS] [-v] [-q] model "
    "'edge-agent inspect MODEL': what is this model file (inputs, outputs, classes, quantization)? "
    "positional arguments: model ONNX model file "
    "options: -h, --help show this help message and exit "
    "--labels LABELS labels file overriding the model's class names "
    "--classifier-preprocess SPEC classifier preprocessing to show (as for infer) "
    "--json print the description as JSON "
)


def test_the_help_page_says_what_each_option_does(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "2000")
    with pytest.raises(SystemExit):
        main(["inspect", "--help"])
    assert " ".join(capsys.readouterr().out.split()).startswith(HELP)
    with pytest.raises(SystemExit):
        main(["--help"])
    assert " inspect describe an ONNX model file " in " ".join(capsys.readouterr().out.split())
