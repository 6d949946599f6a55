"""The next round prepared while the database works on this one, on the collector's one thread.

The store of a round waits for PostgreSQL: the COPY of its rows is most of the server's time, and
the client has nothing to do meanwhile. So the store calls :meth:`Ahead.idle` once the COPY's data
is sent, and the next round is taken and parsed there, while the server inserts. Measured before
(docs/performance.md, 2026-12-07): a writer thread storing round n while this one parsed round n+1
gained nothing over one thread (0.55x of a bare COPY against 0.58x serial, in one run): both stages
are Python, and each of the writer's ~20 waits on the server per round had to win the interpreter
lock back from the parse; in one thread, with the parse in the COPY's wait, 0.72x. SQLite works
inside this process, with no wait to fill: there the next round is prepared after the store
returns (serial measured no slower than two threads on SQLite either).

One round at most is prepared ahead, so rounds are stored and acknowledged in the order they were
taken and at most two are unacknowledged at once (the broker redelivers both if the collector stops
or dies; a prepared round is dropped, never half stored, when the loop stops).
"""

from __future__ import annotations

from typing import Callable, Generic, Optional, TypeVar

T = TypeVar("T")


class Ahead(Generic[T]):
    def __init__(self, take: Callable[[], Optional[T]]) -> None:
        """``take()``: the next round taken and prepared without waiting (None: nothing came)."""
        self._take = take
        self._next: Optional[T] = None

    def idle(self) -> None:
        """The store's hook: prepare the next round now, unless one is prepared already (the
        store may call it again; what arrived since is taken then)."""
        if self._next is None:
            self._next = self._take()

    def next(self) -> Optional[T]:
        """The round prepared ahead, handed over once (None: none was)."""
        job, self._next = self._next, None
        return job

    def pending(self) -> bool:
        """A round is prepared and not yet handed over (not acknowledged either)."""
        return self._next is not None
