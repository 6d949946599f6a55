"""A detector with dynamic H/W is fed the smallest stride-32 rectangle holding the letterboxed
image, as Ultralytics' predictor does (``LetterBox(auto=True)`` for dynamic ONNX); the camera loop
keeps the square (rect=False) so several cameras share one input shape."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.layouts import coco_names, const_model

from edge_agent.adapters.runtime.onnx_model import OnnxModel
from edge_agent.core.vision.preprocess import rect_size
from edge_agent.inference.pipeline import Detector

OUT = np.zeros((1, 84, 100), np.float32)
OUT[0, :4, 0] = [96, 72, 64, 48]  # cx, cy, w, h in input px: (64, 48)-(128, 96)
OUT[0, 4 + 2, 0] = 0.9


def _model(tmp_path: Path, dynamic: bool) -> Path:
    shape = (1, 3, "height", "width") if dynamic else (1, 3, 640, 640)
    meta = {"names": coco_names(), "imgsz": "[640, 640]", "stride": "32"}
    return const_model(
        tmp_path / f"d{int(dynamic)}.onnx",
        {"output0": OUT},
        meta,
        shape,
        {"output0": ["batch", 84, "anchors"]},
    )


def test_a_dynamic_model_gets_the_rectangle_and_its_boxes_land_where_ultralytics_puts_them(
    tmp_path: Path,
) -> None:
    det = Detector(OnnxModel(_model(tmp_path, True)))
    img = np.zeros((810, 1080, 3), np.uint8)  # a landscape 1080x810 photo (h x w arrays)
    assert det.prepare(img).blob.shape == (1, 3, 480, 640)  # not 640x640: a quarter less work
    out = det.detect(img).detections
    # gain 640/1080, no padding: (64, 48)-(128, 96) / gain
    np.testing.assert_allclose(out.boxes[0], [108, 81, 216, 162], atol=0.01)
    assert out.class_ids.tolist() == [2]


def test_the_camera_loop_keeps_the_square(tmp_path: Path) -> None:
    det = Detector(OnnxModel(_model(tmp_path, True)), rect=False)
    img = np.zeros((810, 1080, 3), np.uint8)
    assert det.prepare(img).blob.shape == (1, 3, 640, 640)
    np.testing.assert_allclose(det.detect(img).detections.boxes[0], [108, 0, 216, 27], atol=0.01)


def test_a_static_model_keeps_its_size(tmp_path: Path) -> None:
    det = Detector(OnnxModel(_model(tmp_path, False)))
    assert det.prepare(np.zeros((810, 1080, 3), np.uint8)).blob.shape == (1, 3, 640, 640)


@pytest.mark.parametrize(
    ("image_hw", "want"), [((810, 1080), (480, 640)), ((720, 1280), (384, 640)), ((640, 640), (640, 640))]
)
def test_rect_size_matches_ultralytics_letterbox_auto(
    image_hw: tuple[int, int], want: tuple[int, int]
) -> None:
    assert rect_size(image_hw, (640, 640)) == want


@given(st.integers(1, 4000), st.integers(1, 4000), st.sampled_from([320, 416, 640]))
def test_rect_size_is_a_stride_multiple_no_larger_than_the_square(h: int, w: int, size: int) -> None:
    rh, rw = rect_size((h, w), (size, size))
    assert rh % 32 == 0 and rw % 32 == 0 and rh <= size and rw <= size
    assert max(rh, rw) == size  # the long side fills the square
