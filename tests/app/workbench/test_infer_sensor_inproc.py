"""``edge-agent infer --sensor`` in process (``cli.main`` with capsys, so mutation testing credits
it; tests/app/workbench/test_infer_sensor.py runs the same as subprocesses): which window carries a
truth, the accuracy, the time column, the text lines, score and regress models, and every bad
recording is one line."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from edge_agent.app.cli.main import main

ROOT = Path(__file__).resolve().parents[3]
RECORDING = ROOT / "models" / "data" / "basicmotions" / "test.csv"
MODEL = ROOT / "models" / "demo-sensor.onnx"
WINDOW, HOP = 50, 25  # the demo model's spec (10 Hz)


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = main(["infer", *args])
    out, err = capsys.readouterr()
    return rc, out, err


def rows_of(out: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in out.splitlines()]


def summary_of(err: str) -> dict[str, object]:
    return json.loads(err.split("summary: ", 1)[1].splitlines()[0])  # type: ignore[no-any-return]


def recording(n: int = 200) -> tuple[list[str], list[list[str]]]:
    with RECORDING.open(newline="") as f:
        lines = list(csv.reader(f))
    return lines[0], lines[1 : n + 1]


def write_csv(path: Path, header: list[str], rows: list[list[str]]) -> Path:
    with path.open("w", newline="") as f:
        csv.writer(f).writerows([header, *rows])
    return path


def test_a_window_has_a_truth_only_when_its_readings_share_one_label_and_one_series(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rc, out, err = run(capsys, "--sensor", str(RECORDING), "-m", str(MODEL), "--json")
    assert rc == 0, err
    rows = rows_of(out)
    header, data = recording(4000)
    label, series = header.index("label"), header.index("series")
    assert [r["window"] for r in rows] == list(range(159))
    for r in rows:
        k = int(str(r["window"]))
        span = data[k * HOP : k * HOP + WINDOW]
        one = len({x[label] for x in span}) == 1 and len({x[series] for x in span}) == 1
        assert r.get("truth") == (span[0][label] if one else None), r
        assert r["task"] == "classify" and r["filled"] == 0 and 0 < float(str(r["confidence"])) <= 1
        assert list(r) == [
            "window",
            "task",
            "filled",
            "label",
            "confidence",
            *(["truth"] if one else []),
            "infer_ms",
        ]
    labelled = [r for r in rows if "truth" in r]
    right = sum(r["label"] == r["truth"] for r in labelled)
    assert summary_of(err) == {
        "readings": 4000,
        "windows_due": 159,
        "windows": 159,
        "dropped": {},
        "labelled_windows": len(labelled),
        "accuracy": round(right / len(labelled), 4),
    }
    assert (len(labelled), right) == (120, 118)
    assert "classify: window 50 readings, hop 25 at 10 Hz" in err


def test_the_demo_sensor_model_is_the_default(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    header, data = recording(100)
    rec = write_csv(tmp_path / "rec.csv", header, data)
    rc, default, _ = run(capsys, "--sensor", str(rec), "--json")
    assert rc == 0
    _, named, _ = run(capsys, "--sensor", str(rec), "-m", str(MODEL), "--json")

    def strip(out: str) -> list[dict[str, object]]:
        return [{k: v for k, v in r.items() if k != "infer_ms"} for r in rows_of(out)]

    assert strip(default) == strip(named) and len(strip(default)) == 3


def test_the_text_lines_carry_the_label_confidence_truth_and_time(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    header, data = recording(100)
    data = [row[:] for row in data]
    for row in data[60:]:  # window 2 (readings 50..99) mixes two labels: no truth
        row[header.index("label")] = "Running"
    rec = write_csv(tmp_path / "rec.csv", header, data)
    rc, text, _ = run(capsys, "--sensor", str(rec), "-m", str(MODEL))
    assert rc == 0
    _, js, _ = run(capsys, "--sensor", str(rec), "-m", str(MODEL), "--json")
    lines, rows = text.splitlines(), rows_of(js)
    assert len(lines) == len(rows) == 3
    for line, r in zip(lines, rows):
        truth = f"  (truth {r['truth']})" if "truth" in r else ""
        m = re.fullmatch(
            rf"window {r['window']:>5}  (\S+) (\d\.\d{{3}}){re.escape(truth)}  (\d+\.\d\d) ms", line
        )
        assert m, line
        assert m.group(1) == r["label"] and float(m.group(2)) == pytest.approx(
            float(str(r["confidence"])), abs=6e-4
        )
    assert "truth" not in lines[2] and "(truth Standing)" in lines[0]


def test_a_window_across_two_series_of_the_same_label_has_no_truth(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    header, data = recording(150)
    data = [row[:] for row in data]
    for i, row in enumerate(data):
        row[header.index("series")] = "0" if i < 75 else "1"
        row[header.index("label")] = "Standing"
    rec = write_csv(tmp_path / "rec.csv", header, data)
    rc, out, err = run(capsys, "--sensor", str(rec), "-m", str(MODEL), "--json")
    assert rc == 0
    assert ["truth" in r for r in rows_of(out)] == [True, True, False, True, True]
    assert summary_of(err)["labelled_windows"] == 4


def test_without_labels_there_is_no_truth_and_no_accuracy(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    header, data = recording(100)
    keep = [i for i, k in enumerate(header) if k not in ("label", "series")]
    rec = write_csv(tmp_path / "rec.csv", [header[i] for i in keep], [[r[i] for i in keep] for r in data])
    rc, out, err = run(capsys, "--sensor", str(rec), "-m", str(MODEL), "--json")
    assert rc == 0 and len(rows_of(out)) == 3 and not any("truth" in r for r in rows_of(out))
    assert summary_of(err) == {"readings": 100, "windows_due": 3, "windows": 3, "dropped": {}}


def _with_gap(header: list[str], data: list[list[str]], column: str) -> list[list[str]]:
    """The t column renamed ``column``, 2 s (20 readings at 10 Hz) lost after reading 59."""
    out = [row[:] for row in data]
    t = header.index("t")
    for row in out[60:]:
        row[t] = f"{float(row[t]) + 2.0:.1f}"
    return out


@pytest.mark.parametrize(
    ("column", "option", "sees_the_gap"),
    [
        ("t", [], True),  # the default time column
        ("time", ["--time-field", "time"], True),
        ("time", [], False),  # no t column: the readings are taken at the model's rate
        ("t", ["--time-field", "time"], False),  # the named column is absent: at the model's rate
    ],
)
def test_the_time_column_shows_lost_readings(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, column: str, option: list[str], sees_the_gap: bool
) -> None:
    header, data = recording(120)
    rows = _with_gap(header, data, column)
    rec = write_csv(tmp_path / "rec.csv", [column if k == "t" else k for k in header], rows)
    rc, out, err = run(capsys, "--sensor", str(rec), "-m", str(MODEL), "--json", *option)
    assert rc == 0
    windows, summary = rows_of(out), summary_of(err)
    assert summary["readings"] == 120
    if sees_the_gap:  # 20 holes: 140 rows, windows due at 50, 75, 100, 125
        assert summary["windows_due"] == 4 and any(int(str(r["filled"])) > 0 for r in windows)
    else:  # 120 rows: windows at 50, 75, 100
        assert summary["windows_due"] == 3 and all(r["filled"] == 0 for r in windows)


def test_the_default_time_column_is_taken_from_the_first_reading_the_model_reads(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A JSONL log that starts with another sensor's line (no "t", none of the model's channels):
    the model's readings still have their times, and the 2 s lost after reading 59 are seen."""
    header, data = recording(120)
    lines = [json.dumps({"humidity": 41})]
    for row in _with_gap(header, data, "t"):
        lines.append(
            json.dumps({k: float(v) if k not in ("label", "series") else v for k, v in zip(header, row)})
        )
    rec = tmp_path / "rec.jsonl"
    rec.write_text("\n".join(lines) + "\n")
    rc, out, err = run(capsys, "--sensor", str(rec), "-m", str(MODEL), "--json")
    assert rc == 0
    assert summary_of(err)["windows_due"] == 4 and any(int(str(r["filled"])) > 0 for r in rows_of(out))


