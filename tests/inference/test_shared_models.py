"""Real third-party YOLOv8n models and photos from ../shared (skip when absent)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from edge_agent.adapters.camera.images import read_image
from edge_agent.adapters.runtime.board import BoardInfo
from edge_agent.adapters.runtime.onnx_model import OnnxModel
from edge_agent.core.vision.yolo import box_iou
from edge_agent.inference.pipeline import Detector, run_cascade

X86 = BoardInfo("generic-x86", "test", "x86_64", 2)
pytestmark = pytest.mark.shared


@pytest.fixture(scope="module")
def fp32(shared_dir: Path) -> Detector:
    return Detector(OnnxModel(shared_dir / "models/yolov8n-coco-fp32.onnx", board=X86))


@pytest.fixture(scope="module")
def dyn(shared_dir: Path) -> Detector:
    return Detector(OnnxModel(shared_dir / "models/yolov8n-coco-int8-dynamic.onnx", board=X86))


def test_bus_has_a_bus_and_at_least_three_people(fp32: Detector, shared_dir: Path) -> None:
    dets, _ = run_cascade(read_image(shared_dir / "images/bus.jpg"), fp32)
    strong = [d for d in dets if d.confidence >= 0.5]
    assert sum(d.label == "bus" for d in strong) == 1
    assert sum(d.label == "person" for d in strong) >= 3
    bus = next(d for d in strong if d.label == "bus")
    # the bus spans nearly the full 810 px width in the upper-middle of the 1080 px photo
    x1, y1, x2, y2 = bus.box
    assert x1 < 60 and x2 > 760 and 150 < y1 < 300 and 700 < y2 < 850


@pytest.mark.parametrize("image", ["bus.jpg", "zidane.jpg"])
def test_fp32_and_dynamic_int8_agree(fp32: Detector, dyn: Detector, shared_dir: Path, image: str) -> None:
    img = read_image(shared_dir / "images" / image)
    a = fp32.detect(img).detections
    b = dyn.detect(img).detections
    keep_a, keep_b = a.scores >= 0.5, b.scores >= 0.5
    assert sorted(a.class_ids[keep_a].tolist()) == sorted(b.class_ids[keep_b].tolist())
    iou = box_iou(a.boxes[keep_a], b.boxes[keep_b])
    same = a.class_ids[keep_a][:, None] == b.class_ids[keep_b][None, :]
    assert (np.where(same, iou, 0).max(axis=1) >= 0.9).all()


def test_zidane_non_square_boxes_stay_inside_and_find_two_people(fp32: Detector, shared_dir: Path) -> None:
    img = read_image(shared_dir / "images/zidane.jpg")  # 1280x720, padded top and bottom
    d = fp32.detect(img).detections
    people = d.boxes[(d.class_ids == 0) & (d.scores >= 0.5)]
    assert len(people) == 2
    assert (people[:, [0, 2]] <= 1280).all() and (people[:, [1, 3]] <= 720).all()
    # the two players stand side by side: one on the left half, one on the right
    centres = sorted(((people[:, 0] + people[:, 2]) / 2).tolist())
    assert centres[0] < 640 < centres[1]
