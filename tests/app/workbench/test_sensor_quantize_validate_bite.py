"""`validate --sensor` and `quantize SENSOR_MODEL --calib` in process, the promises the first
mutation run of app-sensor-quantize-validate (2026-12-04) found untested (issue 36): which readings
a window's labels come from (lost readings, another sensor's lines, the first reading), the
operators quantized and the calibration method, --threads on every model, the quantizer's error in
one line, --target-ort's line, a new output folder, the JSON layout, the verdict by name and the
figures' places."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

from edge_agent.app.cli.main import main
from edge_agent.inference.sensor_model import SensorModel, SensorOutcome

ROOT = Path(__file__).resolve().parents[3]
DATA = ROOT / "models" / "data" / "basicmotions"
MODEL = ROOT / "models" / "demo-sensor.onnx"


def rows_of(src: Path, keep: range) -> list[dict[str, str]]:
    with src.open(newline="") as f:
        return [r for i, r in enumerate(csv.DictReader(f)) if i in keep]


def write(path: Path, rows: list[dict[str, str]]) -> Path:
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return path


def report(capsys: pytest.CaptureFixture[str], rec: Path) -> dict[str, object]:
    assert main(["validate", str(MODEL), str(MODEL), "--sensor", str(rec), "--json"]) == 0
    out = capsys.readouterr().out
    rep: dict[str, object] = json.loads(out)
    return rep


def test_lost_readings_leave_the_labelled_windows_as_they_were(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two series of 100 readings (10 Hz, one label): windows end at readings 50, 75 ... 200 and
    all but the one across the series ([75, 125)) are labelled. Readings 60-64 lost (the times jump
    0.6 s) are rows of holes the model's policy fills: the windows, and which of them lie inside
    one series, are the same; the labels are those of the window's own readings, not of the
    readings 5 further on (the window ending at 100 holds series 0 only)."""
    full = write(tmp_path / "full.csv", rows_of(DATA / "test.csv", range(200)))
    lost = write(
        tmp_path / "lost.csv", [r for i, r in enumerate(rows_of(full, range(200))) if not 60 <= i < 65]
    )
    whole, holed = report(capsys, full), report(capsys, lost)
    assert (whole["windows"], whole["labelled_windows"]) == (7, 6)
    assert (holed["windows"], holed["labelled_windows"]) == (7, 6)


def test_the_json_report_is_indented_one_key_a_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(MODEL), str(MODEL), "--sensor", str(DATA / "test.csv"), "--json"]) == 0
    out = capsys.readouterr().out
    assert out == json.dumps(json.loads(out), indent=2) + "\n"


