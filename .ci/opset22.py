"""Make an opset-22 model the way a current Ultralytics export is stamped: Conv, MaxPool and
ConvTranspose in their opset-22 forms (the ones `model convert` once refused for a Jetson Nano).

    python .ci/opset22.py IN.onnx OUT.onnx

onnx's version converter lifts IN (any opset: the shared YOLOv8n FP32 or its dynamic INT8 copy,
or the demo detector) to 22 and refuses a result with no opset-22 form in it. Needs onnx.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import onnx
from onnx import defs, version_converter


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src", type=Path)
    ap.add_argument("dst", type=Path)
    a = ap.parse_args()
    model = version_converter.convert_version(onnx.load(str(a.src)), 22)
    onnx.checker.check_model(model)
    new = sorted({n.op_type for n in model.graph.node if defs.get_schema(n.op_type, 22).since_version == 22})
    if not new:
        print(f"{a.dst}: no operator in its opset-22 form", file=sys.stderr)
        return 1
    onnx.save(model, str(a.dst))
    print(f"{a.dst}: opset 22, IR {model.ir_version}; opset-22 forms: {', '.join(new)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
