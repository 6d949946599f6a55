"""The one polling helper: wait for something a thread or another process does.

A sleep of a guessed length is either flaky or slow; polling a predicate with a generous deadline
is neither (the deadline only costs time when the test fails anyway). 30 s by default so a loaded
machine does not fail a test.
"""

from __future__ import annotations

import time
from typing import Callable, TypeVar, Union

T = TypeVar("T")


def poll(pred: Callable[[], T], timeout: float = 30.0, every: float = 0.05) -> Union[T, bool]:
    """``pred()``'s first truthy value within ``timeout`` s, else its (falsy) value at the deadline.

    For the rare test that must look at a *False* outcome (something that must not arrive);
    everything else uses :func:`wait_until`, which fails with a message.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = pred()
        if got:
            return got
        time.sleep(every)
    return pred()


def wait_until(
    pred: Callable[[], T],
    timeout: float = 30.0,
    what: Union[str, Callable[[], str]] = "condition",
    every: float = 0.05,
) -> T:
    """Return ``pred()``'s first truthy value; AssertionError naming ``what`` after ``timeout`` s.

    ``what`` may be a callable, evaluated only on failure (e.g. ``lambda: proc.log_text()``, so the
    message shows the log as it was at the deadline, not at the start).
    """
    got = poll(pred, timeout, every)
    if not got:
        said = what() if callable(what) else what
        raise AssertionError(f"timed out after {timeout:g} s waiting for {said}")
    return got  # type: ignore[return-value]
