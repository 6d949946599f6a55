"""TensorRT facts and choices (pure): which Jetson GPU, which ORT option names, which model file.

- The original Jetson Nano (Tegra X1, Maxwell sm_53) and the TX2 (sm_62) have no fast INT8 path in
  TensorRT (``platform_has_fast_int8`` is false below sm_72 on Jetson): a QDQ INT8 model either runs
  its Q/DQ pairs dequantized or not on TensorRT at all. The agent builds an FP16 engine from the
  model's float source instead (``[detector] float_model``), or says in one line what to configure.
- onnxruntime rejects a TensorRT provider option it does not know ("Invalid TensorRT EP option"),
  and its Python layer then silently retries without TensorRT. JetPack 4.6's onnxruntime-gpu is 1.11:
  only option names that 1.11 parses may be passed to it.
- TensorRT engines are only valid for the TensorRT version and GPU that built them, so the cache
  directory is keyed by model hash + TensorRT version + GPU: an upgrade rebuilds instead of failing.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Dict, Optional, Tuple


@dataclass(frozen=True)
class JetsonGpu:
    soc: str  # device-tree compatible, e.g. "nvidia,tegra210"
    name: str  # e.g. "Maxwell sm_53"
    sm: str  # compute capability without the dot, e.g. "53"
    fast_int8: bool
    boards: str


# device-tree SoC compatible -> integrated GPU (NVIDIA's Jetson module data sheets / CUDA GPU list)
JETSON_GPUS: Dict[str, JetsonGpu] = {
    g.soc: g
    for g in (
        JetsonGpu("nvidia,tegra210", "Maxwell sm_53", "53", False, "Jetson Nano / TX1"),
        JetsonGpu("nvidia,tegra186", "Pascal sm_62", "62", False, "Jetson TX2"),
        JetsonGpu("nvidia,tegra194", "Volta sm_72", "72", True, "Jetson Xavier NX / AGX Xavier"),
        JetsonGpu("nvidia,tegra234", "Ampere sm_87", "87", True, "Jetson Orin"),
    )
}

# TensorRT provider options and the first onnxruntime release whose Python API accepts them.
# The timing cache came with ORT 1.15 (microsoft/onnxruntime#14767, #15113) and its own path option
# with 1.17 (#17865); everything else used here is in 1.11.
TRT_OPTION_SINCE: Dict[str, Tuple[int, int]] = {
    "trt_fp16_enable": (1, 11),
    "trt_engine_cache_enable": (1, 11),
    "trt_engine_cache_path": (1, 11),
    "trt_timing_cache_enable": (1, 15),
    "trt_timing_cache_path": (1, 17),
}
# the options naming the engine cache directory: a model's keyed directory replaces them
TRT_CACHE_PATH_OPTIONS = ("trt_engine_cache_path", "trt_timing_cache_path")
QUANTIZED_KINDS = ("qdq_int8", "qoperator_int8", "dynamic_int8", "mixed")


def jetson_gpu(compatible: Sequence[str]) -> Optional[JetsonGpu]:
    for c in compatible:
        if c in JETSON_GPUS:
            return JETSON_GPUS[c]
    return None


def jetpack_major(l4t_release: Optional[str]) -> Optional[int]:
    """L4T release line ("R32 (release), REVISION: 7.4") -> JetPack major (R32 -> 4, R35 -> 5, R36 -> 6)."""
    m = re.match(r"R(\d+)", l4t_release or "")
    return {32: 4, 34: 5, 35: 5, 36: 6}.get(int(m.group(1))) if m else None


def ort_version_tuple(version: str) -> Tuple[int, int]:
    """'1.11.0' / '1.16.3+cu118' -> (1, 11); unparsable -> a new release (no restriction)."""
    m = re.match(r"(\d+)\.(\d+)", version or "")
    return (int(m.group(1)), int(m.group(2))) if m else (99, 0)


def tensorrt_options(cache_dir: str, ort_version: str = "") -> Dict[str, str]:
    """FP16 engine, engine (and where supported timing) cache in ``cache_dir``; only option names
    the installed onnxruntime parses (ORT 1.11 rejects the timing-cache ones)."""
    wanted = {
        "trt_fp16_enable": "True",
        "trt_engine_cache_enable": "True",
        "trt_engine_cache_path": cache_dir,
        "trt_timing_cache_enable": "True",
        "trt_timing_cache_path": cache_dir,
    }
    have = ort_version_tuple(ort_version)
    return {k: v for k, v in wanted.items() if have >= TRT_OPTION_SINCE[k]}


def engine_cache_dir(state_dir: str, model_sha256: str, trt_version: str, gpu: str) -> str:
    """<state>/trt-engines/<model sha[:16]>-trt<version>-<gpu>: one directory per valid combination."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", f"trt{trt_version}-{gpu}").strip("-")
    return os.path.join(state_dir, "trt-engines", f"{model_sha256[:16]}-{safe}")


@dataclass(frozen=True)
class TrtSource:
    """What to give TensorRT: the configured model, its float source, or no TensorRT at all."""

    float_source: Optional[str]  # load this file instead of the configured one
    use_tensorrt: bool
    message: str  # one line for the log ("" when nothing to say)


def choose_tensorrt_source(
    model: str, quant_kind: str, gpu: Optional[JetsonGpu], float_source: Optional[str]
) -> TrtSource:
    """A quantized model on a GPU without fast INT8 (the Nano): FP16 engine from the float source,
    else no TensorRT and one line naming the key to set."""
    if gpu is None or gpu.fast_int8 or quant_kind not in QUANTIZED_KINDS:
        return TrtSource(None, True, "")
    if float_source:
        return TrtSource(
            float_source,
            True,
            f"{model} is {quant_kind} and the {gpu.boards} GPU ({gpu.name}) has no INT8 path in TensorRT: "
            f"building an FP16 engine from its float source {float_source}",
        )
    return TrtSource(
        None,
        False,
        f"{model} is {quant_kind} and the {gpu.boards} GPU ({gpu.name}) has no INT8 path in TensorRT: "
        f'set [detector] float_model = "<its FP32/FP16 .onnx>" to run TensorRT FP16; '
        f"using CUDA/CPU meanwhile",
    )
