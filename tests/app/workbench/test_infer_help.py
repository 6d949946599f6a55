"""``edge-agent infer --help`` in process (issue 36, survivors of the app-infer run): the usage line
names each value as the docs and the help texts do (docs/troubleshooting.md `--save DIR`,
docs/models.md `--classifier-preprocess SPEC` and `--sensor FILE`), the help page states the
detector defaults the code uses, and ``--sensor`` with ``--time-field`` runs in process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from edge_agent.app.cli.main import main
from edge_agent.core.vision.defaults import CONF_THRESHOLD, CROP_PADDING, IOU_THRESHOLD, MAX_DET

ROOT = Path(__file__).resolve().parents[3]


def help_page(capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as ei:
        main(["infer", "--help"])
    assert ei.value.code == 0
    return " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize(
    "shown",
    [
        "--save DIR",
        "--classifier-preprocess SPEC",
        "--sensor FILE",
        "--mot FILE",
        "--time-field KEY",
        "--output-format NAME",
        "--max-det N",
        "--max-pixels N",
    ],
)
def test_the_usage_names_each_value_as_the_docs_and_the_help_do(
    capsys: pytest.CaptureFixture[str], shown: str
) -> None:
    usage, options = help_page(capsys).split(" options: ", 1)
    assert f"[{shown}]" in usage
    assert f" {shown} " in f" {options}"  # the option's own line


def test_the_help_states_the_detector_defaults_the_code_uses(capsys: pytest.CaptureFixture[str]) -> None:
    page = help_page(capsys)
    assert f"confidence threshold (default: {CONF_THRESHOLD})" in page
    assert f"NMS IoU threshold (default: {IOU_THRESHOLD})" in page
    assert f"keep at most N detections per image (default: {MAX_DET})" in page
    assert f"crop padding as a fraction of box size (default: {CROP_PADDING})" in page


def test_a_sensor_recording_runs_in_process_with_its_time_field(capsys: pytest.CaptureFixture[str]) -> None:
    recording = ROOT / "models" / "data" / "basicmotions" / "test.csv"
    model = ROOT / "models" / "demo-sensor.onnx"
    rc = main(["infer", "--sensor", str(recording), "-m", str(model), "--json", "--time-field", "t"])
    out, err = capsys.readouterr()
    assert rc == 0 and len(out.splitlines()) == 159 and json.loads(out.splitlines()[0])["window"] == 0
    assert json.loads(err.split("summary: ", 1)[1])["accuracy"] == 0.9833
