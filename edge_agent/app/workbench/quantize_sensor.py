"""``edge-agent quantize SENSOR_MODEL --calib RECORDING.csv|.jsonl``: static INT8 calibrated on
recorded windows, then validated against the float model on the same (or ``--val``) recording.

The windows are the agent's (the model's spec windows the recording, normalised as the agent
normalises). QDQ, uint8 activations, int8 weights, the MatMul/Gemm/Conv nodes quantized (the
feature reductions stay float). A candidate that fails validation is kept as
``*.FAILED-VALIDATION.onnx``, as for image models. For small sensor models INT8 is often no
faster (docs/models.md, "Sensor models"): ``bench --sensor`` says.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np

from edge_agent.errors import QuantizeError

RECORDINGS = (".csv", ".jsonl")


def is_recording(path: str) -> bool:
    p = Path(path)
    return p.is_file() and p.suffix.lower() in RECORDINGS


def quantize_sensor(args: argparse.Namespace, src: Path, out: Path) -> int:
    from edge_agent.adapters.host.durable import move_durable
    from edge_agent.app.workbench.infer_sensor import read_recording
    from edge_agent.app.workbench.quantize_cmd import failed_name
    from edge_agent.app.workbench.validate_sensor import format_report, sensor_report
    from edge_agent.inference.sensor_model import SensorModel

    model = SensorModel.load(str(src), threads=args.threads, provider=args.provider)
    windower = model.windower()
    rate = model.spec.rate_hz
    tensors: List[np.ndarray] = []
    for i, r in enumerate(read_recording(Path(args.calib))):
        t = r.get("t")
        # no time column: readings at the model's rate, as infer/validate --sensor read them (one a
        # second made every reading of a 10 Hz model follow a gap of 9: no complete window)
        when = float(t) if isinstance(t, (int, float)) and not isinstance(t, bool) else i / (rate or 1.0)
        tensors += [model.tensor(w.rows) for w in windower.push(r, when)]
    if args.samples and len(tensors) > args.samples:  # spread evenly over the recording
        tensors = [tensors[int(k * len(tensors) / args.samples)] for k in range(args.samples)]
    if not tensors:
        raise QuantizeError(f"--calib {args.calib}: no complete window of {model.spec.window} readings")
    name = model.model.info.inputs[0].name
    from onnxruntime.quantization import (
        CalibrationDataReader,
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    class Reader(CalibrationDataReader):  # type: ignore[misc]
        def __init__(self) -> None:
            self._it = iter([{name: x} for x in tensors])

        def get_next(self) -> Optional[Dict[str, np.ndarray]]:
            return next(self._it, None)

    methods = {
        "minmax": CalibrationMethod.MinMax,
        "entropy": CalibrationMethod.Entropy,
        "percentile": CalibrationMethod.Percentile,
    }
    with tempfile.TemporaryDirectory(prefix="edge-agent-quantize-") as tmp:
        part = Path(tmp) / out.name
        try:
            quantize_static(
                str(src),
                str(part),
                Reader(),
                quant_format=QuantFormat.QDQ,
                activation_type=QuantType.QUInt8,
                weight_type=QuantType.QInt8,
                calibrate_method=methods[args.method],
                op_types_to_quantize=["MatMul", "Gemm", "Conv"],
                reduce_range=args.reduce_range,
            )
        except Exception as exc:  # noqa: BLE001 -- onnxruntime.quantization raises anything: one line
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise QuantizeError(f"{src}: quantization failed: {first}") from None
        if args.target_ort:
            from edge_agent.tools import require_onnx
            from edge_agent.tools.convert import convert_model

            onnx = require_onnx()
            lowered = convert_model(
                onnx.load(str(part)), args.target_ort, lambda m: sys.stderr.write(f"{m}\n")
            )
            onnx.save(lowered, str(part))
        out.parent.mkdir(parents=True, exist_ok=True)
        move_durable(part, out)
    sys.stderr.write(f"quantized {src.name} -> {out} (QDQ, {len(tensors)} recorded windows, {args.method})\n")
    if args.no_validate:
        sys.stderr.write(
            "validation skipped (--no-validate): run `edge-agent validate --sensor` before shipping\n"
        )
        return 0
    val = args.val if args.val and is_recording(args.val) else args.calib
    report = sensor_report(str(src), str(out), val, args)
    sys.stdout.write(format_report(report) + "\n")
    if report["verdict"] == "PASS":
        return 0
    bad = failed_name(out)
    move_durable(out, bad)
    sys.stderr.write(
        f"edge-agent quantize: error: the INT8 model fails validation; kept as {bad} - do not ship it\n"
    )
    return 1
