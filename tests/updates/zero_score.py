"""The classic broken INT8 detector: its output tensor goes through a QDQ pair with scale 8.0, so
every class score (0..1) rounds to 0 while the boxes (pixels) survive on an 8-px grid."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper


def make_zero_score(src: Path, out: Path) -> Path:
    model = onnx.load(str(src))
    g = model.graph
    name = g.output[0].name
    inner = f"{name}_float"
    for node in g.node:
        for i, o in enumerate(node.output):
            if o == name:
                node.output[i] = inner
    g.initializer.extend(
        [
            numpy_helper.from_array(np.array(8.0, np.float32), "zs_scale"),
            numpy_helper.from_array(np.array(0, np.uint8), "zs_zero"),
        ]
    )
    g.node.extend(
        [
            helper.make_node("QuantizeLinear", [inner, "zs_scale", "zs_zero"], ["zs_q"]),
            helper.make_node("DequantizeLinear", ["zs_q", "zs_scale", "zs_zero"], [name]),
        ]
    )
    onnx.checker.check_model(model)
    onnx.save(model, str(out))
    return out
