"""``edge-agent infer --sensor``: the demo sensor model over the committed recording (its accuracy)
and a bad file is one error line, exit 1, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import cli

ROOT = Path(__file__).resolve().parents[3]
RECORDING = ROOT / "models" / "data" / "basicmotions" / "test.csv"
MODEL = ROOT / "models" / "demo-sensor.onnx"


def test_the_recording_gives_the_test_split_accuracy_as_json_lines() -> None:
    r = cli("infer", "--sensor", str(RECORDING), "-m", str(MODEL), "--json")
    assert r.returncode == 0, r.stderr
    rows = [json.loads(x) for x in r.stdout.splitlines()]
    assert len(rows) == 159 and [x["window"] for x in rows] == list(range(159))
    summary = json.loads(r.stderr.split("summary: ", 1)[1])
    assert summary["labelled_windows"] == 120 and summary["accuracy"] == 0.9833 and summary["dropped"] == {}


def test_a_jsonl_recording_gives_the_same_windows(tmp_path: Path) -> None:
    lines = RECORDING.read_text().splitlines()
    header = lines[0].split(",")
    out = tmp_path / "rec.jsonl"
    with out.open("w") as f:
        for line in lines[1:201]:
            row = dict(zip(header, line.split(",")))
            f.write(json.dumps({k: (row[k] if k == "label" else float(row[k])) for k in header}) + "\n")
    a = cli("infer", "--sensor", str(out), "-m", str(MODEL), "--json")
    b = cli("infer", "--sensor", str(RECORDING), "-m", str(MODEL), "--json")
    assert a.returncode == 0, a.stderr

    def windows(out: str) -> list[dict[str, object]]:
        return [{k: v for k, v in json.loads(x).items() if k != "infer_ms"} for x in out.splitlines()]

    assert windows(a.stdout) == windows(b.stdout)[:7]


@pytest.mark.parametrize(
    ("name", "text", "error"),
    [
        ("rec.txt", "a\n1\n", "expected a .csv (with a header) or .jsonl file"),
        ("rec.csv", "", "empty file"),
        ("rec.csv", "t,acc_x\n0.0,1,2\n", "line 2: 3 columns, the header has 2"),
        ("rec.jsonl", '{"acc_x": 1}\n[1, 2\n', "line 2: not JSON"),
        ("rec.csv", "t,temp\n0.0,1\n", "no readings with any of the channels acc_x"),
    ],
)
def test_a_bad_recording_is_one_error_line(tmp_path: Path, name: str, text: str, error: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    r = cli("infer", "--sensor", str(path), "-m", str(MODEL))
    assert r.returncode == 1 and error in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_inspect_names_the_task_and_the_window() -> None:
    r = cli("inspect", str(MODEL))
    assert r.returncode == 0, r.stderr
    assert "sensor       classify: window 50 readings, hop 25 at 10 Hz, input [1,6,50] (NCT)" in r.stdout
    assert "size         3.7 kB" in r.stdout
    spec = json.loads(cli("inspect", str(MODEL), "--json").stdout)["sensor_spec"]
    assert (spec["task"], spec["window"], spec["hop"], spec["layout"]) == ("classify", 50, 25, "NCT")


def test_bench_times_sensor_models_on_the_recordings_windows() -> None:
    r = cli(
        "bench",
        "--sensor",
        str(RECORDING),
        str(MODEL),
        str(MODEL),
        "--runs",
        "50",
        "--json",
        "--threads",
        "1",
    )
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)["models"]
    assert len(rows) == 2 and rows[0]["runs"] == 50 and rows[0]["windows_per_s_at_rate"] == 0.4
    assert 0 < rows[0]["ms_p50"] <= rows[0]["ms_p90"] and 0 < rows[1]["cpu_share_at_rate"] < 0.01


def test_validate_sensor_passes_a_twin_and_fails_a_model_with_its_labels_shuffled(tmp_path: Path) -> None:
    onnx = pytest.importorskip("onnx")
    model = onnx.load(str(MODEL))
    for p in model.metadata_props:
        if p.key == "labels":
            p.value = json.dumps(list(reversed(json.loads(p.value))))
    shuffled = tmp_path / "shuffled.onnx"
    onnx.save(model, str(shuffled))
    ok = cli("validate", str(MODEL), str(MODEL), "--sensor", str(RECORDING), "--json")
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["top1_agreement"] == 1.0
    bad = cli("validate", str(MODEL), str(shuffled), "--sensor", str(RECORDING), "--json")
    report = json.loads(bad.stdout)
    assert bad.returncode == 1 and report["verdict"] == "FAIL" and report["accuracy_candidate"] < 0.5
    neither = cli("validate", str(MODEL), str(MODEL))
    assert (
        neither.returncode == 1
        and "give --images DIR" in neither.stderr
        and "Traceback" not in neither.stderr
    )


def test_quantize_calibrates_a_sensor_model_on_a_recording_and_validates_it(tmp_path: Path) -> None:
    pytest.importorskip("onnx")
    train = RECORDING.with_name("train.csv")
    out = tmp_path / "q.onnx"
    r = cli(
        "quantize",
        str(MODEL),
        "--calib",
        str(train),
        "--val",
        str(RECORDING),
        "-o",
        str(out),
        "--target-ort",
        "1.11",
    )
    assert r.returncode == 0, r.stderr
    assert "top1_agreement         1.0" in r.stdout and "accuracy_candidate     0.9833" in r.stdout
    info = json.loads(cli("inspect", str(out), "--json").stdout)
    assert info["quantization"] == "qdq_int8" and info["sensor_spec"]["window"] == 50
    assert info["min_onnxruntime"] in ("1.6", "1.8", "1.10", "1.11")
