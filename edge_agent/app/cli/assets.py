"""Where the bundled demo models and sample images are: in the wheel or in a source checkout."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from edge_agent.errors import ModelError

_PKG = Path(__file__).resolve().parents[2]
_CANDIDATES = (_PKG / "_demo", _PKG.parent / "models")

DEMO_DETECTOR = "demo-detector-int8.onnx"
DEMO_DETECTOR_FP32 = "demo-detector.onnx"
DEMO_CLASSIFIER = "demo-classifier-int8.onnx"
DEMO_CLASSIFIER_FP32 = "demo-classifier.onnx"
DEMO_SENSOR = "demo-sensor.onnx"


def demo_dir() -> Optional[Path]:
    for c in _CANDIDATES:
        if (c / DEMO_DETECTOR_FP32).is_file():
            return c
    return None


def demo_file(*names: str) -> Path:
    """The first of ``names`` that exists in the demo folder (e.g. INT8, else FP32)."""
    d = demo_dir()
    if d is not None:
        for n in names:
            if (d / n).is_file():
                return d / n
    raise ModelError(
        f"bundled demo model {names[0]} not found (looked in {', '.join(str(c) for c in _CANDIDATES)}); "
        "pass --model FILE"
    )


def demo_samples() -> Path:
    d = demo_dir()
    if d is None or not (d / "samples").is_dir():
        raise ModelError("bundled sample images not found; pass image paths")
    return d / "samples"
