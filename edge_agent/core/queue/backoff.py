"""Capped exponential backoff (pure), with optional jitter for fleets."""

from __future__ import annotations


def backoff_delay(attempt: int, min_s: float, max_s: float, jitter: float = 0.0, u: float = 0.0) -> float:
    """Delay before retry number ``attempt`` (1-based): min_s, 2*min_s, 4*min_s ... capped at max_s.

    The exponent is capped too: a camera unplugged for a week reaches attempt ~20000, and
    ``min_s * 2**20000`` overflows a float. ``jitter`` (0..1) takes up to that fraction off the
    delay, scaled by ``u`` (a uniform random number in [0, 1) the caller draws): after a broker
    outage a fleet that would all retry at 1, 2, 4 ... s spreads over each interval instead of
    arriving in one storm (AWS "equal jitter" with jitter = 0.5).
    """
    if attempt <= 0:
        return 0.0
    base = float(min(max_s, min_s * 2.0 ** min(attempt - 1, 60)))
    return base * (1.0 - min(max(jitter, 0.0), 1.0) * min(max(u, 0.0), 1.0))
