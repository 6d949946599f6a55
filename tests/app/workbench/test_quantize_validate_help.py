"""`quantize --help` and `validate --help` as an operator reads them, in process (issue 36, area
app-quantize-validate): each option's row whole (its value's name and what it does, the defaults
the code uses), the command's description and its line in the top-level list. A row pinned here
is the text docs/models.md and docs/troubleshooting.md send users to; a change to it is a change
of this test too, on purpose."""

from __future__ import annotations

import pytest

from edge_agent.app.cli.main import main
from edge_agent.core.vision.thresholds import Thresholds

D = Thresholds()
THRESHOLDS = [
    f"--min-recall MIN_RECALL detector: recall of reference detections (default: {D.min_recall})",
    f"--min-mean-iou MIN_MEAN_IOU detector: mean IoU of matches (default: {D.min_mean_iou})",
    f"--max-conf-delta MAX_CONF_DELTA detector: mean |delta conf| (default: {D.max_conf_delta})",
    f"--max-map-drop MAX_MAP_DROP detector: mAP50 / mAP50-95 drop (default: {D.max_map_drop})",
    f"--min-top1-agreement MIN_TOP1_AGREEMENT classifier (default: {D.min_top1_agreement})",
    f"--max-top1-drop MAX_TOP1_DROP classifier: accuracy drop (default: {D.max_top1_drop})",
]
QUANTIZE = [
    "model ONNX model (detector or classifier): FP32, FP16, or dynamic/QOperator/QDQ INT8 (dequantized first)",
    "--calib CALIB folder of calibration images (representative, 50-300); required for image models "
    "(models without an image input, e.g. token ids, are quantized dynamically, with no calibration); "
    "a sensor model: a .csv/.jsonl recording",
    "-o OUTPUT, --output OUTPUT output path (default: <model>.int8.onnx)",
    "--samples SAMPLES calibration images to use (default 128; 0 = all)",
    "--method {minmax,entropy,percentile} activation range calibration (default minmax)",
    "--target {x86,arm64} CPU the model will run on (default: x86)",
    "--target-ort VERSION oldest onnxruntime that must load the result, e.g. 1.11 (Jetson Nano, "
    "JetPack 4.6) or 1.16 (JetPack 5): opset/IR lowered to what it reads (default: whatever the tools write)",
    "--val VAL validation images (default: the calibration images)",
    "--val-labels VAL_LABELS YOLO labels for --val images (adds mAP checks)",
    "--val-max-images N validate on at most N images (0 = all) (default: 64)",
    "--reduce-range 7-bit weights (x86 without VNNI, if accuracy drops)",
    "--naive quantize everything, the post-processing tail too (demonstrates the failure; never ship)",
    "--no-validate skip the validation step (not recommended)",
    "pass/fail thresholds:",
    *THRESHOLDS,
]
VALIDATE = [
    "'edge-agent validate': refuse a candidate model (e.g. INT8) that loses the reference's accuracy. Any "
    "two models of one task: input sizes, output layouts and class lists may differ (detections are "
    "compared, classes matched by name). Exit 0 PASS, 1 FAIL, 2 no verdict.",
    "reference reference model (usually FP32)",
    "candidate candidate model (usually INT8)",
    "--images IMAGES image folder (classifiers: one subfolder per class name)",
    "--sensor FILE sensor models: a .csv/.jsonl recording instead of images (a 'label' column adds accuracy)",
    "--labels LABELS detectors: folder of YOLO labels <stem>.txt (adds mAP50 / mAP50-95)",
    "--max-images N use at most N images (spread evenly; 0 = all)",
    "--json print the report as JSON",
    "pass/fail thresholds:",
    *THRESHOLDS,
]


def page(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as ex:
        main([*argv, "--help"])
    assert ex.value.code == 0
    return " ".join(capsys.readouterr().out.split())  # argparse wraps to the terminal's width


@pytest.mark.parametrize(("command", "rows"), [("quantize", QUANTIZE), ("validate", VALIDATE)])
def test_each_option_row_says_what_it_does(
    capsys: pytest.CaptureFixture[str], command: str, rows: list[str]
) -> None:
    text = page(capsys, command)
    missing = [r for r in rows if f" {r} " not in f" {text} "]
    assert missing == [], text


def test_quantize_s_description_and_both_lines_of_the_command_list(
    capsys: pytest.CaptureFixture[str],
) -> None:
    text = page(capsys, "quantize")
    assert (
        " 'edge-agent quantize': static INT8 (QDQ) that keeps accuracy, then validated against the input. "
        "The result is checked with 'validate' on the calibration (or '--val') images; when it fails, the "
        "file is renamed '*.FAILED-VALIDATION.onnx' so nobody ships it by accident, and the exit code is 1. "
    ) in text
    top = page(capsys)
    assert " quantize static INT8 quantization with validation " in top
    assert " validate compare a candidate model with its reference " in top
