"""The dev tooling behind the demo models: the numpy mAP evaluator and the manifest check."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

MODELS = Path(__file__).resolve().parents[2] / "models"


@pytest.fixture(scope="module")
def tooling() -> tuple[ModuleType, ModuleType]:
    """models/ scripts use flat imports (``from synth import ...``), as when run as scripts."""
    pytest.importorskip("onnx", reason="make_manifest reads ONNX graphs (onnx is in the dev extra)")
    sys.path.insert(0, str(MODELS))
    try:
        import demo_eval
        import make_manifest
    finally:
        sys.path.remove(str(MODELS))
    return demo_eval, make_manifest


def test_map_of_perfect_and_shifted_predictions(tooling: tuple[ModuleType, ModuleType]) -> None:
    demo_eval, _ = tooling
    gt = (np.array([[10, 10, 50, 50]], np.float32), np.array([1]))
    perfect = (gt[0].copy(), np.array([0.9], np.float32), np.array([1]))
    result = demo_eval.detection_map([perfect], [gt], nc=3)
    assert result["mAP50"] == 1.0 and result["mAP50-95"] == 1.0
    # 40x40 box shifted by 10 px in x: IoU = 30*40 / (2*1600 - 1200) = 0.6 -> true positive for 0.50..0.60
    shifted = (np.array([[20, 10, 60, 50]], np.float32), np.array([0.9], np.float32), np.array([1]))
    result = demo_eval.detection_map([shifted], [gt], nc=3)
    assert result["mAP50"] == 1.0 and result["mAP50-95"] == pytest.approx(0.3)
    wrong_class = (perfect[0], perfect[1], np.array([2]))
    assert demo_eval.detection_map([wrong_class], [gt], nc=3)["mAP50"] == 0.0


def test_manifest_check_notices_changed_files(tooling: tuple[ModuleType, ModuleType], tmp_path: Path) -> None:
    _, make_manifest = tooling
    root = tmp_path / "models"
    root.mkdir()
    for name in (
        "MANIFEST.json",
        "demo-detector.onnx",
        "demo-classifier.onnx",
        "demo-detector-int8.onnx",
        "demo-classifier-int8.onnx",
    ):
        if (MODELS / name).exists():
            shutil.copy(MODELS / name, root / name)
    for rel in make_manifest.DATA_DIRS:
        shutil.copytree(MODELS / rel, root / rel)
    assert make_manifest.check(root) == []
    label = root / "data" / "heldout" / "labels" / "heldout_000.txt"
    label.write_text(label.read_text().replace("0 ", "1 ", 1))
    with (root / "demo-classifier.onnx").open("ab") as f:
        f.write(b"\0")
    assert sorted(make_manifest.check(root)) == [
        "data/heldout: content differs from manifest",
        "demo-classifier fp32: file and manifest differ",
    ]
