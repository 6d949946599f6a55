"""argparse value types that refuse out-of-range numbers with the valid range.

``--conf 2`` or ``--runs 0`` used to be accepted and gave empty or nonsensical results; argparse
turns an ``ArgumentTypeError`` into one usage line and exit status 2.
"""

from __future__ import annotations

import argparse
import math
from typing import Callable, Union

from edge_agent.core.runtime.providers import MAX_THREADS

Number = Union[int, float]


def parse_ranged(text: str, kind: Callable[[str], Number], lo: Number, hi: Number, what: str) -> Number:
    """``kind(text)`` if it lies in [lo, hi] and is no NaN, else the one argparse error naming the range."""
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
    if not (lo <= value <= hi) or (isinstance(value, float) and math.isnan(value)):
        raise argparse.ArgumentTypeError(f"{text} is out of range: expected {what}")
    return value


def _ranged(kind: Callable[[str], Number], lo: Number, hi: Number, what: str) -> Callable[[str], Number]:
    # the check is a top-level function, not in the closure: the closures are built at import, so
    # mutmut 3 (which swaps top-level functions at call time) never reached a mutant inside them
    def parse(text: str) -> Number:
        return parse_ranged(text, kind, lo, hi, what)

    parse.__name__ = what  # argparse names the type in some messages
    return parse


unit_interval = _ranged(float, 0.0, 1.0, "a number from 0 to 1")
non_negative_float = _ranged(float, 0.0, math.inf, "a number >= 0")
positive_float = _ranged(float, 1e-9, math.inf, "a number > 0")
positive_int = _ranged(int, 1, 2**31 - 1, "a whole number >= 1")
non_negative_int = _ranged(int, 0, 2**31 - 1, "a whole number >= 0")
# onnxruntime starts one OS thread each: 100000 hung session creation (core.runtime.providers)
thread_count = _ranged(int, 1, MAX_THREADS, f"a whole number from 1 to {MAX_THREADS}")
