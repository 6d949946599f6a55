"""``POST /api/v1/infer``: an image in, the ``infer --json`` object out, from the running models.

The same layers as ``edge-agent infer``: the header check before any decode
(adapters/camera/images.check_pixels, ``[web] max_pixels``), the cascade of inference/pipeline.py,
and :class:`ImageResult`'s ``to_json`` (the ``infer --json`` line). One request runs at a time
(the loop keeps its cores); ``[web] infer_queue`` more may wait, one more is refused with 429.
The running detector is shallow-copied per model set: the copy shares the ONNX Runtime session
(whose ``run`` is thread-safe) but not the per-call state the loop reads (its last best score
and its preprocessing buffers).
"""

from __future__ import annotations

import copy
import threading
from typing import Any, Callable, Dict, Optional, Tuple

import cv2
import numpy as np

from edge_agent.adapters.camera.images import check_pixels
from edge_agent.app.agent.modelset import ModelSet
from edge_agent.core.vision.results import ImageResult
from edge_agent.core.web.request_limits import RequestError
from edge_agent.errors import EdgeAgentError, ImageError
from edge_agent.inference.pipeline import Detector, PrepRing, run_cascade


class InferGate:
    """One running, ``queue`` waiting; beyond that :class:`RequestError` 429 at once."""

    def __init__(self, queue: int) -> None:
        self.limit = 1 + queue
        self.inside = 0
        self.refused = 0
        self.done = 0
        self._count = threading.Lock()
        self._run = threading.Lock()

    def __enter__(self) -> InferGate:
        with self._count:
            if self.inside >= self.limit:
                self.refused += 1
                raise RequestError(
                    429,
                    f"{self.inside} inference requests running or waiting (1 + web.infer_queue); retry later",
                )
            self.inside += 1
        self._run.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self._run.release()
        with self._count:
            self.inside -= 1
            self.done += 1


class InferApi:
    def __init__(self, models: Callable[[], Optional[ModelSet]], max_pixels: int, queue: int) -> None:
        self.models = models
        self.max_pixels = max_pixels
        self.gate = InferGate(queue)
        self._own: Tuple[Optional[ModelSet], Optional[Detector]] = (None, None)

    def _detector(self, models: ModelSet) -> Detector:
        if self._own[0] is not models:  # a reload swapped the set: a fresh copy of its detector
            det = copy.copy(models.detector)
            det._ring = PrepRing()
            self._own = (models, det)
        own = self._own[1]
        assert own is not None
        return own

    def infer(self, data: bytes, name: str = "upload") -> Dict[str, Any]:
        """The ``infer --json`` object of the image ``data``; RequestError 413/400/503 otherwise."""
        try:
            check_pixels(data, name, self.max_pixels)
        except ImageError as exc:
            status = 413 if "exceeds the limit" in str(exc) else 400
            raise RequestError(status, str(exc).replace("max_pixels", "web.max_pixels")) from None
        try:
            img = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
        except cv2.error:  # a decoder's own abort: this image, not the agent
            img = None
        if img is None:
            raise RequestError(
                400, f"{name}: not a decodable image ({len(data)} bytes), expected JPEG/PNG/WebP/BMP"
            )
        with self.gate:
            models = self.models()
            if models is None:
                raise RequestError(503, "the models are not loaded yet")
            try:
                dets, timings = run_cascade(
                    img, self._detector(models), models.classifier, models.classify_ids, models.crop_padding
                )
            except EdgeAgentError as exc:
                raise RequestError(500, f"{name}: inference failed: {exc}") from None
        return ImageResult(name, img.shape[1], img.shape[0], dets, timings).to_json()