def _retasked(tmp_path: Path, **meta: str) -> Path:
    onnx = pytest.importorskip("onnx")
    model = onnx.load(str(MODEL))
    props = {p.key: p.value for p in model.metadata_props}
    props.update(meta)
    del model.metadata_props[:]
    for k, v in props.items():
        model.metadata_props.add(key=k, value=v)
    out = tmp_path / f"{meta['task']}.onnx"
    onnx.save(model, str(out))
    return out


def test_a_score_model_gives_its_score_and_anomaly(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    model = _retasked(tmp_path, task="score")
    header, data = recording(100)
    rec = write_csv(tmp_path / "rec.csv", header, data)
    rc, out, err = run(capsys, "--sensor", str(rec), "-m", str(model), "--json")
    assert rc == 0
    rows = rows_of(out)
    assert [list(r) for r in rows] == [
        ["window", "task", "filled", "score", "anomaly", "truth", "infer_ms"]
    ] * 3
    assert all(r["task"] == "score" and r["anomaly"] is True and r["truth"] == "Standing" for r in rows)
    # the model's first output as the score, an anomaly at or above the threshold (0 without a config)
    assert all(isinstance(r["score"], float) and r["score"] >= 0.0 for r in rows)
    assert "labelled_windows" not in summary_of(err)  # a truth is no accuracy for a score
    rc, text, _ = run(capsys, "--sensor", str(rec), "-m", str(model))
    for line, r in zip(text.splitlines(), rows):
        assert line.startswith(
            f"window {r['window']:>5}  score {r['score']} anomaly True  (truth Standing)  "
        )


def test_a_regress_model_gives_its_named_values(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    model = _retasked(tmp_path, task="regress", outputs='["a", "b", "c", "d"]')
    header, data = recording(50)
    rec = write_csv(tmp_path / "rec.csv", header, data)
    rc, out, _ = run(capsys, "--sensor", str(rec), "-m", str(model), "--json")
    assert rc == 0
    (row,) = rows_of(out)
    values = row["values"]
    assert row["task"] == "regress" and isinstance(values, dict) and list(values) == ["a", "b", "c", "d"]
    assert "label" not in row and "score" not in row
    rc, text, _ = run(capsys, "--sensor", str(rec), "-m", str(model))
    assert text.startswith(f"window     0  {json.dumps(values)}  (truth Standing)  ")


def test_a_jsonl_recording_skips_blank_lines_and_reads_any_case_of_suffix(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    header, data = recording(50)
    rec = tmp_path / "rec.JSONL"
    with rec.open("w") as f:
        for i, row in enumerate(data):
            f.write(json.dumps({k: (v if k == "label" else float(v)) for k, v in zip(header, row)}) + "\n")
            if i == 10:
                f.write("\n   \n")
    rc, out, err = run(capsys, "--sensor", str(rec), "-m", str(MODEL), "--json")
    assert rc == 0 and summary_of(err)["readings"] == 50 and rows_of(out)[0]["truth"] == "Standing"
    upper = write_csv(tmp_path / "rec.CSV", header, data)
    rc, out2, _ = run(capsys, "--sensor", str(upper), "-m", str(MODEL), "--json")
    assert rc == 0 and len(rows_of(out2)) == 1


@pytest.mark.parametrize(
    ("name", "text", "error"),
    [
        ("rec.txt", "a\n1\n", "expected a .csv (with a header) or .jsonl file"),
        ("rec.csv", "", "empty file, expected a header row naming the columns"),
        ("rec.csv", "t,acc_x\n0.0,1\n0.1,1,2\n", "line 3: 3 columns, the header has 2"),
        ("rec.csv", "t,acc_x\n0.0\n", "line 2: 1 columns, the header has 2"),
        ("rec.jsonl", '{"acc_x": 1}\n\n[1, 2\n', "line 3: not JSON"),
        (
            "rec.csv",
            "t,temp\n0.0,1\n",
            "no readings with any of the channels acc_x, acc_y, acc_z, gyr_x, gyr_y, gyr_z",
        ),
    ],
)
def test_a_bad_recording_is_one_error_line_naming_the_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str, text: str, error: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    rc, _, err = run(capsys, "--sensor", str(path), "-m", str(MODEL))
    assert rc == 1
    errors = [x for x in err.splitlines() if x.startswith("edge-agent")]
    assert len(errors) == 1 and errors[0].startswith(f"edge-agent infer: error: --sensor {path}: {error}"), (
        err
    )


def test_a_missing_recording_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "none.csv"
    rc, _, err = run(capsys, "--sensor", str(path), "-m", str(MODEL))
    assert rc == 1
    assert (
        f"edge-agent infer: error: --sensor {path}: cannot read: No such file or directory"
        in err.splitlines()
    )


def test_lines_of_another_sensor_do_not_shift_the_truths(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A .jsonl log with lines that carry none of the model's channels: the windower skips them, so
    must the truths (they were counted, and a later window's span then read the wrong readings)."""
    header, data = recording(4000)
    label = header.index("label")
    standing = [r for r in data if r[label] == "Standing"][:50]
    running = [r for r in data if r[label] == "Running"][:50]
    rec = tmp_path / "mixed.jsonl"
    with rec.open("w") as f:
        for row in standing:
            f.write(
                json.dumps({k: (v if k == "label" else float(v)) for k, v in zip(header, row) if k != "t"})
                + "\n"
            )
        for _ in range(20):
            f.write('{"temp": 21.5}\n')
        for row in running:
            f.write(
                json.dumps({k: (v if k == "label" else float(v)) for k, v in zip(header, row) if k != "t"})
                + "\n"
            )
    rc, out, err = run(capsys, "--sensor", str(rec), "-m", str(MODEL), "--json")
    assert rc == 0, err
    rows = rows_of(out)
    assert [r.get("truth") for r in rows] == ["Standing", None, "Running"]
    assert summary_of(err)["readings"] == 100 and summary_of(err)["labelled_windows"] == 2


def test_the_first_reading_counts_in_the_first_windows_truth(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    header, data = recording(100)
    data = [row[:] for row in data]
    data[0][header.index("label")] = "Running"  # window 0 holds readings 0..49: two labels
    rec = write_csv(tmp_path / "rec.csv", header, data)
    rc, out, _ = run(capsys, "--sensor", str(rec), "-m", str(MODEL), "--json")
    assert rc == 0
    assert [r.get("truth") for r in rows_of(out)] == [None, "Standing", "Standing"]


def test_json_lines_are_compact_with_the_time_in_microseconds(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    header, data = recording(100)
    rec = write_csv(tmp_path / "rec.csv", header, data)
    rc, out, _ = run(capsys, "--sensor", str(rec), "-m", str(MODEL), "--json")
    assert rc == 0 and ", " not in out and '": ' not in out  # one compact object per line
    for r in rows_of(out):
        ms = r["infer_ms"]
        assert isinstance(ms, float) and ms > 0 and ms == round(ms, 3)  # a time, to the microsecond


def test_one_reading_is_a_recording_without_windows(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    header, data = recording(1)
    rec = write_csv(tmp_path / "rec.csv", header, data)
    rc, out, err = run(capsys, "--sensor", str(rec), "-m", str(MODEL), "--json")
    assert rc == 0 and out == ""
    assert summary_of(err) == {"readings": 1, "windows_due": 0, "windows": 0, "dropped": {}}


def test_a_recording_is_read_as_utf8_whatever_the_locale(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    import locale

    header, data = recording(50)
    data = [row[:] for row in data]
    for row in data:
        row[header.index("label")] = "Läuft"
    rec = tmp_path / "rec.csv"
    with rec.open("w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([header, *data])
    old = locale.setlocale(locale.LC_CTYPE)
    locale.setlocale(locale.LC_CTYPE, "C")  # a service without LANG: Python's default encoding is ASCII
    try:
        rc, out, err = run(capsys, "--sensor", str(rec), "-m", str(MODEL), "--json")
    finally:
        locale.setlocale(locale.LC_CTYPE, old)
    assert rc == 0, err
    assert [r["truth"] for r in rows_of(out)] == ["Läuft"]
