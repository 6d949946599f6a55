"""Segmentation and pose exports whose metadata was stripped are refused, not run as detectors;
a score outside 0..1 is a refusal too (mask coefficients and keypoint pixels are not scores)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from support.layouts import coco_names, const_model

from edge_agent.adapters.runtime.onnx_model import OnnxModel
from edge_agent.errors import ModelError
from edge_agent.inference.pipeline import Detector
from edge_agent.inference.task import head_refusal

CELLS = 84  # anchors of a 64x64 input over strides 8/16/32


def _dense(channels: int, rng: np.random.Generator) -> np.ndarray:
    out = rng.uniform(0, 60, (1, channels, CELLS)).astype(np.float32)
    out[:, 4:] = rng.uniform(0, 1, (1, channels - 4, CELLS))
    return out


def test_a_seg_export_without_metadata_is_refused_by_its_prototypes(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    seg = const_model(
        tmp_path / "seg.onnx",
        {"output0": _dense(4 + 80 + 32, rng), "output1": rng.normal(0, 1, (1, 32, 16, 16))},
    )
    with pytest.raises(ModelError, match=r"output1.*mask prototypes.*segmentation") as exc:
        Detector(OnnxModel(seg))
    assert "\n" not in str(exc.value)


def test_seg_channels_with_names_are_refused_even_without_the_prototypes(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    seg = const_model(tmp_path / "seg1.onnx", {"output0": _dense(4 + 80 + 32, rng)}, {"names": coco_names()})
    with pytest.raises(ModelError, match=r"\[1, 116, 84\].*segmentation \(4 \+ 80 classes \+ 32"):
        Detector(OnnxModel(seg))


@pytest.mark.parametrize("meta", [{}, {"names": "{0: 'person'}"}])
def test_a_pose_export_is_refused(tmp_path: Path, meta: dict[str, str]) -> None:
    pose = const_model(tmp_path / "pose.onnx", {"output0": _dense(56, np.random.default_rng(2))}, meta)
    with pytest.raises(ModelError, match=r"\[1, 56, 84\].*pose \(4 \+ 1 class \+ 17 keypoints"):
        Detector(OnnxModel(pose))


@pytest.mark.parametrize(("width", "what"), [(38, "end-to-end segmentation"), (57, "end-to-end pose")])
def test_end_to_end_seg_and_pose_are_refused(tmp_path: Path, width: int, what: str) -> None:
    out = np.zeros((1, 300, width), np.float32)
    path = const_model(tmp_path / "e2e.onnx", {"output0": out}, {"names": coco_names()})
    assert what in (head_refusal(OnnxModel(path)) or "")


def test_a_detector_with_as_many_classes_is_not_refused(tmp_path: Path) -> None:
    """56 channels with 52 class names, 116 with 112: a detector, read as one."""
    for nc in (52, 112):
        path = const_model(
            tmp_path / f"d{nc}.onnx",
            {"output0": _dense(4 + nc, np.random.default_rng(nc))},
            {"names": coco_names(nc)},
        )
        det = Detector(OnnxModel(path))
        assert det.num_classes == nc


def test_scores_above_one_are_a_refusal_at_the_first_frame(tmp_path: Path) -> None:
    """A head no shape rule catches (here 40 channels, 36 'classes'): the first frame refuses."""
    out = _dense(40, np.random.default_rng(3))
    out[0, 10, 5] = 632.16  # a keypoint's pixel x read as a class score
    det = Detector(OnnxModel(const_model(tmp_path / "k.onnx", {"output0": out})))
    with pytest.raises(ModelError, match=r"score of 632.2 read as yolov8 is outside 0\.\.1"):
        det.detect(np.zeros((64, 64, 3), np.uint8))


def test_forcing_a_format_skips_the_head_rules(tmp_path: Path) -> None:
    out = _dense(56, np.random.default_rng(4))
    det = Detector(OnnxModel(const_model(tmp_path / "p.onnx", {"output0": out})), output_format="yolov8")
    assert det.num_classes == 52
