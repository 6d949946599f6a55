"""RT-DETR as Ultralytics 8.4 writes it: [1, K, 6] rows (cx, cy, w, h normalised, score, class),
output dims dynamic, metadata ``head: RTDETRDecoder`` (confirmed against an export of
``RTDETR('rtdetr-l.yaml')`` by Ultralytics 8.4.190). Built here with onnx.helper."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from support.layouts import coco_names, const_model

from edge_agent.adapters.runtime.onnx_model import OnnxModel
from edge_agent.errors import ModelError
from edge_agent.inference.pipeline import Detector

META = {
    "description": "Ultralytics rtdetr-l model ",
    "head": "RTDETRDecoder",
    "task": "detect",
    "names": coco_names(),
    "end2end": "False",
    "imgsz": "[320, 480]",
}
# input 320 high x 480 wide; an image 640 x 480 (h x w) is stretched to it: x * 1, y * 0.5
ROWS = np.zeros((1, 300, 6), np.float32)
ROWS[0, 0] = [0.5, 0.25, 0.25, 0.25, 0.9, 5]  # cx 240 cy 80 w 120 h 80 in input px
ROWS[0, 1] = [0.75, 0.75, 0.125, 0.5, 0.6, 0]  # cx 360 cy 240 w 60 h 160
ROWS[0, 2:, 4] = 0.01


def _model(tmp_path: Path, meta: dict[str, str]) -> Path:
    return const_model(
        tmp_path / "rtdetr.onnx",
        {"output0": ROWS},
        meta,
        input_shape=(1, 3, 320, 480),
        output_shapes={"output0": ["Concatoutput0_dim_0", "Concatoutput0_dim_1", 6]},
    )


def _image() -> np.ndarray:
    return np.zeros((640, 480, 3), np.uint8)


def test_an_ultralytics_84_rtdetr_export_is_read_as_normalised_centre_boxes(tmp_path: Path) -> None:
    det = Detector(OnnxModel(_model(tmp_path, META)))
    assert det.format.fmt.name == "rtdetr" and det.format.fmt.stretch_input
    out = det.detect(_image()).detections
    assert out.class_ids.tolist() == [5, 0]
    np.testing.assert_allclose(out.scores, [0.9, 0.6], atol=1e-6)
    # image px: x as input (480 wide both), y doubled (320 -> 640)
    np.testing.assert_allclose(out.boxes, [[180, 80, 300, 240], [330, 320, 390, 640]], atol=1e-3)


def test_the_rtdetr_name_is_accepted_for_it_when_forced(tmp_path: Path) -> None:
    stripped = {k: v for k, v in META.items() if k in ("names", "imgsz")}
    det = Detector(OnnxModel(_model(tmp_path, stripped)), output_format="rtdetr")
    out = det.detect(_image()).detections
    np.testing.assert_allclose(out.boxes[0], [180, 80, 300, 240], atol=1e-3)


def test_without_metadata_it_is_refused_not_read_as_corners(tmp_path: Path) -> None:
    """Read as end2end corners, row 0 is x1 0.5 > x2 0.25: refused in one line naming the fix."""
    det = Detector(OnnxModel(_model(tmp_path, {"names": coco_names()})))
    assert det.format.fmt.name == "end2end"
    with pytest.raises(ModelError, match=r"not corner boxes.*RT-DETR.*output_format = rtdetr") as exc:
        det.detect(_image())
    assert "\n" not in str(exc.value)


def test_the_older_query_layout_still_reads(tmp_path: Path) -> None:
    q = np.zeros((1, 300, 84), np.float32)
    q[0, 7, :4] = [0.5, 0.5, 0.5, 0.5]
    q[0, 7, 4 + 3] = 0.8
    path = const_model(tmp_path / "old.onnx", {"output0": q}, META, input_shape=(1, 3, 320, 480))
    out = Detector(OnnxModel(path)).detect(_image()).detections
    assert out.class_ids.tolist() == [3]
    np.testing.assert_allclose(out.boxes[0], [120, 160, 360, 480], atol=1e-3)
