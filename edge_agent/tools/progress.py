"""A minimal progress bar on stderr (no tqdm dependency).

On a terminal it redraws one line with ``\\r``; in a pipe or log file it writes a line at every
10 % step instead, so CI logs stay short.
"""

from __future__ import annotations

import sys
import time
from typing import Optional, TextIO


class Progress:
    def __init__(self, total: int, label: str, stream: Optional[TextIO] = None, width: int = 28) -> None:
        self.total = max(total, 1)
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.width = width
        self.done = 0
        self.t0 = time.perf_counter()
        self._tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._last_decile = -1

    def update(self, n: int = 1) -> None:
        self.done = min(self.total, self.done + n)
        frac = self.done / self.total
        if self._tty:
            filled = int(frac * self.width)
            bar = "#" * filled + "-" * (self.width - filled)
            self.stream.write(f"\r{self.label} [{bar}] {self.done}/{self.total} {self._eta(frac)}")
            self.stream.flush()
        else:
            decile = int(frac * 10)
            if decile != self._last_decile:
                self._last_decile = decile
                self.stream.write(f"{self.label}: {self.done}/{self.total} ({frac:.0%})\n")

    def _eta(self, frac: float) -> str:
        elapsed = time.perf_counter() - self.t0
        if frac <= 0 or frac >= 1:
            return f"{elapsed:5.1f}s"
        return f"eta {elapsed / frac - elapsed:5.1f}s"

    def close(self) -> None:
        if self._tty:
            self.stream.write("\n")
            self.stream.flush()
