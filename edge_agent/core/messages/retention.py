"""What the retention of the collector's messages records (pure): the ``expired`` spans.

A gap is a seq range never received (``gaps`` view). Rows deleted for age must not turn into
gaps, and a real gap must stay one after the rows around it are deleted. So every deleted row is
kept as part of a span ``(device, boot, lo, hi)`` that never straddles a real gap: the rows of one
``confirmed`` island (every seq of it was stored: adapters.collector.confirmed) make one span,
whatever kept rows of other kinds lie between them; a row outside every island (a database older
than the islands) makes a span with its consecutive seqs only. The ``gaps`` view then reads
``messages`` and ``expired`` together.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence
from typing import Dict, List, NamedTuple, Optional, Tuple

# retention class -> the message kinds it holds ("results": every kind but the named ones)
CLASSES = ("results", "objects", "counts")
NAMED = ("objects", "counts")

Island = Tuple[int, int]


class Span(NamedTuple):
    device: str
    boot: int
    lo: int
    hi: int
    rows: int  # rows deleted in lo..hi (kept rows of other kinds may lie between)
    newest: float  # the newest device time among them (unix seconds)


def class_of(kind: str) -> str:
    return kind if kind in NAMED else "results"


def _island(islands: Sequence[Island], seq: int) -> Optional[Island]:
    i = bisect.bisect_right([lo for lo, _ in islands], seq) - 1
    if i >= 0 and islands[i][0] <= seq <= islands[i][1]:
        return islands[i]
    return None


def spans(
    rows: Iterable[Tuple[str, int, int, float]], islands: Mapping[Tuple[str, int], Sequence[Island]]
) -> List[Span]:
    """The spans of the deleted ``rows`` ``(device, boot, seq, time)``; ``islands``: the
    ``confirmed`` islands by (device, boot), sorted by lo."""
    by_key: Dict[Tuple[str, int], List[Tuple[int, float]]] = {}
    for device, boot, seq, t in rows:
        by_key.setdefault((device, boot), []).append((seq, t))
    out: List[Span] = []
    for (device, boot), items in sorted(by_key.items()):
        items.sort()
        own = islands.get((device, boot), ())
        group: List[Tuple[int, float]] = []
        where: Optional[Island] = None
        for seq, t in items:
            isl = _island(own, seq)
            if group and (isl != where or (isl is None and seq != group[-1][0] + 1)):
                out.append(_span(device, boot, group))
                group = []
            group.append((seq, t))
            where = isl
        if group:
            out.append(_span(device, boot, group))
    return out


def _span(device: str, boot: int, group: Sequence[Tuple[int, float]]) -> Span:
    return Span(device, boot, group[0][0], group[-1][0], len(group), max(t for _, t in group))


def merge(new: Span, old: Sequence[Span]) -> Span:
    """``new`` and the stored spans it joins (same device and boot, same island) as one."""
    every = [new, *old]
    return Span(
        new.device,
        new.boot,
        min(s.lo for s in every),
        max(s.hi for s in every),
        sum(s.rows for s in every),
        max(s.newest for s in every),
    )
