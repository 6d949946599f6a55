"""What the test host's CPU does to INT8 arithmetic (the product's own check, see
``edge_agent.adapters.runtime.board.int8_saturates``): accuracy tests of quantized models measured on
an x86 host without VNNI see its saturating int16 pair sums on top of the quantization itself; the
boards the models are made for do not. OpenVINO documents the same "saturation issue" for these CPUs.
"""

from __future__ import annotations

from edge_agent.adapters.runtime.board import int8_saturates


def int8_saturates_here() -> bool:
    """True on an x86-64 host whose CPU has no VNNI (its INT8 pair sums saturate at int16)."""
    return int8_saturates()
