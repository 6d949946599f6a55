"""Small helpers for tests/agent (polling with a deadline instead of fixed sleeps)."""

from __future__ import annotations

import time
from typing import Callable


def wait_until(pred: Callable[[], object], timeout_s: float = 5.0, what: str = "condition") -> None:
    """Poll ``pred`` every 10 ms until truthy; fail the test with ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.01)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
