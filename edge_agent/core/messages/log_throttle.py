"""Log lines for refused outside input, throttled per key: the first, then every Nth, with a count.

Anyone who can publish can send 10^5 bad messages; one log line each filled journald (327 lines
for 327 refused messages, 280 in 14 s for MJPEG parts) and hid everything else. The count is never
lost: the line that is written says how many were refused since the last one.
"""

from __future__ import annotations

from typing import Optional

DEFAULT_EVERY = 100
# the device's per-frame / per-line refusals (camera parts, sensor lines): at 20 bad frames a second
# a line every 12.5 s; 1,000 refusals make 5 lines, the last saying 1000
DEVICE_EVERY = 250
MAX_KEYS = 1024  # keys are outside values (a device id): bounded, the oldest forgotten first


class LogThrottle:
    """``line(key, text)`` returns the text to log now, or None to stay quiet (pure, no clock)."""

    def __init__(self, every: int = DEFAULT_EVERY, max_keys: int = MAX_KEYS) -> None:
        if every < 1 or max_keys < 1:
            raise ValueError("every and max_keys must be >= 1")
        self.every = every
        self.max_keys = max_keys
        self._seen: dict[str, int] = {}
        self.total = 0

    def line(self, key: str, text: str) -> Optional[str]:
        """The first refusal of ``key`` is logged as is; then every ``every``-th, with the count."""
        self.total += 1
        n = self._seen.pop(key, 0) + 1
        if len(self._seen) >= self.max_keys:
            del self._seen[next(iter(self._seen))]
        self._seen[key] = n
        if n == 1:
            return text
        if n % self.every == 0:
            return f"{text} ({n} refused for {key[:80]!r} so far; every {self.every}th is logged)"
        return None

    def count(self, key: str) -> int:
        return self._seen.get(key, 0)
