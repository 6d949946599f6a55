"""One camera's pipeline: capture, prefetch, motion gate, inference, its output step and its figures.

As Frigate's ``CameraState``, a :class:`CameraPipeline` holds everything that is per camera: the
:class:`Camera`, its :class:`Prefetch` when free-running, its :class:`MotionFilter`, the output step
chosen once from ``[output] mode`` (and that step's state), the frame count, fps and latency windows,
the no-score streak and the frame observers. What every camera shares (the model set, the outbox,
the sensor, model updates, the error count) is the agent's, reached through :class:`Owner`. Its
config is its :class:`CameraView`'s: read as if the file had this camera alone.

With several cameras the agent's loop peeks at :attr:`ready` and takes frames with ``next(0)`` in
the order its scheduler picks (core/camera/scheduler.py); one camera keeps the blocking
``next(0.25)``, so the single-camera loop is what it was.

:meth:`CameraPipeline.process` is the list of per-frame steps, read top to bottom:
infer -> account -> model updates -> output step -> observers.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Any, Callable, List, Optional, Protocol, Tuple

from edge_agent.adapters.camera.capture import Camera
from edge_agent.app.agent.modelset import ModelSet
from edge_agent.app.agent.output_steps import OutputStep, Sink, output_step
from edge_agent.app.agent.prefetch import Prefetch
from edge_agent.app.agent.steps import feed_model_updates
from edge_agent.core.camera.motion import MotionFilter
from edge_agent.core.camera.scheduler import too_old
from edge_agent.core.camera.source_spec import Frame
from edge_agent.core.config.cameras import CameraView
from edge_agent.core.messages.log_throttle import DEVICE_EVERY, LogThrottle
from edge_agent.core.vision.defaults import NO_SCORE_FRAMES, NO_SCORE_LEVEL
from edge_agent.core.vision.results import Detection
from edge_agent.errors import EdgeAgentError
from edge_agent.inference.pipeline import Prepared, infer_frame

if TYPE_CHECKING:
    from edge_agent.app.updates.agent_side import ModelUpdates

log = logging.getLogger("edge_agent.app.agent.agent")  # the agent's log lines, as before the split

# on_frame(camera, frame, detections): after inference, for each processed frame (views, tests)
FrameObserver = Callable[[Camera, Frame, List[Detection]], None]  # typing's: the package runs on 3.8
Item = Tuple[Frame, Optional[Prepared], ModelSet]  # a frame, prepared or not, and its model set


class Owner(Sink, Protocol):
    """What a pipeline uses of the agent that owns it: the parts every camera shares."""

    stop_event: threading.Event
    updates: Optional[ModelUpdates]

    @property
    def models(self) -> Optional[ModelSet]: ...

    def count_error(self) -> None: ...


class CameraPipeline:
    """One camera, from its frames to its output step; built once per camera by the agent."""

    def __init__(
        self,
        view: CameraView,
        owner: Owner,
        camera: Optional[Camera] = None,
        wake: Optional[threading.Event] = None,
    ) -> None:
        cfg = self.cfg = view.cfg
        self.view = view
        self.id = view.id
        self.owner = owner
        self.camera = camera  # built by open() unless given
        self.wake = wake  # several cameras: set when this one has a frame ready
        self.motion: Optional[MotionFilter] = MotionFilter(cfg.motion) if cfg.motion.enabled else None
        self.output: OutputStep = output_step(cfg, owner, view.id if view.named else None)  # chosen once
        self.keep_ids: Optional[frozenset[int]] = None  # [[cameras]] classes, resolved on start()
        self.motion_checked = self.motion_passed = 0
        self.dropped_stale = 0
        self.drop_stale = False  # several cameras: a frame that waited too long for its turn is dropped
        self._dropped_last = False
        self._triggers_seen = 0
        self.observers: list[FrameObserver] = []
        self.observer_errors = 0
        self._infer_errors = LogThrottle(DEVICE_EVERY)
        self.prefetch: Optional[Prefetch] = None
        self.trigger_only = False
        self.frames = 0
        self.latency: deque[dict[str, float]] = deque(maxlen=50)
        self.frame_times: deque[float] = deque(maxlen=50)
        self.no_score_streak = 0  # consecutive frames whose best score is <= NO_SCORE_LEVEL
        self._next_shot = time.monotonic()

    # ---- start and stop -------------------------------------------------------------------------
    def open(self) -> Camera:
        """The camera, built from ``[camera]`` unless one was given (not started yet)."""
        if self.camera is None:
            self.camera = Camera(self.cfg.camera)
        return self.camera

    def start(self, models: ModelSet) -> None:
        camera = self.open()
        self._keep(models)
        # frames >= 2x the model's letterbox: decoded at 1/2..1/8 (JPEG) or resized after decode (video)
        camera.decode_target = models.detector.decode_target
        camera.start()

    def _keep(self, models: ModelSet) -> None:
        """The camera's ``classes`` as the detector's ids (an unknown name: ModelError at start)."""
        classes = self.view.classes
        self.keep_ids = frozenset(models.detector.class_ids(list(classes))) if classes else None

    def begin(self) -> None:
        """The loop starts: paced (interval, trigger) or free-running with a prefetch thread."""
        cfg, sensor, camera = self.cfg, self.owner.sensor, self.open()
        self.trigger_only = (
            sensor is not None
            and cfg.sensor is not None
            and (bool(cfg.sensor.trigger) or any(m.trigger_camera for m in cfg.sensor_models))
            and cfg.camera.interval_s == 0
        )
        paced = cfg.camera.interval_s > 0 or self.trigger_only
        gate = self._motion_gate if self.motion is not None else None
        # several cameras: never paced. The loop takes a frame only when it is ready, so the time
        # between two takes (the pacing's "loop busy" estimate) includes the prefetch's own wait and
        # any gap of the source: an outage of 20 s kept a reconnected RTSP camera at one frame in
        # ~4 s for good (tests/app/agent/test_cameras_prefetch.py). Freshness is the stale rule's.
        paced_prefetch = None if self.wake is None else False
        self.prefetch = (
            None if paced else Prefetch(camera, self._models, gate, paced=paced_prefetch, wake=self.wake)
        )
        self._next_shot = time.monotonic()
        self._triggers_seen = sensor.triggers if sensor is not None else 0
        self.trigger_models = any(m.trigger_camera for m in cfg.sensor_models)  # [[sensor_models]] fire too

    def end(self) -> None:
        """The loop ended: the prefetch thread stops."""
        if self.prefetch is not None:
            self.prefetch.close()

    def ended(self) -> bool:
        """The camera finished and (free-running) the prefetch thread holds nothing more: a frame
        it is still preparing when the camera finishes is not lost."""
        camera = self.camera
        return (
            camera is not None and camera.finished and (self.prefetch is None or self.prefetch.ended.is_set())
        )

    def stop_camera(self) -> None:
        if self.camera is not None:
            self.camera.stop()

    def add_observer(self, fn: FrameObserver) -> None:
        self.observers.append(fn)

    def reloaded(self, models: ModelSet) -> None:
        self._keep(models)
        if self.camera is not None:
            self.camera.decode_target = models.detector.decode_target

    # ---- one frame ------------------------------------------------------------------------------
    @property
    def ready(self) -> bool:
        """Would ``next(0)`` have something (several cameras: the scheduler's peek)?"""
        if self.prefetch is not None:
            return self.prefetch.ready
        sensor = self.owner.sensor
        if self.trigger_only:
            return sensor is not None and sensor.triggers > self._triggers_seen
        return time.monotonic() >= self._next_shot

    def next(self, timeout_s: float = 0.25) -> Optional[Item]:
        """The next frame to infer, or None (none yet, stale, gated by motion, or not due);
        ``timeout_s`` = 0: at once (several cameras: the loop waits on its wake event instead)."""
        prefetch = self.prefetch
        if prefetch is not None:
            got = prefetch.get(timeout_s)
            if got is not None and self.drop_stale and self._stale(got[0]):
                return None
        else:
            got = self._next_paced() if timeout_s > 0 else self._next_due()
        if got is not None:
            self._next_shot = time.monotonic() + self.cfg.camera.interval_s
        return got

    def _stale(self, frame: Frame) -> bool:
        """Drop a frame that waited more than two frame intervals when a newer one is there."""
        camera = self.open()
        fps = camera.fps_in
        drop = too_old(
            time.monotonic() - frame.ts_mono,
            1.0 / fps if fps > 0 and camera.drop_stale else None,
            camera.has_frame,
            self._dropped_last,
        )
        self._dropped_last = drop
        self.dropped_stale += drop
        return drop

    def _next_due(self) -> Optional[Item]:
        """Paced, without waiting: the loop of several cameras asked because :attr:`ready` said so."""
        sensor = self.owner.sensor
        if self.trigger_only:
            assert sensor is not None
            self._triggers_seen = sensor.triggers
        return self._read(0.0)

    def _next_paced(self) -> Optional[Item]:
        sensor = self.owner.sensor
        if self.trigger_only:
            assert sensor is not None
            if not sensor.wait_trigger(0.25):
                return None
        else:
            wait = self._next_shot - time.monotonic()
            if wait > 0:
                fired = False
                if sensor is not None and (sensor.cfg.trigger or self.trigger_models):
                    fired = sensor.wait_trigger(min(wait, 0.25))  # a trigger shoots early
                else:
                    self.owner.stop_event.wait(min(wait, 0.25))
                if not fired and self._next_shot > time.monotonic():
                    return None
        return self._read(0.25)

    def _read(self, timeout_s: float) -> Optional[Item]:
        frame = self.open().read(timeout_s)
        if frame is None or (self.motion is not None and not self._motion_gate(frame)):
            return None
        return frame, None, self._models()

    def _models(self) -> ModelSet:
        models = self.owner.models
        assert models is not None
        return models

    def _motion_gate(self, frame: Frame) -> bool:
        assert self.motion is not None
        passed = self.motion.check(frame.image, frame.ts_mono)
        self.motion_checked += 1
        self.motion_passed += passed
        return passed

    def process(self, frame: Frame, prepared: Optional[Prepared], models: ModelSet) -> None:
        """One frame, step by step: infer -> account -> model updates -> output -> observers."""
        current = self.owner.models
        if current is not None and models is not current:  # reloaded meanwhile: prepared for the old input
            models, prepared = current, None
        inferred = self.infer(frame, prepared, models)
        if inferred is not None:
            self.finish(frame, *inferred, models)

    def finish(
        self,
        frame: Frame,
        dets: list[Detection],
        timings: dict[str, float],
        models: ModelSet,
        best: Optional[float] = None,
    ) -> None:
        """The steps after inference (``best``: the frame's best score, when run in a batch)."""
        if self.keep_ids is not None:  # this camera's classes, of what the shared detector kept
            dets = [d for d in dets if d.class_id in self.keep_ids]
        self.account(models, timings, best)
        updates = self.owner.updates
        if updates is not None:
            feed_model_updates(updates, frame, len(dets))
        self.output.on_frame(frame, dets, timings, models)
        if self.observers:
            self._notify(frame, dets)

    def infer(
        self, frame: Frame, prepared: Optional[Prepared], models: ModelSet
    ) -> Optional[tuple[list[Detection], dict[str, float]]]:
        """Inference step (boxes in the frame as the camera sent it); a model error is counted."""
        t0 = time.monotonic()
        try:
            dets, timings = infer_frame(
                frame, models.detector, models.classifier, models.classify_ids, models.crop_padding, prepared
            )
        except EdgeAgentError as exc:
            self.infer_failed(frame, exc)
            return None
        timings["total"] = (time.monotonic() - t0) * 1e3 + (prepared.pre_ms if prepared else 0.0)
        timings["age"] = (t0 - frame.ts_mono) * 1e3  # how old the frame is when inference starts
        return dets, timings

    def infer_failed(self, frame: Frame, exc: EdgeAgentError) -> None:
        self.owner.count_error()
        line = self._infer_errors.line("infer", f"frame {frame.seq}: {exc}")  # per frame: throttled
        if line is not None:
            log.error("%s", line)

    def account(self, models: ModelSet, timings: dict[str, float], best: Optional[float] = None) -> None:
        """Health step: frame count, latency and fps windows, the detector-cannot-score streak."""
        if best is None:
            best = getattr(models.detector, "last_max_score", float("nan"))
        self.no_score_streak = self.no_score_streak + 1 if best <= NO_SCORE_LEVEL else 0
        if self.no_score_streak == NO_SCORE_FRAMES:
            log.warning("%s", self.warnings()[0])
        self.frames += 1
        self.latency.append(timings)
        self.frame_times.append(time.monotonic())

    def _notify(self, frame: Frame, dets: list[Detection]) -> None:
        camera = self.camera
        assert camera is not None
        for fn in self.observers:
            try:
                fn(camera, frame, dets)
            except Exception:
                self.observer_errors += 1
                if self.observer_errors == 1:
                    log.exception(
                        "frame observer %r failed on frame %d (logged once, counted)", fn, frame.seq
                    )

    # ---- health ---------------------------------------------------------------------------------
    def warnings(self) -> list[str]:
        if self.no_score_streak >= NO_SCORE_FRAMES:
            return [
                f"detector: no score above {NO_SCORE_LEVEL:g} for {self.no_score_streak} consecutive "
                "frames (a model that cannot score, or a camera seeing nothing); check with `edge-agent infer`"
            ]
        return []

    def fps(self) -> float:
        t = self.frame_times
        return (len(t) - 1) / (t[-1] - t[0]) if len(t) >= 2 and t[-1] > t[0] else 0.0

    def stats(self) -> dict[str, Any]:
        """This camera's figures in the status ``cameras`` map (schemas/status.json)."""
        cam = self.open().stats()
        ages = sorted(d["age"] for d in self.latency if "age" in d)
        return {
            "source": cam["source"],
            "kind": cam["kind"],
            "state": cam["state"],
            "fps_in": cam["fps"],
            "fps": round(self.fps(), 2),
            "processed": self.frames,
            "skipped_motion": self.motion_checked - self.motion_passed,
            "dropped_stale": self.dropped_stale,
            "frame_age_ms": round(ages[len(ages) // 2], 1) if ages else None,
            "motion_ratio": round(self.motion_passed / self.motion_checked, 3)
            if self.motion_checked
            else None,
            "reconnects": cam["reconnects"],
            "last_error": cam["last_error"],
            "weight": self.view.weight,
        }

    def latency_ms(self) -> dict[str, float]:
        if not self.latency:
            return {}
        keys = set().union(*self.latency)
        return {
            k: round(sorted(d.get(k, 0.0) for d in self.latency)[len(self.latency) // 2], 2) for k in keys
        }
