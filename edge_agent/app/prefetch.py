"""Read + preprocess the next frame on its own thread while the model infers the current one.

onnxruntime releases the GIL during ``session.run``, so this overlap hides capture and
letterbox latency; on a CPU that inference already saturates it cannot hide their CPU time.
"""

from __future__ import annotations

import queue
import threading
from typing import Callable, Optional

from edge_agent.adapters.camera import Camera
from edge_agent.adapters.system import lower_thread_priority
from edge_agent.app.modelset import ModelSet
from edge_agent.core.camera_source import Frame
from edge_agent.inference.pipeline import Prepared


class Prefetch:
    """Reads + preprocesses the next frame on its own thread (a 1-deep hand-off)."""

    def __init__(self, camera: Camera, models: Callable[[], ModelSet]) -> None:
        self.camera = camera
        self.models = models
        self.q: queue.Queue[tuple[Frame, Prepared, ModelSet]] = queue.Queue(maxsize=1)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="prefetch", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        lower_thread_priority()
        while not self.stop.is_set():
            frame = self.camera.read(0.25)
            if frame is None:
                continue
            ms = self.models()
            item = (frame, ms.detector.prepare(frame.image), ms)
            while not self.stop.is_set():
                try:
                    self.q.put(item, timeout=0.25)
                    break
                except queue.Full:
                    continue

    def get(self, timeout_s: float) -> Optional[tuple[Frame, Prepared, ModelSet]]:
        try:
            return self.q.get(timeout=timeout_s)
        except queue.Empty:
            return None

    def close(self) -> None:
        self.stop.set()
        self.thread.join(2.0)
