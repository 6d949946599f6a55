"""Read + preprocess the next frame on its own thread while the model infers the current one.

onnxruntime releases the GIL during ``session.run``, so this overlap hides capture and
letterbox latency; on a CPU that inference already saturates it cannot hide their CPU time.

On a live camera the frame must also be the newest one when inference starts, not one picked up
right after the previous inference began and then left waiting for a whole inference. So for a
live source the thread times its read: it waits until the loop is about to finish its current
frame (the loop's measured busy time minus our measured preparation time, minus a margin) and
only then takes the newest frame. Files and folders are not live: there it reads at once.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from typing import Callable, Optional

from edge_agent.adapters.camera.capture import Camera
from edge_agent.adapters.host.probes import lower_thread_priority
from edge_agent.app.agent.modelset import ModelSet
from edge_agent.core.camera.source_spec import Frame
from edge_agent.inference.pipeline import Prepared, PrepRing

log = logging.getLogger("edge_agent.prefetch")

EMA = 0.2
MARGIN_S = 0.003  # thread wake-up and hand-off jitter measured here: ~1 ms


class Prefetch:
    """Reads + preprocesses the next frame on its own thread (a 1-deep hand-off).

    ``gate(frame) -> bool``: frames it refuses are never preprocessed (motion gating).
    """

    def __init__(
        self,
        camera: Camera,
        models: Callable[[], ModelSet],
        gate: Optional[Callable[[Frame], bool]] = None,
        paced: Optional[bool] = None,
        wake: Optional[threading.Event] = None,
    ) -> None:
        self.camera = camera
        self.models = models
        self.gate = gate
        self.paced = camera.drop_stale if paced is None else paced
        # None after the last frame: the camera finished and this thread holds nothing more
        self.q: queue.Queue[Optional[tuple[Frame, Optional[Prepared], ModelSet]]] = queue.Queue(maxsize=1)
        self.stop = threading.Event()
        self.ended = threading.Event()
        self.gate_errors = 0
        self.wake = wake  # set on every hand-off: the loop of several cameras waits on it
        # this thread's buffers, never another camera's. Two are enough: after a hand-off this
        # thread waits until the loop takes it (below), and the loop takes this camera's next frame
        # only once it is done with the last (one per camera per step), so at most one Prepared is
        # being inferred while the next is filled. A third pair cost 6 MB per camera at 640x640
        # (4 cameras: 1.26x the RSS of one, measured; the goal is <= 1.25x)
        self.ring = PrepRing(2)
        self._taken = threading.Event()
        self._taken_at: Optional[float] = None
        self._busy_s: Optional[float] = None  # the loop's time per frame, between our hand-offs
        self._prep_s: Optional[float] = None
        self.thread = threading.Thread(target=self._run, name="prefetch", daemon=True)
        self.thread.start()

    def _wait_for_turn(self) -> None:
        """Sleep until the loop is ~one preparation away from wanting the next frame."""
        if not self.paced or self._taken_at is None or self._busy_s is None:
            return
        lead = (self._prep_s or 0.0) * 1.5 + MARGIN_S
        delay = self._taken_at + self._busy_s - lead - time.monotonic()
        if delay > 0:
            self.stop.wait(delay)

    def _run(self) -> None:
        lower_thread_priority()
        while not self.stop.is_set():
            self._wait_for_turn()
            frame = self.camera.read(0.25)
            if frame is None:
                if self.camera.finished:
                    # nothing in hand and nothing to come (the last hand-off was taken before this
                    # read, so the queue is empty): the loop may end without waiting for a timeout,
                    # and not before a frame still being prepared is handed over
                    self.ended.set()
                    with contextlib.suppress(queue.Full):  # wakes a waiting get() at once
                        self.q.put_nowait(None)
                    if self.wake is not None:
                        self.wake.set()
                    return
                continue
            if self.gate is not None and not self._gate_open(frame):
                continue
            ms = self.models()
            t0 = time.monotonic()
            try:
                prepared: Optional[Prepared] = ms.detector.prepare(frame.image, self.ring)
            except Exception:  # noqa: BLE001 -- any error, not only ours: raised here it would end this thread
                # and stall the loop (still pinging the watchdog, so never restarted); handed over
                # unprepared, the loop prepares it again and meets the error itself (Agent._infer)
                prepared = None
            item = (frame, prepared, ms)
            dt = time.monotonic() - t0
            self._prep_s = dt if self._prep_s is None else (1 - EMA) * self._prep_s + EMA * dt
            self._taken.clear()
            while not self.stop.is_set():
                try:
                    self.q.put(item, timeout=0.25)
                    if self.wake is not None:
                        self.wake.set()
                    break
                except queue.Full:
                    continue
            # wait until the loop takes it, so the next wait is timed from the hand-off
            while not self.stop.is_set() and not self._taken.wait(0.25):
                pass

    def _gate_open(self, frame: Frame) -> bool:
        """The gate's answer; an error in it lets the frame through (the detector sees it, no event
        is missed) instead of ending this thread, which would stall the loop for good."""
        assert self.gate is not None
        try:
            return self.gate(frame)
        except Exception as exc:  # noqa: BLE001 -- see above
            self.gate_errors += 1
            if self.gate_errors == 1 or self.gate_errors % 1000 == 0:
                log.error(
                    "motion gate failed on frame %d (%d so far), frame inferred: %s",
                    frame.seq,
                    self.gate_errors,
                    exc,
                )
            return True

    @property
    def ready(self) -> bool:
        """A frame is waiting (a get(0) would return it): the scheduler's peek."""
        return not self.q.empty() and not self.ended.is_set()

    def get(self, timeout_s: float) -> Optional[tuple[Frame, Optional[Prepared], ModelSet]]:
        now = time.monotonic()
        if self._taken_at is not None:
            busy = now - self._taken_at
            self._busy_s = busy if self._busy_s is None else (1 - EMA) * self._busy_s + EMA * busy
        try:
            if self.ended.is_set() and self.q.empty():
                item = None
            elif timeout_s <= 0:
                item = self.q.get_nowait()
            else:
                item = self.q.get(timeout=timeout_s)
        except queue.Empty:
            item = None
        if item is None:
            self._taken_at = None  # the loop idled: its next busy time starts at the next hand-off
            return None
        self._taken_at = time.monotonic()
        self._taken.set()
        return item

    def close(self) -> None:
        self.stop.set()
        self.thread.join(2.0)
