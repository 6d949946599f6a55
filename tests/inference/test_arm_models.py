"""One real detector inference per model kind users deploy; also run on emulated ARM cores."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from edge_agent.adapters.camera.images import read_image
from edge_agent.adapters.runtime.board import detect_board
from edge_agent.adapters.runtime.onnx_model import OnnxModel
from edge_agent.core.runtime.onnx_wire import summarize
from edge_agent.core.runtime.ort_compat import load_refusal
from edge_agent.core.vision.yolo import box_iou
from edge_agent.inference.pipeline import Detector

MODELS = Path(__file__).resolve().parents[2] / "models"


def _labels(img_path: Path, w: int, h: int) -> tuple[np.ndarray, np.ndarray]:
    rows = np.loadtxt(img_path.parent / "labels" / f"{img_path.stem}.txt", ndmin=2)
    cx, cy, bw, bh = rows[:, 1] * w, rows[:, 2] * h, rows[:, 3] * w, rows[:, 4] * h
    return rows[:, 0].astype(int), np.stack([cx - bw / 2, cy - bh / 2, cx + bw / 2, cy + bh / 2], 1)


@pytest.mark.arm_smoke
@pytest.mark.parametrize("name", ["demo-detector-int8.onnx", "demo-detector.onnx"])
def test_bundled_demo_detector_finds_the_labelled_shapes(name: str) -> None:
    path = MODELS / name
    if not path.is_file():
        pytest.skip(f"{path} not built yet (models/train_demo.py quantize)")
    det = Detector(OnnxModel(path, board=detect_board()))
    hits = total = 0
    for img_path in sorted((MODELS / "samples").glob("*.jpg"))[:3]:
        img = read_image(img_path)
        d = det.detect(img).detections
        cls, boxes = _labels(img_path, img.shape[1], img.shape[0])
        iou = box_iou(boxes.astype(np.float32), d.boxes)
        same = cls[:, None] == d.class_ids[None, :]
        hits += int(((np.where(same, iou, 0) >= 0.5).any(axis=1)).sum())
        total += len(cls)
    assert hits >= 0.75 * total, f"{hits}/{total} labelled shapes found"


@pytest.mark.arm_smoke
@pytest.mark.shared
def test_third_party_dynamic_int8_yolov8n_finds_the_bus(shared_dir: Path) -> None:
    model = shared_dir / "models/yolov8n-coco-int8-dynamic.onnx"
    graph = summarize(model.read_bytes())
    too_new = load_refusal(str(model), graph.ir_version, graph.opsets, ort.__version__)
    if too_new:  # the JetPack 5 stage (onnxruntime 1.16.3): this export needs a newer runtime
        pytest.skip(f"the shared model is too new for this runtime: {too_new}")
    det = Detector(OnnxModel(model, board=detect_board(), warmup=False))
    d = det.detect(read_image(shared_dir / "images/bus.jpg")).detections
    labels = [det.names[int(c)] for c, s in zip(d.class_ids, d.scores) if s >= 0.5]
    assert labels.count("bus") == 1 and labels.count("person") >= 3
