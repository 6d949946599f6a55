"""`validate --sensor` and `quantize SENSOR_MODEL --calib` in process, the promises the first
mutation run of app-sensor-quantize-validate found untested (issue 36): the labelled windows of a
recording with lost readings, the operators quantized, the calibration methods, the output folder
and the JSON report's layout."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from edge_agent.app.cli.main import main

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
