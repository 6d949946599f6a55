"""Dynamic INT8 for models without an image input (transformer text classifiers, sensor models).

Why dynamic here and static QDQ for the CNNs (:mod:`edge_agent.tools.quantize`): a transformer's
time is in MatMul/Gemm, whose activations change range per input (token embeddings, attention);
``quantize_dynamic`` stores INT8 weights and quantizes each activation at run time
(``MatMulInteger``/``DynamicQuantizeLinear``), which needs no calibration images (there are none for
token ids) and was measured several times faster than FP32 on a BERT-like model, while on CNNs its
``ConvInteger`` is slower than FP32 (see docs/performance.md). Convolutions are left float.
The result is compared with the FP32 model on generated inputs: largest relative output difference
and top-1 agreement.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from edge_agent.adapters.host.durable import commit_durable
from edge_agent.errors import QuantizeError
from edge_agent.tools import require_onnx

OPS = ["MatMul", "Gemm", "Attention", "EmbedLayerNormalization", "LSTM", "GRU"]


@dataclass(frozen=True)
class DynamicResult:
    output: Path
    quantized_ops: int  # MatMulInteger / DynamicQuantize* nodes in the result
    max_rel_diff: float  # against the FP32 model on ``checks`` generated inputs
    top1_agreement: float
    checks: int

    def line(self) -> str:
        return (
            f"dynamic INT8 (weights int8, activations quantized per run; convolutions left float) -> "
            f"{self.output}: {self.quantized_ops} integer ops; vs FP32 on {self.checks} generated inputs: "
            f"max rel diff {self.max_rel_diff:.3g}, top-1 agreement {self.top1_agreement:.0%} "
            "(check it on real data before shipping)"
        )


def quantize_dynamic_model(src: Path, dst: Path, seq_len: int = 128, checks: int = 8) -> DynamicResult:
    """Write a dynamic INT8 copy of ``src`` (FP32) to ``dst`` and compare it with ``src``."""
    onnx = require_onnx()
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from edge_agent.adapters.runtime.onnx_model import OnnxModel
    from edge_agent.tools.bench import synthetic_feeds
    from edge_agent.tools.quantize import check_output

    dst = Path(dst)
    check_output(dst)
    ref = OnnxModel(src, provider="cpu", warmup=False)
    if ref.info.quant_kind != "fp32":
        raise QuantizeError(
            f"{src}: is already {ref.info.quant_kind}; dynamic quantization needs the FP32 model"
        )
    part = dst.with_name(f".{dst.name}.{os.getpid()}.partial")
    try:
        with tempfile.TemporaryDirectory(prefix="edge-agent-dq-") as tmp:
            pre = Path(tmp) / "pre.onnx"
            model = onnx.load(str(src))
            opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
            if opset < 11:
                raise QuantizeError(f"{src}: opset {opset}; dynamic quantization needs opset >= 11")
            onnx.save(model, str(pre))
            quantize_dynamic(str(pre), str(part), op_types_to_quantize=OPS, weight_type=QuantType.QInt8)
        out = onnx.load(str(part))
        integer = sum(1 for n in out.graph.node if n.op_type in ("MatMulInteger", "DynamicQuantizeMatMul"))
        if integer == 0:
            raise QuantizeError(
                f"{src}: no MatMul/Gemm with constant weights to quantize dynamically: nothing would get faster"
            )
        meta = {p.key: p.value for p in model.metadata_props}
        meta["quantization"] = '{"format": "dynamic", "weight_type": "int8"}'
        del out.metadata_props[:]
        for k, v in meta.items():
            out.metadata_props.add(key=k, value=v)
        onnx.save(out, str(part))
        cand = OnnxModel(part, provider="cpu", warmup=False)
        rel, agree = 0.0, 0
        for i in range(checks):
            feeds = synthetic_feeds(ref, seq_len, seed=i)
            a = np.asarray(ref.run(feeds)[0], np.float64)
            b = np.asarray(cand.run(feeds)[0], np.float64)
            rel = max(rel, float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(a))), 1e-12)))
            agree += int(
                np.array_equal(a.reshape(a.shape[0], -1).argmax(1), b.reshape(b.shape[0], -1).argmax(1))
            )
        commit_durable(part, dst)
    except BaseException as exc:
        part.unlink(missing_ok=True)
        if isinstance(exc, QuantizeError) or not isinstance(exc, Exception):
            raise
        text = str(exc).strip()
        first = text.splitlines()[0] if text else type(exc).__name__
        raise QuantizeError(f"{src}: dynamic quantization failed in onnxruntime: {first}") from None
    return DynamicResult(dst, integer, rel, agree / checks, checks)
