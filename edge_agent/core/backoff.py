"""Capped exponential backoff (pure)."""

from __future__ import annotations


def backoff_delay(attempt: int, min_s: float, max_s: float) -> float:
    """Delay before retry number ``attempt`` (1-based): min_s, 2*min_s, 4*min_s ... capped at max_s.

    The exponent is capped too: a camera unplugged for a week reaches attempt ~20000, and
    ``min_s * 2**20000`` overflows a float.
    """
    if attempt <= 0:
        return 0.0
    return float(min(max_s, min_s * 2.0 ** min(attempt - 1, 60)))