def conv_gemm_model(path: Path) -> Path:
    """A sensor model of the demo's metadata (windows, labels) with a Conv, a ReduceMean over time
    and a Gemm (the demo model has MatMul nodes only)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("ReduceMean", ["r"], ["m"], axes=[2], keepdims=0),
        helper.make_node("Gemm", ["m", "g"], ["z"], transB=1),
        helper.make_node("Softmax", ["z"], ["probs"], axis=1),
    ]
    graph = helper.make_graph(
        nodes,
        "conv-gemm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 6, 50])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [1, 4])],
        [
            numpy_helper.from_array(rng.normal(size=(4, 6, 5)).astype(np.float32), "w"),
            numpy_helper.from_array(rng.normal(size=(4, 4)).astype(np.float32), "g"),
        ],
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=7)
    for p in onnx.load(str(MODEL)).metadata_props:
        m.metadata_props.add(key=p.key, value=p.value)
    onnx.save(m, str(path))
    return path


def test_conv_and_gemm_are_quantized_the_reduction_stays_float(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """QDQ: each input of a Conv or Gemm comes through a DequantizeLinear (uint8 activations, int8
    weights); the ReduceMean reads the float Relu."""
    import onnx

    src = conv_gemm_model(tmp_path / "cg.onnx")
    out = tmp_path / "cg.int8.onnx"
    argv = ["quantize", str(src), "--calib", str(DATA / "train.csv"), "-o", str(out), "--no-validate"]
    assert main(argv) == 0, capsys.readouterr().err
    g = onnx.load(str(out)).graph
    made = {o: n for n in g.node for o in n.output}  # each value -> the node that makes it
    consts = {i.name: i for i in g.initializer}
    for n in g.node:
        if n.op_type in ("Conv", "Gemm"):
            act, weight = (made[i] for i in n.input[:2])
            assert (act.op_type, weight.op_type) == ("DequantizeLinear", "DequantizeLinear"), n.op_type
            assert consts[weight.input[0]].data_type == onnx.TensorProto.INT8
            zero = consts[act.input[2]]
            assert zero.data_type == onnx.TensorProto.UINT8
    reduce = next(n for n in g.node if n.op_type == "ReduceMean")
    assert made[reduce.input[0]].op_type == "Relu"
    assert {n.op_type for n in g.node} >= {"Conv", "Gemm", "QuantizeLinear", "DequantizeLinear"}


@pytest.mark.parametrize("method", ["minmax", "entropy", "percentile"])
def test_each_calibration_method_quantizes_into_a_new_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], method: str
) -> None:
    out = tmp_path / "a" / "b" / "q.onnx"  # folders that do not exist yet
    calib = write(tmp_path / "calib.csv", rows_of(DATA / "train.csv", range(300)))
    argv = [
        "quantize",
        str(MODEL),
        "--calib",
        str(calib),
        "-o",
        str(out),
        "--no-validate",
        "--method",
        method,
    ]
    assert main(argv) == 0
    assert (
        f"quantized demo-sensor.onnx -> {out} (QDQ, 11 recorded windows, {method})\n"
        in capsys.readouterr().err
    )
    assert out.is_file()


def input_scales(path: Path) -> list[float]:
    """The scales of the QuantizeLinear nodes, in graph order: the calibrated activation ranges."""
    import onnx
    from onnx import numpy_helper

    g = onnx.load(str(path)).graph
    consts = {i.name: float(numpy_helper.to_array(i)) for i in g.initializer if not i.dims}
    return [consts[n.input[1]] for n in g.node if n.op_type == "QuantizeLinear"]


def test_the_method_reaches_the_calibration(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """percentile clips the activation ranges minmax takes whole: smaller scales on the same windows
    (entropy, on these few windows, keeps minmax's ranges: not compared)."""
    calib = write(tmp_path / "calib.csv", rows_of(DATA / "train.csv", range(600)))
    scales = {}
    for method in ("minmax", "percentile"):
        out = tmp_path / f"{method}.onnx"
        argv = ["quantize", str(MODEL), "--calib", str(calib), "-o", str(out), "--no-validate"]
        assert main([*argv, "--method", method]) == 0, capsys.readouterr().err
        scales[method] = input_scales(out)
    assert len(scales["minmax"]) == len(scales["percentile"]) > 0
    assert all(p < m for p, m in zip(scales["percentile"], scales["minmax"])), scales


def test_threads_reach_the_model_it_calibrates_on_and_both_models_compared(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """--threads 2 (a sensor model opens with one thread unless told)."""
    from edge_agent.adapters.runtime import onnx_model

    opened: list[onnx_model.OnnxModel] = []

    class Recorded(onnx_model.OnnxModel):  # the real model, recorded
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, **kwargs)  # type: ignore[arg-type]
            opened.append(self)

    monkeypatch.setattr(onnx_model, "OnnxModel", Recorded)
    calib = write(tmp_path / "calib.csv", rows_of(DATA / "train.csv", range(300)))
    argv = ["quantize", str(MODEL), "--calib", str(calib), "-o", str(tmp_path / "q.onnx"), "--no-validate"]
    assert main([*argv, "--threads", "2"]) == 0
    assert main(["validate", str(MODEL), str(MODEL), "--sensor", str(calib), "--threads", "2"]) == 0
    assert [m.session.get_session_options().intra_op_num_threads for m in opened] == [2, 2, 2]


@pytest.mark.parametrize(
    ("raised", "line"),
    [
        (ValueError("a tensor has no range\n  in node MatMul_3"), "a tensor has no range"),
        (RuntimeError(), "RuntimeError"),
    ],
)
def test_a_quantizer_error_is_one_line_and_leaves_no_model(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    raised: Exception,
    line: str,
) -> None:
    """onnxruntime's quantizer fails with any exception, of many lines or none: the command says
    its first line (or its type) after the model's name, exit 1, and writes no output."""
    import onnxruntime.quantization

    def fails(*_a: object, **_k: object) -> None:
        raise raised

    monkeypatch.setattr(onnxruntime.quantization, "quantize_static", fails)
    calib = write(tmp_path / "calib.csv", rows_of(DATA / "train.csv", range(300)))
    out = tmp_path / "q.onnx"
    assert main(["quantize", str(MODEL), "--calib", str(calib), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert err == f"edge-agent quantize: error: {MODEL}: quantization failed: {line}\n"
    assert not out.exists()


def test_target_ort_says_what_it_lowered(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The demo model as a newer exporter stamps it (opset 17), for onnxruntime 1.11 (opset 16)."""
    import onnx

    newer = onnx.load(str(MODEL))
    newer.ir_version = 9
    next(o for o in newer.opset_import if o.domain in ("", "ai.onnx")).version = 17
    src = tmp_path / "newer.onnx"
    onnx.save(newer, str(src))
    calib = write(tmp_path / "calib.csv", rows_of(DATA / "train.csv", range(300)))
    argv = ["quantize", str(src), "--calib", str(calib), "-o", str(tmp_path / "q.onnx"), "--no-validate"]
    assert main([*argv, "--target-ort", "1.11"]) == 0
    assert capsys.readouterr().err.splitlines()[0] == "opset 17 -> 16 (onnx version converter)"


def test_a_window_whose_first_reading_is_of_another_series_is_not_labelled(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Readings 99-298 of the test split (series of 100 readings): the windows [0, 50) ... [150,
    200) hold readings 99+s to 148+s; those inside one series are s = 25, 50, 125, 150 (s = 0 holds
    reading 99 of series 0 and the rest of series 1)."""
    rec = write(tmp_path / "rec.csv", rows_of(DATA / "test.csv", range(99, 299)))
    rep = report(capsys, rec)
    assert (rep["windows"], rep["labelled_windows"]) == (7, 4)


def test_a_reading_of_another_sensor_is_no_row_of_the_windows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A .jsonl line with none of the model's channels belongs to another sensor on the same line:
    the windows and their labels are those of the recording without it."""
    rows = rows_of(DATA / "test.csv", range(200))
    numbers = [{k: v if k == "label" else float(v) for k, v in r.items()} for r in rows]
    other = {"t": 6.05, "series": 0, "label": "Running", "temp": 21.5}
    lines = (
        [json.dumps(r) for r in numbers[:61]] + [json.dumps(other)] + [json.dumps(r) for r in numbers[61:]]
    )
    mixed = tmp_path / "two-sensors.jsonl"
    mixed.write_text("\n".join(lines) + "\n")
    rep = report(capsys, mixed)
    assert (rep["windows"], rep["labelled_windows"]) == (7, 6)
    assert rep == report(capsys, write(tmp_path / "one.csv", rows))


def variant(path: Path, src: Path = MODEL, **meta: str) -> Path:
    """A sensor model with some of its metadata replaced or added."""
    import onnx

    m = onnx.load(str(src))
    for p in m.metadata_props:
        if p.key in meta:
            p.value = meta.pop(p.key)
    for k, v in meta.items():
        m.metadata_props.add(key=k, value=v)
    onnx.save(m, str(path))
    return path


def minus_half(path: Path) -> Path:
    """The demo model as a score model whose output is its probabilities less 0.5."""
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper

    m = onnx.load(str(variant(path, task="score")))
    out = m.graph.output[0].name
    for node in m.graph.node:
        node.output[:] = [out + "_inner" if o == out else o for o in node.output]
    m.graph.initializer.append(numpy_helper.from_array(np.array(0.5, np.float32), "half"))
    m.graph.node.append(helper.make_node("Sub", [out + "_inner", "half"], [out]))
    onnx.save(m, str(path))
    return path


def outcomes(ref: Path, cand: Path, rec: Path) -> list[tuple[SensorOutcome, SensorOutcome]]:
    """Both models on the reference's windows of ``rec``, computed here from the models."""
    from edge_agent.app.workbench.infer_sensor import read_recording

    a, b = SensorModel.load(str(ref)), SensorModel.load(str(cand))
    win = a.windower()
    return [(a.infer(w), b.infer(w)) for r in read_recording(rec) for w in win.push(r, float(r["t"]))]


def validate(
    capsys: pytest.CaptureFixture[str], ref: Path, cand: Path, rec: Path, *flags: str
) -> tuple[int, Any]:
    rc = main(["validate", str(ref), str(cand), "--sensor", str(rec), "--json", *flags])
    return rc, json.loads(capsys.readouterr().out)


def test_a_classifier_that_disagrees_fails_on_the_agreement_alone_with_it_to_4_places(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rec = DATA / "test.csv"
    swapped = variant(
        tmp_path / "swapped.onnx", labels=json.dumps(["Running", "Standing", "Walking", "Badminton"])
    )
    pairs = outcomes(MODEL, swapped, rec)
    agree = sum(a.label == b.label for a, b in pairs) / len(pairs)
    assert round(agree, 4) != round(agree, 5)
    rc, rep = validate(capsys, MODEL, swapped, rec, "--max-top1-drop", "1")
    assert (rc, rep["top1_agreement"], rep["verdict"]) == (1, round(agree, 4), "FAIL")


def test_score_models_fail_by_name_and_the_mean_difference_has_6_places(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rec = write(tmp_path / "rec.csv", rows_of(DATA / "test.csv", range(1000)))
    ref = variant(tmp_path / "ref.onnx", task="score")
    shifted = variant(tmp_path / "shifted.onnx", src=ref, mean=json.dumps([2.5, -1.3, -1.0, 0.0, 0.0, -0.1]))
    pairs = outcomes(ref, shifted, rec)
    diff = sum(abs(float(a.score or 0) - float(b.score or 0)) for a, b in pairs) / len(pairs)
    assert all(a.score is not None and b.score is not None for a, b in pairs)
    assert round(diff, 6) != round(diff, 7)
    rc, rep = validate(capsys, ref, shifted, rec)
    assert (rc, rep["mean_abs_score_diff"], rep["verdict"]) == (0, round(diff, 6), "PASS")
    rc, rep = validate(capsys, ref, minus_half(tmp_path / "cand.onnx"), rec, "--min-top1-agreement", "1")
    assert (rc, rep["verdict"]) == (1, "FAIL") and rep["anomaly_agreement"] < 1


def test_a_regress_candidate_without_the_reference_s_outputs_differs_by_nan(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The value of an output the candidate does not name is unknown: the largest difference is
    NaN (reported, never a traceback)."""
    rec = write(tmp_path / "rec.csv", rows_of(DATA / "test.csv", range(1000)))
    ref = variant(tmp_path / "ref.onnx", task="regress")
    other = variant(tmp_path / "other.onnx", task="regress", outputs=json.dumps(["a", "b", "c", "d"]))
    rc, rep = validate(capsys, ref, other, rec)
    assert rc == 0 and rep["windows"] == 39 and rep["max_abs_value_diff"] != rep["max_abs_value_diff"]


@pytest.mark.parametrize(
    ("kept", "lost", "labelled"),
    [
        # windows of readings 51+s .. 100+s: s = 0 ends on reading 100 (series 1), s = 25, 100, 125
        # cross a series too; s = 50, 75, 150 do not
        (range(51, 251), range(0), 3),
        # readings 95-99 lost: the window [50, 100) ends on its last hole, in the push of reading
        # 100 (series 1), which is no reading of it; [75, 125) alone crosses the series
        (range(200), range(95, 100), 6),
        # readings 30-34 lost, the windows hold readings 20+s .. 69+s: s = 75 holds 95-99 of series 0
        # and 100-144 of series 1; s = 50 and 150 cross too
        (range(20, 220), range(30, 35), 4),
    ],
)
def test_a_window_s_labels_are_its_own_readings_at_each_end(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kept: range, lost: range, labelled: int
) -> None:
    rows = [r for i, r in zip(kept, rows_of(DATA / "test.csv", kept)) if i not in lost]
    rep = report(capsys, write(tmp_path / "rec.csv", rows))
    assert (rep["windows"], rep["labelled_windows"]) == (7, labelled)
