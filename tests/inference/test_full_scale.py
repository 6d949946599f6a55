"""Boxes of a reduced-scale decode come back in the frame as the camera sent it (inference step)."""

from __future__ import annotations

import numpy as np

from edge_agent.core.camera.source_spec import Frame
from edge_agent.core.vision.results import Detection
from edge_agent.inference.pipeline import to_full_scale


def test_boxes_scale_back_to_the_size_the_camera_sent() -> None:
    small = Frame(  # decoded at 1/4
        image=np.zeros((240, 320, 3), np.uint8),
        ts_mono=0.0,
        ts_wall=0.0,
        seq=1,
        source="t",
        full_size=(1280, 960),
    )
    det = Detection("person", 0, 0.9, (10.0, 20.0, 30.0, 40.0))
    (out,) = to_full_scale([det], small.full_scale())
    assert out.box == (40.0, 80.0, 120.0, 160.0)
    assert (out.label, out.class_id, out.confidence) == ("person", 0, 0.9)
    same = [det]
    assert to_full_scale(same, (1.0, 1.0)) is same  # full-size decode: nothing copied
