"""What the test host's CPU does to INT8 arithmetic.

onnxruntime's u8 x s8 kernels on x86 without VNNI (AVX2, AVX-512 before VNNI) multiply with
``vpmaddubsw``, which adds each pair of products into a saturating int16: a pair of 255 x 127
overflows, so results are not exact (measured on an AVX2 AMD EPYC without VNNI: 774 of 1073
MatMulInteger outputs wrong with full-range activations, none with activations below 128). ARM's
dot-product kernels and x86 with VNNI (``vpdpbusd``, int32 accumulation) are exact. OpenVINO
documents the same "saturation issue" for these CPUs. Accuracy tests of quantized models measured
on such a host see this on top of the quantization itself; the boards the models are made for do not.
"""

from __future__ import annotations

import platform
from pathlib import Path


def int8_saturates_here() -> bool:
    """True on an x86-64 host whose CPU has no VNNI (its INT8 pair sums saturate at int16)."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return False
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    flags: set[str] = set()
    for line in text.splitlines():
        if line.startswith("flags"):
            flags.update(line.split(":", 1)[-1].split())
            break
    return not flags & {"avx512_vnni", "avx_vnni", "amx_int8"}
