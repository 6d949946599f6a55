"""``edge-agent infer --sensor``: what mutation testing found no test reading (app-infer-sensor
area): which readings a window holds when readings were lost (long before it, or just before the
reading whose holes complete it), the time column taken from the first reading whatever its
origin, and --provider / --threads reaching the session."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from edge_agent.app.cli.main import main

ROOT = Path(__file__).resolve().parents[3]
RECORDING = ROOT / "models" / "data" / "basicmotions" / "test.csv"
MODEL = ROOT / "models" / "demo-sensor.onnx"
WINDOW, HOP = 50, 25  # the demo model's spec (10 Hz)


def infer(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = main(["infer", *args])
    out, err = capsys.readouterr()
    return rc, out, err


def labelled(
    tmp_path: Path, n: int, label_of: dict[int, str], lost_after: int, lost: int, origin: float = 0.0
) -> Path:
    """``n`` readings of one series, labelled Standing but for ``label_of``; ``lost`` readings
    (at 10 Hz) lost after reading ``lost_after``; times from ``origin``."""
    with RECORDING.open(newline="") as f:
        rows = list(csv.reader(f))
    header, data = rows[0], [r[:] for r in rows[1 : n + 1]]
    t, label, series = header.index("t"), header.index("label"), header.index("series")
    for i, row in enumerate(data):
        row[label], row[series] = label_of.get(i, "Standing"), "0"
        row[t] = f"{origin + i / 10 + (lost / 10 if i > lost_after else 0):.1f}"
    path = tmp_path / "rec.csv"
    with path.open("w", newline="") as f:
        csv.writer(f).writerows([header, *data])
    return path


def truths(capsys: pytest.CaptureFixture[str], rec: Path) -> list[object]:
    rc, out, err = infer(capsys, "--sensor", str(rec), "-m", str(MODEL), "--json")
    assert rc == 0, err
    return [json.loads(line).get("truth") for line in out.splitlines()]


def expected(n: int, label_of: dict[int, str], lost_after: int, lost: int, windows: int) -> list[object]:
    """Row r of the stream is reading r up to ``lost_after``, then ``lost`` holes, then reading
    r - lost: window k is rows k * HOP .. k * HOP + WINDOW - 1, its truth the one label of its readings."""
    reading_at = {r if r <= lost_after else r + lost: r for r in range(n)}
    out: list[object] = []
    for k in range(windows):
        labels = {
            label_of.get(reading_at[r], "Standing")
            for r in range(k * HOP, k * HOP + WINDOW)
            if r in reading_at
        }
        out.append(labels.pop() if len(labels) == 1 else None)
    return out


def test_readings_lost_long_before_a_window_do_not_narrow_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """10 readings lost after the 11th: window 2 (rows 50..99) holds readings 40..89, and 40..44 are
    Standing, the rest Running: no truth (it was Running, read from 50..89 only)."""
    label_of = {i: "Running" for i in range(45, 200)}
    got = truths(capsys, labelled(tmp_path, 200, label_of, lost_after=10, lost=10))
    assert got == expected(200, label_of, 10, 10, len(got)) and len(got) == 7
    assert got[:3] == ["Standing", None, None] and got[3:] == ["Running"] * 4


def test_a_window_the_holes_complete_does_not_hold_the_reading_after_them(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """45 readings, then 10 lost: the holes complete window 0 (rows 0..49: readings 0..44 and 5
    holes); reading 45, the one after the holes, is in windows 1 and 2 only."""
    label_of = {i: "Running" for i in range(45, 120)}
    got = truths(capsys, labelled(tmp_path, 120, label_of, lost_after=44, lost=10))
    assert got == expected(120, label_of, 44, 10, len(got)) and len(got) == 4
    assert got[0] == "Standing" and got[1] is None


@pytest.mark.parametrize("origin", [0.0, 1000.0, 1764844800.0])
def test_the_time_column_counts_from_the_first_reading_whatever_its_origin(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, origin: float
) -> None:
    rec = labelled(tmp_path, 100, {}, lost_after=99, lost=0, origin=origin)
    rc, out, err = infer(capsys, "--sensor", str(rec), "-m", str(MODEL), "--json")
    assert rc == 0
    rows = [json.loads(line) for line in out.splitlines()]
    assert [(r["window"], r["filled"], r["truth"]) for r in rows] == [(k, 0, "Standing") for k in range(3)]
    summary = json.loads(err.split("summary: ", 1)[1].splitlines()[0])
    assert (summary["readings"], summary["windows_due"], summary["dropped"]) == (100, 3, {})


def test_the_provider_and_the_threads_reach_the_session(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from edge_agent.adapters.runtime.onnx_model import OnnxModel

    made: list[OnnxModel] = []
    real_init = OnnxModel.__init__

    def init(self: OnnxModel, *a: object, **k: object) -> None:
        real_init(self, *a, **k)  # type: ignore[arg-type]
        made.append(self)

    monkeypatch.setattr(OnnxModel, "__init__", init)
    rec = labelled(tmp_path, 60, {}, lost_after=59, lost=0)
    rc, _, _ = infer(capsys, "--sensor", str(rec), "-m", str(MODEL), "--threads", "3")
    assert rc == 0 and [m.session.get_session_options().intra_op_num_threads for m in made] == [3]
    # this onnxruntime has no XNNPACK: asking for it is an error, not a silent CPU run
    rc, out, err = infer(capsys, "--sensor", str(rec), "-m", str(MODEL), "--provider", "xnnpack")
    assert rc == 1 and out == "" and "XnnpackExecutionProvider" in err
