"""``edge-agent bench`` in process (``cli.main`` with capsys, so mutation testing credits it): what
the report says was run (image, counts, threads), the image it falls back to, and ``--sensor``'s
rows (windows, rate, CPU share) and errors. No timing is asserted beyond its consistency: the
figures themselves are tests/bench/'s."""

from __future__ import annotations

import csv
import json
import math
import re
from pathlib import Path

import cv2
import pytest

import edge_agent.app.cli.assets as assets
from edge_agent.app.cli.main import main

ROOT = Path(__file__).resolve().parents[3]
DETECTOR = ROOT / "models" / "demo-detector.onnx"
SAMPLES = ROOT / "models" / "samples"
SENSOR = ROOT / "models" / "demo-sensor.onnx"
RECORDING = ROOT / "models" / "data" / "basicmotions" / "test.csv"


def bench(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = main(["bench", *args])
    out, err = capsys.readouterr()
    return rc, out, err


def test_the_report_names_the_image_and_the_counts(capsys: pytest.CaptureFixture[str]) -> None:
    image = SAMPLES / "sample_3.jpg"
    h, w = cv2.imread(str(image)).shape[:2]
    argv = [str(DETECTOR), "--image", str(image), "--runs", "3", "--warmup", "2", "--threads", "1"]
    rc, out, _ = bench(capsys, *argv, "--no-memory", "--json", "--seq-len", "16")
    assert rc == 0
    rep = json.loads(out)
    assert {k: rep[k] for k in ("image", "runs", "warmup", "threads", "provider", "seq_len")} == {
        "image": f"{image} ({w}x{h})",
        "runs": 3,
        "warmup": 2,
        "threads": 1,
        "provider": None,
        "seq_len": 16,
    }
    (row,) = rep["models"]
    assert row["path"] == str(DETECTOR) and math.isnan(row["peak_rss_mb"])  # --no-memory: not probed


def test_the_defaults_are_the_first_bundled_sample_50_runs_after_5(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rc, out, _ = bench(capsys, str(DETECTOR), "--no-memory", "--json", "--threads", "1")
    assert rc == 0
    rep = json.loads(out)
    first = sorted(SAMPLES.glob("*.jpg"))[0]
    h, w = cv2.imread(str(first)).shape[:2]
    assert rep["image"] == f"{first} ({w}x{h})"
    assert (rep["runs"], rep["warmup"], rep["seq_len"]) == (50, 5, 128)


def test_without_bundled_samples_a_synthetic_image(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(assets, "_CANDIDATES", (tmp_path,))  # an install without the demo folder
    rc, out, _ = bench(capsys, str(DETECTOR), "--runs", "1", "--warmup", "0", "--no-memory", "--json")
    assert rc == 0 and json.loads(out)["image"] == "synthetic 640x480 (640x480)"


def test_the_memory_probe_is_on_by_default(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = bench(capsys, str(SENSOR), "--runs", "1", "--warmup", "0", "--json", "--threads", "1")
    assert rc == 0
    (row,) = json.loads(out)["models"]
    assert row["peak_rss_mb"] > 0


def test_the_table_is_the_text_report(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = bench(capsys, str(DETECTOR), "--runs", "2", "--warmup", "0", "--no-memory", "--threads", "1")
    assert rc == 0
    assert (
        out.startswith("bench: ") and "(2 runs after 0 warm-up, interleaved; threads 1; times in ms)" in out
    )
    assert (
        re.search(r"^demo-detector\.onnx +fp32 ", out, re.M)
        and out.endswith("\n")
        and not out.startswith("{")
    )


# --- bench --sensor ----------------------------------------------------------------------------


def write_recording(path: Path, n: int, gap_after: int | None = None) -> Path:
    with RECORDING.open(newline="") as f:
        rows = list(csv.reader(f))[: n + 1]
    t = rows[0].index("t")
    if gap_after is not None:
        for row in rows[gap_after + 1 :]:
            row[t] = f"{float(row[t]) + 1.1:.1f}"  # 10 readings lost at 10 Hz
    with path.open("w", newline="") as f:
        csv.writer(f).writerows(rows)
    return path


def sensor_rows(capsys: pytest.CaptureFixture[str], *args: str) -> list[dict[str, object]]:
    rc, out, err = bench(capsys, "--sensor", *args, "--json", "--threads", "1")
    assert rc == 0, err
    return json.loads(out)["models"]  # type: ignore[no-any-return]


def test_sensor_rows_carry_the_spec_and_consistent_figures(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    rec = write_recording(tmp_path / "rec.csv", 100)  # 3 windows: runs cycle over them
    rows = sensor_rows(capsys, str(rec), str(SENSOR), str(SENSOR), "--runs", "7", "--warmup", "1")
    assert len(rows) == 2
    for r in rows:
        assert (r["model"], r["quantization"], r["window"], r["hop"], r["rate_hz"], r["runs"]) == (
            str(SENSOR),
            "fp32",
            50,
            25,
            10.0,
            7,
        )
        p50, p90, cpu = (float(str(r[k])) for k in ("ms_p50", "ms_p90", "cpu_ms_per_window"))
        assert 0 < p50 <= p90 and cpu > 0 and float(str(r["wall_ms_per_window"])) >= p50 * 0.5
        assert r["windows_per_s_at_rate"] == 0.4  # 10 Hz / hop 25
        push_ms = float(str(r["windowing_us_per_reading"])) / 1000.0
        assert float(str(r["cpu_share_at_rate"])) == pytest.approx(
            (cpu + push_ms * 25) * 0.4 / 1000.0, rel=0.01
        )
    assert rows[0]["ratio_p50"] == 1.0
    assert rows[1]["ratio_p50"] == pytest.approx(
        float(str(rows[1]["ms_p50"])) / float(str(rows[0]["ms_p50"])), abs=2e-3
    )


def test_one_run_is_its_own_median_and_90th_percentile(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    rec = write_recording(tmp_path / "rec.csv", 100)
    (row,) = sensor_rows(capsys, str(rec), str(SENSOR), "--runs", "1", "--warmup", "0")
    assert row["runs"] == 1 and row["ms_p50"] == row["ms_p90"]


def test_a_sensor_model_without_a_rate_costs_nothing_per_second(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    onnx = pytest.importorskip("onnx")
    model = onnx.load(str(SENSOR))
    keep = [(p.key, p.value) for p in model.metadata_props if p.key != "rate_hz"]
    del model.metadata_props[:]
    for k, v in keep:
        model.metadata_props.add(key=k, value=v)
    norate = tmp_path / "norate.onnx"
    onnx.save(model, str(norate))
    rec = write_recording(tmp_path / "rec.csv", 60)
    (row,) = sensor_rows(capsys, str(rec), str(norate), "--runs", "2", "--warmup", "0")
    assert row["rate_hz"] is None and row["windows_per_s_at_rate"] == 0 and row["cpu_share_at_rate"] == 0


def test_the_recordings_time_column_makes_the_windows(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    short = write_recording(tmp_path / "short.csv", 40)
    rc, _, err = bench(capsys, "--sensor", str(short), str(SENSOR), "--runs", "2")
    assert rc == 1
    assert err.splitlines() == [
        f"edge-agent bench: error: --sensor {short}: no complete window of 50 readings for {SENSOR}"
    ]
    # the same 40 readings with 10 lost after the 10th (1.1 s later): the holes complete a window
    gap = write_recording(tmp_path / "gap.csv", 40, gap_after=10)
    (row,) = sensor_rows(capsys, str(gap), str(SENSOR), "--runs", "2", "--warmup", "0")
    assert row["runs"] == 2


def test_the_sensor_table(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    rec = write_recording(tmp_path / "rec.csv", 100)
    rc, out, _ = bench(
        capsys, "--sensor", str(rec), str(SENSOR), "--runs", "4", "--warmup", "0", "--threads", "1"
    )
    assert rc == 0
    lines = out.splitlines()
    assert lines[0] == f"recording {rec}: 100 readings, 4 timed windows per model"
    assert lines[1].split() == [
        "model",
        "quant",
        "p50",
        "ms",
        "p90",
        "ms",
        "cpu",
        "ms",
        "x",
        "us/reading",
        "win/s",
        "cpu",
        "share",
    ]
    assert len(lines) == 3
    m = re.fullmatch(
        r"demo-sensor\.onnx +fp32 +(\d+\.\d{3}) +(\d+\.\d{3}) +(\d+\.\d{3}) +1\.00 +(\d+\.\d) +0\.40 +(\d+\.\d{4})%",
        lines[2],
    )
    assert m, lines[2]
    assert float(m.group(1)) <= float(m.group(2))


def test_the_json_report_is_indented_one_key_a_line(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = bench(capsys, str(SENSOR), "--runs", "1", "--warmup", "0", "--no-memory", "--json")
    assert rc == 0 and out == json.dumps(json.loads(out), indent=2) + "\n" and '\n  "models": [' in out


def test_the_cpu_time_per_window_is_the_timed_runs_own(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Process time over the timed runs only: one onnxruntime thread cannot spend more CPU time
    than the wall time those runs took (not the process's CPU time since it started)."""
    rec = write_recording(tmp_path / "rec.csv", 100)
    (row,) = sensor_rows(capsys, str(rec), str(SENSOR), "--runs", "20", "--warmup", "0")
    cpu, wall = float(str(row["cpu_ms_per_window"])), float(str(row["wall_ms_per_window"]))
    assert 0 < cpu <= 4 * wall + 0.01, row


# the help page's options as an operator reads them (whitespace folded)
HELP = (
    "--runs RUNS timed runs per model (default 50) --warmup WARMUP untimed runs first (default 5) "
    "--seq-len SEQ_LEN length of dynamic axes for models without an image input (token ids, sensor "
    "windows; default 128) --no-memory skip the per-model RSS subprocess probe "
)


def test_the_help_page_says_each_default(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "2000")
    with pytest.raises(SystemExit):
        main(["bench", "--help"])
    assert HELP in " ".join(capsys.readouterr().out.split())
