from __future__ import annotations

import pytest

from edge_agent.core.queue.backoff import backoff_delay

pytestmark = pytest.mark.arm_smoke


def test_backoff_delay_capped_and_never_overflows() -> None:
    assert [backoff_delay(a, 0.5, 30) for a in range(0, 9)] == [0.0, 0.5, 1, 2, 4, 8, 16, 30, 30]
    assert backoff_delay(100_000, 0.5, 30) == 30  # a week unplugged: no OverflowError


def test_jitter_spreads_each_interval_but_never_exceeds_it() -> None:
    assert backoff_delay(3, 1, 60, jitter=0.5, u=0.0) == 4.0
    assert backoff_delay(3, 1, 60, jitter=0.5, u=0.5) == 3.0
    assert backoff_delay(3, 1, 60, jitter=0.5, u=0.999) > 2.0
    assert backoff_delay(100, 1, 60, jitter=0.5, u=1.0) == 30.0
    spread = {round(backoff_delay(4, 1, 60, jitter=0.5, u=i / 50), 3) for i in range(50)}
    assert len(spread) == 50 and min(spread) >= 4.0 and max(spread) <= 8.0
