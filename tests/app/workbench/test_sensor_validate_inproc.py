"""`validate --sensor` and `quantize SENSOR_MODEL --calib RECORDING` in process (issue 36, area
app-sensor-quantize-validate): the report's figures for each task, the thresholds at their bounds,
the windows both commands read (with or without a time column), and the refusals in one line.
test_infer_sensor.py runs the same commands as subprocesses, which mutation testing cannot see."""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest

from edge_agent.adapters.runtime.onnx_model import OnnxModel
from edge_agent.app.cli.main import main
from edge_agent.app.workbench.infer_sensor import read_recording
from edge_agent.app.workbench.quantize_sensor import is_recording
from edge_agent.inference.sensor_model import SensorModel

ROOT = Path(__file__).resolve().parents[3]
DATA = ROOT / "models" / "data" / "basicmotions"
MODEL = ROOT / "models" / "demo-sensor.onnx"


def recording(path: Path, rows: int = 4000, drop: Sequence[str] = (), src: Path = DATA / "test.csv") -> Path:
    """The first ``rows`` readings of a committed recording, without the columns in ``drop``."""
    with src.open(newline="") as f:
        reader = csv.DictReader(f)
        fields = [c for c in reader.fieldnames or [] if c not in drop]
        kept = [r for _, r in zip(range(rows), reader)]
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fields, extrasaction="ignore")
        w.writeheader()
        w.writerows(kept)
    return path


def variant(path: Path, **meta: str) -> Path:
    """The demo sensor model with some of its metadata replaced."""
    m = onnx.load(str(MODEL))
    for p in m.metadata_props:
        if p.key in meta:
            p.value = meta.pop(p.key)
    for k, v in meta.items():
        m.metadata_props.add(key=k, value=v)
    onnx.save(m, str(path))
    return path


def shifted_mean() -> str:
    m = {p.key: p.value for p in onnx.load(str(MODEL)).metadata_props}
    return json.dumps([v + 2.0 for v in json.loads(m["mean"])])


def validate(
    capsys: pytest.CaptureFixture[str], ref: Path, cand: Path, rec: Path, *flags: str
) -> tuple[int, Any]:
    rc = main(["validate", str(ref), str(cand), "--sensor", str(rec), "--json", *flags])
    return rc, json.loads(capsys.readouterr().out)


def outcomes(ref: Path, cand: Path, rec: Path) -> list[tuple[Any, Any]]:
    """Both models on the reference's windows of ``rec``, computed here from the models."""
    a, b = SensorModel.load(str(ref)), SensorModel.load(str(cand))
    win = a.windower()
    return [(a.infer(w), b.infer(w)) for r in read_recording(rec) for w in win.push(r, float(r["t"]))]


