"""What a camera may shrink frames to for a detector: the input of a letterboxed model, nothing for
a stretched one (RT-DETR: a frame shrunk to the letterbox shape would be upscaled on one axis)."""

from __future__ import annotations

from pathlib import Path

from edge_agent.adapters.runtime.onnx_model import OnnxModel
from edge_agent.inference.pipeline import Detector


def test_a_letterboxed_detector_lets_the_camera_shrink_to_its_input(format_models: dict[str, Path]) -> None:
    det = Detector(OnnxModel(format_models["yolov8"]))
    assert det.decode_target == det.input_hw == (48, 96)


def test_a_stretched_detector_keeps_frames_whole(format_models: dict[str, Path]) -> None:
    det = Detector(OnnxModel(format_models["yolov8t"]), output_format="rtdetr")
    assert det.format.fmt.stretch_input
    assert det.decode_target is None
