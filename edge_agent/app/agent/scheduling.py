"""The loop's step with several cameras: which frames the shared detector runs next, and whether
in one ``session.run``.

Frames are taken from the cameras that have one ready now, picked by smooth weighted round robin
(core/camera/scheduler.py), never waited for: a batch is what is ready at once, so batching adds
no frame age. Up to ``[detector] max_batch`` of them run in one ``session.run`` when the detector's
batch axis is dynamic (YOLOv8n 640 on 2 threads here: 2 frames in one run took 0.93x the time of
two runs, 4 frames 0.96x; docs/cameras.md) and the provider is not TensorRT (a new batch size is a
new engine build there, minutes on a Nano); else one after the other. With every camera ready and
a batch as wide as the cameras, each camera is in every batch: weights then decide nothing (they
share a detector the cameras compete for).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import Optional

from edge_agent.app.agent.camera_pipeline import CameraPipeline, Item
from edge_agent.app.agent.modelset import ModelSet
from edge_agent.core.camera.scheduler import WeightedRoundRobin
from edge_agent.errors import EdgeAgentError
from edge_agent.inference.pipeline import Prepared, infer_frames

log = logging.getLogger("edge_agent.app.agent.agent")

POLL_S = 0.01  # the longest wait for a paced camera's turn or a sensor trigger


def batch_size(models: ModelSet, max_batch: int, cameras: int) -> int:
    """How many frames one run may take: 1 unless the batch axis is dynamic and not on TensorRT."""
    model = models.detector.model
    if max_batch <= 1 or cameras <= 1 or not model.dynamic_batch:
        return 1
    if any("Tensorrt" in p for p in model.info.providers):
        return 1
    return min(max_batch, cameras)


class ManyCameras:
    """One step of the loop over several camera pipelines."""

    def __init__(self, pipes: Sequence[CameraPipeline], wake: threading.Event, max_batch: int) -> None:
        self.pipes = list(pipes)
        self.wake = wake
        self.max_batch = max_batch
        self.rr = WeightedRoundRobin([p.view.weight for p in pipes])
        self.batches = 0  # runs that took more than one frame
        self.batched_frames = 0

    def step(self, models: Optional[ModelSet], limit: Optional[int] = None) -> Optional[bool]:
        """Run what is ready: True when frames ran, None when nothing was ready (it waited up to
        :data:`POLL_S` for a hand-off), False when every camera has ended."""
        self.wake.clear()  # before the peek: a hand-off after it sets it again
        ready = [n for n, p in enumerate(self.pipes) if p.ready]
        most = 1 if models is None else batch_size(models, self.max_batch, len(self.pipes))
        if limit is not None:
            most = max(1, min(most, limit))
        items: list[tuple[CameraPipeline, Item]] = []
        tried: list[int] = []
        while len(items) < most:
            i = self.rr.pick([n for n in ready if n not in tried])
            if i is None:
                break
            tried.append(i)
            item = self.pipes[i].next(0)
            if item is None:  # dropped as stale (or gated): not a turn, or the shares come out unequal
                self.rr.undo()
                continue
            items.append((self.pipes[i], item))
        if not items:
            if all(p.ended() for p in self.pipes):
                return False
            if not tried:
                self.wake.wait(POLL_S)
            return None
        batch = [(p, item) for p, item in items if item[1] is not None and item[2] is models]
        if len(batch) > 1:
            self._run_batch(batch)
            ran = {id(p) for p, _ in batch}
            items = [(p, item) for p, item in items if id(p) not in ran]
        for pipe, item in items:
            pipe.process(*item)
        return True

    def _run_batch(self, batch: list[tuple[CameraPipeline, Item]]) -> None:
        frames = [item[0] for _, item in batch]
        prepared: list[Prepared] = [item[1] for _, item in batch if item[1] is not None]
        models = batch[0][1][2]
        t0 = time.monotonic()
        try:
            outs = infer_frames(
                frames, prepared, models.detector, models.classifier, models.classify_ids, models.crop_padding
            )
        except EdgeAgentError as exc:
            for pipe, (frame, _, _) in batch:
                pipe.infer_failed(frame, exc)
            return
        total = (time.monotonic() - t0) * 1e3 / len(batch)
        self.batches += 1
        self.batched_frames += len(batch)
        for (pipe, (frame, prep, _)), (dets, timings, best) in zip(batch, outs):
            timings["total"] = total + (prep.pre_ms if prep else 0.0)
            timings["age"] = (t0 - frame.ts_mono) * 1e3
            timings["batch"] = float(len(batch))
            pipe.finish(frame, dets, timings, models, best)