def test_a_twin_passes_with_every_figure_of_the_report(capsys: pytest.CaptureFixture[str]) -> None:
    rec = DATA / "test.csv"
    rc, rep = validate(capsys, MODEL, MODEL, rec)
    assert rc == 0
    assert list(rep.items()) == [
        ("reference", str(MODEL)),
        ("candidate", str(MODEL)),
        ("windows", 159),
        ("top1_agreement", 1.0),
        ("labelled_windows", 120),  # the windows inside one series with one label
        ("accuracy_reference", 0.9833),
        ("accuracy_candidate", 0.9833),
        ("verdict", "PASS"),
    ]
    # the same as a table without --json, one key a line, the values in one column
    assert main(["validate", str(MODEL), str(MODEL), "--sensor", str(rec)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[2:4] == ["windows                159", "top1_agreement         1.0"]
    assert out.endswith("verdict                PASS\n")


def test_the_thresholds_hold_at_their_bounds_and_each_fails_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rec = DATA / "test.csv"
    labels = json.dumps(["Badminton", "Walking", "Running", "Standing"])
    shuffled = variant(tmp_path / "shuffled.onnx", labels=labels)
    # a twin: agreement 1.0 and drop 0.0 sit exactly on the strictest limits, and pass
    assert validate(capsys, MODEL, MODEL, rec, "--min-top1-agreement", "1", "--max-top1-drop", "0")[0] == 0
    rc, rep = validate(capsys, MODEL, shuffled, rec)
    assert rc == 1 and rep["verdict"] == "FAIL" and rep["accuracy_candidate"] < 0.5
    assert rep["top1_agreement"] < 0.5 and rep["accuracy_reference"] == 0.9833
    assert validate(capsys, MODEL, shuffled, rec, "--min-top1-agreement", "0", "--max-top1-drop", "1")[0] == 0
    assert validate(capsys, MODEL, shuffled, rec, "--min-top1-agreement", "0")[0] == 1  # the drop alone
    assert validate(capsys, MODEL, shuffled, rec, "--max-top1-drop", "1")[0] == 1  # the agreement alone


def test_a_recording_without_times_series_or_labels(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # no `t`: the readings are taken at the model's rate (10 Hz), the same windows as with the times
    _, with_t = validate(capsys, MODEL, MODEL, DATA / "test.csv")
    _, no_t = validate(capsys, MODEL, MODEL, recording(tmp_path / "no-t.csv", drop=["t"]))
    assert {**no_t, "reference": 0} == {**with_t, "reference": 0}
    # no label column: agreement only
    _, rep = validate(capsys, MODEL, MODEL, recording(tmp_path / "no-label.csv", drop=["label"]))
    assert set(rep) == {"reference", "candidate", "windows", "top1_agreement", "verdict"}
    # no series column: a window across two recordings of one label counts too
    _, rep = validate(capsys, MODEL, MODEL, recording(tmp_path / "no-series.csv", drop=["series"]))
    assert rep["windows"] == 159 and rep["labelled_windows"] == 156


def test_a_candidate_reading_other_windows_or_a_short_recording_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = variant(tmp_path / "regress.onnx", task="regress")
    assert main(["validate", str(MODEL), str(other), "--sensor", str(DATA / "test.csv")]) == 1
    assert (
        f"validate --sensor: {other} reads regress 50x6 (NCT), the reference classify 50x6 (NCT): "
        "not the same windows\n"
    ) in capsys.readouterr().err
    short = recording(tmp_path / "short.csv", rows=49)
    assert main(["validate", str(MODEL), str(MODEL), "--sensor", str(short)]) == 1
    err = capsys.readouterr().err
    assert f"--sensor {short}: no complete window of 50 readings\n" in err and "Traceback" not in err


def minus_half(path: Path, **meta: str) -> Path:
    """The demo sensor model whose output is its probabilities less 0.5 (negative below 0.5)."""
    from onnx import helper, numpy_helper

    m = onnx.load(str(variant(path, **meta)))
    out = m.graph.output[0]
    inner = out.name + "_inner"
    for node in m.graph.node:
        node.output[:] = [inner if o == out.name else o for o in node.output]
    m.graph.initializer.append(numpy_helper.from_array(np.array(0.5, np.float32), "half"))
    m.graph.node.append(helper.make_node("Sub", [inner, "half"], [out.name]))
    onnx.save(m, str(path))
    return path


def test_score_models_agree_on_the_anomaly_flag_and_report_the_mean_score_difference(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without a [[sensor_models]] threshold a score from 0 up is an anomaly: the reference's
    probabilities always are, the candidate's (less 0.5) only from 0.5."""
    rec = recording(tmp_path / "rec.csv", rows=1000)
    ref = variant(tmp_path / "ref.onnx", task="score")
    cand = minus_half(tmp_path / "cand.onnx", task="score")
    rc, rep = validate(capsys, ref, ref, rec, "--min-top1-agreement", "1")
    assert rc == 0 and {k: rep[k] for k in ("windows", "anomaly_agreement", "mean_abs_score_diff")} == {
        "windows": 39,
        "anomaly_agreement": 1.0,
        "mean_abs_score_diff": 0.0,
    }
    scores = [a.score for a, _ in outcomes(ref, ref, rec)]
    agree = sum(x >= 0.5 for x in scores) / len(scores)
    assert 0 < agree < 1
    rc, rep = validate(capsys, ref, cand, rec, "--min-top1-agreement", str(agree))
    assert rep == {
        "reference": str(ref),
        "candidate": str(cand),
        "windows": 39,
        "anomaly_agreement": round(agree, 4),
        "mean_abs_score_diff": 0.5,
        "verdict": "PASS",
    }
    assert rc == 0
    assert validate(capsys, ref, cand, rec, "--min-top1-agreement", str(min(1.0, agree + 0.01)))[0] == 1


def test_regress_models_report_the_largest_value_difference_and_always_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rec = recording(tmp_path / "rec.csv", rows=1000)
    ref = variant(tmp_path / "ref.onnx", task="regress")
    cand = variant(tmp_path / "cand.onnx", task="regress", mean=shifted_mean())
    pairs = outcomes(ref, cand, rec)
    largest = max(abs(v - b.values[k]) for a, b in pairs for k, v in a.values.items())
    assert largest > 0
    rc, rep = validate(capsys, ref, cand, rec, "--min-top1-agreement", "1")
    assert rc == 0 and rep == {
        "reference": str(ref),
        "candidate": str(cand),
        "windows": 39,
        "max_abs_value_diff": round(largest, 6),
        "verdict": "PASS",
    }


def test_is_recording_takes_csv_and_jsonl_files_only(tmp_path: Path) -> None:
    for name in ("a.csv", "b.JSONL", "c.CSV"):
        (tmp_path / name).write_text("x\n")
        assert is_recording(str(tmp_path / name))
    (tmp_path / "d.txt").write_text("x\n")
    (tmp_path / "e.csv").mkdir()
    assert not is_recording(str(tmp_path / "d.txt")) and not is_recording(str(tmp_path / "e.csv"))
    assert not is_recording(str(tmp_path / "missing.csv"))


def quantize(
    capsys: pytest.CaptureFixture[str], out: Path, calib: Path, *flags: str, model: Path = MODEL
) -> tuple[int, str, str]:
    rc = main(["quantize", str(model), "--calib", str(calib), "-o", str(out), *flags])
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def int8_weights(path: Path) -> np.ndarray:
    m = onnx.load(str(path))
    arrays = [onnx.numpy_helper.to_array(i) for i in m.graph.initializer]
    return np.concatenate([a.reshape(-1).astype(np.int32) for a in arrays if a.dtype == np.int8])


def test_quantize_calibrates_on_the_windows_and_validates_on_the_other_recording(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    calib = DATA / "train.csv"
    out = tmp_path / "sub" / "q.onnx"
    rc, stdout, err = quantize(capsys, out, calib, "--val", str(DATA / "test.csv"), "--samples", "0")
    assert rc == 0, err
    assert f"quantized demo-sensor.onnx -> {out} (QDQ, 159 recorded windows, minmax)\n" in err
    assert OnnxModel(out, warmup=False).info.quant_kind == "qdq_int8"
    lines = dict(line.split(None, 1) for line in stdout.splitlines())
    assert lines["windows"] == "159" and lines["verdict"] == "PASS" and lines["candidate"] == str(out)
    assert np.abs(int8_weights(out)).max() > 64  # full-range int8 weights by default
    # --samples N spreads N of the windows; the default takes up to 128; --method is named
    rc, _, err = quantize(capsys, out, calib, "--samples", "10", "--no-validate", "--method", "entropy")
    assert rc == 0 and f"-> {out} (QDQ, 10 recorded windows, entropy)\n" in err
    rc, _, err = quantize(capsys, out, DATA / "train.csv", "--no-validate")
    assert rc == 0 and "(QDQ, 128 recorded windows, minmax)" in err


def test_a_recording_without_times_calibrates_on_the_same_windows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The readings of a file without `t` come at the model's rate (as `validate --sensor` and
    `infer --sensor` read them), not one a second: at 10 Hz those would be gaps of 9 readings."""
    calib = recording(tmp_path / "calib.csv", src=DATA / "train.csv", drop=["t"])
    rc, _, err = quantize(capsys, tmp_path / "q.onnx", calib, "--samples", "0", "--no-validate")
    assert rc == 0, err
    assert "(QDQ, 159 recorded windows, minmax)" in err


def test_no_validate_says_what_to_run_and_a_val_that_is_no_recording_validates_on_the_calibration(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    calib = recording(tmp_path / "calib.csv", rows=3000, src=DATA / "train.csv")
    out = tmp_path / "q.onnx"
    rc, stdout, err = quantize(capsys, out, calib, "--no-validate")
    assert rc == 0 and stdout == "" and out.is_file()
    assert err.endswith(
        "validation skipped (--no-validate): run `edge-agent validate --sensor` before shipping\n"
    )
    rc, stdout, _ = quantize(capsys, out, calib, "--val", str(tmp_path))
    assert rc == 0 and "windows                119\n" in stdout  # the calibration recording's


def test_reduce_range_and_target_ort_reach_the_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    calib = recording(tmp_path / "calib.csv", rows=1000, src=DATA / "train.csv")
    newer = onnx.load(str(MODEL))  # the demo model as a newer exporter stamps it: IR 9, opset 17
    newer.ir_version = 9
    next(o for o in newer.opset_import if o.domain in ("", "ai.onnx")).version = 17
    src = tmp_path / "newer.onnx"
    onnx.save(newer, str(src))
    out = tmp_path / "q.onnx"
    flags = ["--no-validate", "--reduce-range", "--target-ort", "1.11"]
    assert quantize(capsys, out, calib, *flags, model=src)[0] == 0
    assert np.abs(int8_weights(out)).max() <= 64  # 7-bit weights
    assert stamps(out) == (8, 16)  # what onnxruntime 1.11 reads
    assert quantize(capsys, out, calib, "--no-validate", model=src)[0] == 0
    assert stamps(out) == (9, 17)  # kept without --target-ort


def stamps(path: Path) -> tuple[int, int]:
    m = onnx.load(str(path))
    return m.ir_version, next(o.version for o in m.opset_import if o.domain in ("", "ai.onnx"))


def test_a_short_calibration_recording_is_one_line_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    short = recording(tmp_path / "short.csv", rows=49)
    out = tmp_path / "q.onnx"
    rc, _, err = quantize(capsys, out, short)
    assert rc == 1 and f"--calib {short}: no complete window of 50 readings\n" in err
    assert not out.exists()


def test_a_model_that_fails_validation_is_kept_under_the_failed_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # calibrated on readings that never move: every activation range is one value, INT8 breaks
    calib = tmp_path / "flat.csv"
    calib.write_text("acc_x,acc_y,acc_z,gyr_x,gyr_y,gyr_z\n" + "0,0,0,0,0,0\n" * 60)
    out = tmp_path / "q.onnx"
    rc, stdout, err = quantize(
        capsys, out, calib, "--val", str(DATA / "test.csv"), "--min-top1-agreement", "1"
    )
    bad = tmp_path / "q.FAILED-VALIDATION.onnx"
    assert rc == 1 and not out.exists() and bad.is_file()
    assert "verdict                FAIL" in stdout
    assert err.endswith(
        f"edge-agent quantize: error: the INT8 model fails validation; kept as {bad} - do not ship it\n"
    )


def test_provider_and_threads_reach_every_sensor_model_opened(
    tmp_path: Path, opened_models: list[Any], capsys: pytest.CaptureFixture[str]
) -> None:
    """--provider / --threads: the model calibrated and both models of the validation, in both commands."""
    flags = ["--provider", "cpu", "--threads", "1"]
    rec = recording(tmp_path / "rec.csv", rows=1000)
    assert validate(capsys, MODEL, MODEL, rec, *flags)[0] == 0
    out = tmp_path / "q.onnx"
    assert quantize(capsys, out, DATA / "train.csv", *flags)[0] == 0
    assert [m.path for m in opened_models] == [MODEL, MODEL, MODEL, MODEL, out]
    for m in opened_models:
        assert m.info.provider_reason == "override: cpu"
        assert m.session.get_session_options().intra_op_num_threads == 1


def weights(path: Path) -> dict[str, np.ndarray]:
    return {i.name: onnx.numpy_helper.to_array(i) for i in onnx.load(str(path)).graph.initializer}


def test_samples_spreads_over_the_windows_it_keeps(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--samples 2 of 3 windows calibrates on windows 0 and 1: the model a recording of only
    those two windows gives (calibration is deterministic)."""
    out2, out_all = tmp_path / "two.onnx", tmp_path / "all.onnx"
    three = recording(tmp_path / "three.csv", rows=100, src=DATA / "train.csv")  # windows end at 50, 75, 100
    first_two = recording(tmp_path / "first-two.csv", rows=75, src=DATA / "train.csv")
    assert quantize(capsys, out2, three, "--samples", "2", "--no-validate")[0] == 0
    assert quantize(capsys, out_all, first_two, "--samples", "0", "--no-validate")[0] == 0
    a, b = weights(out2), weights(out_all)
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def test_quantize_windows_a_recording_with_a_gap_as_validate_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The calibration windows are the agent's: readings 100 s apart are a gap, no window spans it."""
    src = recording(tmp_path / "src.csv", rows=1000, src=DATA / "train.csv")
    rows = list(csv.DictReader(src.open(newline="")))
    for r in rows[500:]:
        r["t"] = str(float(r["t"]) + 100.0)
    gap = tmp_path / "gap.csv"
    with gap.open("w", newline="") as f:
        w = csv.DictWriter(f, list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    _, rep = validate(capsys, MODEL, MODEL, gap)
    assert rep["windows"] < 39  # fewer than without the gap
    rc, _, err = quantize(capsys, tmp_path / "q.onnx", gap, "--samples", "0", "--no-validate")
    assert rc == 0 and f"(QDQ, {rep['windows']} recorded windows, minmax)" in err
