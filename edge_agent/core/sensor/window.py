"""Readings -> windows for a sensor model (pure: a ring buffer, no I/O, no numpy).

A :class:`Windower` takes parsed readings one at a time and yields a :class:`Window` of ``window``
rows every ``hop`` rows, each row the values of ``channels`` in order. Every window that falls due
is accounted: either returned, or counted in ``dropped`` with its reason, so
``due == emitted + sum(dropped.values())`` always holds.

Missing values: a reading that lacks one of the channels (or carries text there) is a row with a
hole in it; with ``rate_hz`` set, a reading that comes more than 1.5 periods after the last one
means the readings in between were lost (late), and rows of holes stand in for them. A due window
with holes is filled as ``missing`` says (``hold``: the channel's previous value, ``interpolate``:
linear between its neighbours, ``drop``: the window is dropped as ``missing``); a window with more
than ``max_missing`` rows with holes is dropped as ``gap`` whatever the policy. A reading with
none of the channels belongs to another sensor on the same line and is ignored (counted).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Deque, Dict, List, Mapping, Optional, Sequence, Tuple

Row = Tuple[Optional[float], ...]
POLICIES = ("hold", "interpolate", "drop")
# a late reading means the ones in between were lost when it came this many periods after the last
LATE_PERIODS = 1.5


@dataclass(frozen=True)
class Window:
    """``rows[t][c]``: ``window`` rows of every channel, holes filled; ``index`` counts due windows
    from 0; ``filled`` is how many values the policy supplied; ``t_end`` the last reading's time."""

    index: int
    rows: Tuple[Tuple[float, ...], ...]
    filled: int
    t_end: float


def _number(value: object) -> Optional[float]:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    f = float(value)
    return f if math.isfinite(f) else None


@dataclass
class Windower:
    channels: Sequence[str]
    window: int
    hop: int
    missing: str = "hold"
    max_missing: Optional[int] = None  # default: a quarter of the window
    rate_hz: Optional[float] = None
    readings: int = 0
    ignored: int = 0
    late: int = 0  # readings counted lost because a later one came late
    due: int = 0
    emitted: int = 0
    dropped: Dict[str, int] = field(default_factory=dict)
    _ring: Deque[Row] = field(default_factory=deque, repr=False)
    _rows: int = 0
    _last_t: Optional[float] = None
    _last_known: List[Optional[float]] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        if not self.channels:
            raise ValueError("a sensor model needs at least one channel")
        if self.window < 2 or self.hop < 1:
            raise ValueError(f"window = {self.window}, hop = {self.hop}: expected window >= 2 and hop >= 1")
        if self.missing not in POLICIES:
            raise ValueError(f"missing = {self.missing!r}: expected one of {', '.join(POLICIES)}")
        if self.max_missing is None:
            self.max_missing = self.window // 4
        self._ring = deque(maxlen=self.window)
        self._last_known = [None] * len(self.channels)

    def push(self, reading: Mapping[str, object], t: float) -> List[Window]:
        """One reading at time ``t`` (seconds, any origin): the windows it completes (0, 1 or, after
        lost readings, more)."""
        row = tuple(_number(reading.get(c)) for c in self.channels)
        if all(v is None for v in row) and not any(c in reading for c in self.channels):
            self.ignored += 1
            return []
        self.readings += 1
        out: List[Window] = []
        if self.rate_hz and self._last_t is not None:
            lost = round((t - self._last_t) * self.rate_hz) - 1
            if (t - self._last_t) * self.rate_hz > LATE_PERIODS and lost > 0:
                self.late += lost
                self._holes(lost, t, out)
        self._last_t = t
        self._add(row, t, out)
        return out

    def _holes(self, n: int, t: float, out: List[Window]) -> None:
        hole: Row = (None,) * len(self.channels)
        explicit = min(n, self.window)
        for _ in range(explicit):
            self._add(hole, t, out)
        rest = n - explicit  # the ring is all holes by now: every window due in the rest is a gap
        if rest > 0:
            first = self._rows + 1
            last = self._rows + rest
            gaps = self._due_between(first, last)
            self.due += gaps
            if gaps:
                self.dropped["gap"] = self.dropped.get("gap", 0) + gaps
            self._rows = last

    def _due_between(self, first: int, last: int) -> int:
        """How many row counts in first..last make a window due (count >= window, every hop)."""
        lo = max(first, self.window)
        if lo > last:
            return 0

        def upto(n: int) -> int:  # due counts in window..n
            return 0 if n < self.window else (n - self.window) // self.hop + 1

        return upto(last) - upto(lo - 1)

    def _add(self, row: Row, t: float, out: List[Window]) -> None:
        self._ring.append(row)
        self._rows += 1
        if self._rows < self.window or (self._rows - self.window) % self.hop:
            return
        index = self.due
        self.due += 1
        win = self._fill(index, t)
        if win is None:
            return
        self.emitted += 1
        out.append(win)

    def _drop(self, reason: str) -> None:
        self.dropped[reason] = self.dropped.get(reason, 0) + 1

    def _fill(self, index: int, t: float) -> Optional[Window]:
        rows = list(self._ring)
        holed = sum(1 for r in rows if any(v is None for v in r))
        assert self.max_missing is not None
        if holed > self.max_missing:
            self._drop("gap")
            self._remember(rows)
            return None
        if holed and self.missing == "drop":
            self._drop("missing")
            self._remember(rows)
            return None
        columns: List[List[Optional[float]]] = [[r[c] for r in rows] for c in range(len(self.channels))]
        filled = 0
        for c, col in enumerate(columns):
            holes = sum(1 for v in col if v is None)
            if not holes:
                continue
            if all(v is None for v in col) and self._last_known[c] is None:
                self._drop("missing")  # a channel never seen: nothing to fill it from
                self._remember(rows)
                return None
            filled += holes
            fill_column(col, self._last_known[c], self.missing == "interpolate")
        self._remember(rows)
        values = tuple(tuple(float(columns[c][i]) for c in range(len(columns))) for i in range(len(rows)))  # type: ignore[arg-type]
        return Window(index=index, rows=values, filled=filled, t_end=t)

    def _remember(self, rows: List[Row]) -> None:
        """The last known value per channel, for holding across windows (hop < window or not)."""
        for r in rows:
            for c, v in enumerate(r):
                if v is not None:
                    self._last_known[c] = v

    def stats(self) -> Dict[str, object]:
        return {
            "readings": self.readings,
            "ignored": self.ignored,
            "late": self.late,
            "windows_due": self.due,
            "windows": self.emitted,
            "dropped": dict(self.dropped),
        }


def fill_column(col: List[Optional[float]], before: Optional[float], interpolate: bool) -> None:
    """Fill the holes of one channel in place: held from the previous value (``before`` the window
    for leading holes, else the next known one), or linear between the known neighbours."""
    known = [i for i, v in enumerate(col) if v is not None]
    prev: Optional[float] = before
    prev_i: Optional[int] = None
    for i, v in enumerate(col):
        if v is not None:
            prev, prev_i = v, i
            continue
        nxt = next((k for k in known if k > i), None)
        if interpolate and prev_i is not None and nxt is not None:
            a, b = col[prev_i], col[nxt]
            assert a is not None and b is not None
            col[i] = a + (b - a) * (i - prev_i) / (nxt - prev_i)
        elif prev is not None:
            col[i] = prev
        else:
            assert nxt is not None
            col[i] = col[nxt]
