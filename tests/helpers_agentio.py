"""Kept only so a branch written against it still imports: use helpers_world.wait_until (one
polling helper for the whole suite, 30 s default so a slow machine does not fail a test)."""

from __future__ import annotations

from typing import Callable

from helpers_world import wait_until as _wait_until


def wait_until(pred: Callable[[], object], timeout_s: float = 30.0, what: str = "condition") -> None:
    _wait_until(pred, timeout=timeout_s, what=what)
