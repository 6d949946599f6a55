"""Two stages of the collector's rounds on two threads: the caller parses round n+1 while a writer
thread stores and acknowledges round n.

A round's store waits for the database (PostgreSQL executing the COPY, the commit's WAL flush,
SQLite's fsync) with the GIL free, and the parse of the next round (JSON decoding, the topic and body
checks) can run meanwhile. Measured on loopback (docs/performance.md, 2026-12-04): no gain beyond
the runs' spread (PostgreSQL 0.48-0.50x of a bare COPY against 0.46-0.48x serial): both stages are
mostly Python, so they take turns on the GIL and only the server's short share overlaps; the case
for it is a database across a network, not measured here. One round at most waits for the writer, so
rounds are stored and acknowledged in the order they were taken, and at most two rounds are
unacknowledged at once (the broker redelivers both if the collector stops or dies).

A writer error is not lost in its thread: the next :meth:`Overlap.put` (or :meth:`Overlap.close`)
raises it in the caller's, where a serial loop would have raised it.
"""

from __future__ import annotations

import queue
import threading
from typing import Callable, Generic, Optional, TypeVar

T = TypeVar("T")


class Overlap(Generic[T]):
    def __init__(
        self, work: Callable[[T], None], idle: Callable[[], None] = lambda: None, idle_s: float = 0.2
    ) -> None:
        """``work(job)`` for each job, in order, on the writer thread; ``idle()`` after each job and
        every ``idle_s`` without one (the writer's periodic work: it owns the database)."""
        self._work = work
        self._idle = idle
        self._idle_s = idle_s
        self._slot: queue.Queue[Optional[tuple[T]]] = queue.Queue(maxsize=1)  # None: end
        self._pending = 0  # jobs put and not yet done (waiting or being worked on)
        self._lock = threading.Condition()
        self._error: Optional[BaseException] = None
        self._thread = threading.Thread(target=self._loop, name="collector-writer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def put(self, job: T, stop: Optional[threading.Event] = None) -> bool:
        """Hand ``job`` over; blocks while the writer has one waiting already. False: ``stop`` was
        set first, and the job was not handed over."""
        self._raise()
        while True:
            with self._lock:
                self._pending += 1
            try:
                self._slot.put((job,), timeout=0.2)
                return True
            except queue.Full:
                with self._lock:
                    self._pending -= 1
                    self._lock.notify_all()
                self._raise()  # a writer that died never takes it: say why instead of waiting
                if stop is not None and stop.is_set():
                    return False

    def busy(self) -> bool:
        """A job is waiting or being worked on."""
        with self._lock:
            return self._pending > 0

    def wait_idle(self, timeout: Optional[float] = None) -> bool:
        """Until every job put so far is done (or the writer failed); False: timed out."""
        with self._lock:
            done = self._lock.wait_for(lambda: self._pending == 0 or self._error is not None, timeout)
        self._raise()
        return done

    def close(self) -> None:
        """Let the writer finish the job in hand and end; a job still waiting is not worked on (in the
        collector: not acknowledged, so the broker sends it again). Raises the writer's error."""
        try:
            while True:
                self._slot.get_nowait()
                with self._lock:
                    self._pending -= 1
                    self._lock.notify_all()
        except queue.Empty:
            pass
        if self._thread.is_alive():
            self._slot.put(None)
            self._thread.join()
        self._raise()

    def check(self) -> None:
        """Raise the writer's error, if it died (the caller's loop asks between rounds too: with
        no message coming, no :meth:`put` would ever tell)."""
        self._raise()

    def _raise(self) -> None:
        if self._error is not None:
            raise self._error

    def _loop(self) -> None:
        try:
            while True:
                try:
                    job = self._slot.get(timeout=self._idle_s)
                except queue.Empty:
                    self._idle()
                    continue
                if job is None:
                    return
                try:
                    self._work(job[0])
                finally:
                    with self._lock:
                        self._pending -= 1
                        self._lock.notify_all()
                self._idle()
        except BaseException as exc:  # noqa: BLE001 -- handed to the caller's thread, raised there
            with self._lock:
                self._error = exc
                self._lock.notify_all()
