from __future__ import annotations

import pytest

from edge_agent.core.backoff import backoff_delay

pytestmark = pytest.mark.arm_smoke


def test_backoff_delay_capped_and_never_overflows() -> None:
    assert [backoff_delay(a, 0.5, 30) for a in range(0, 9)] == [0.0, 0.5, 1, 2, 4, 8, 16, 30, 30]
    assert backoff_delay(100_000, 0.5, 30) == 30  # a week unplugged: no OverflowError
