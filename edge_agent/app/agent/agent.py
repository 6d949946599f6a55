"""The agent: camera (+ sensor) -> detect -> classify crops -> result -> outbox, beside MQTT sync.

One loop thread owns inference. Capture runs in the camera's thread and, when free-running,
preprocessing of the next frame runs in a prefetch thread while the model infers the current
one (onnxruntime releases the GIL), so throughput approaches 1 / session.run. The network is
never on this path: results go to the local outbox and the sync thread ships them.

The loop itself pings the systemd watchdog, so a hung inference stops the pings and systemd
restarts us; a helper thread pinging would hide exactly that failure.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any, Optional

from edge_agent.adapters.camera.capture import Camera
from edge_agent.adapters.host import sdnotify
from edge_agent.adapters.outbox.outbox import Outbox
from edge_agent.app.agent.health import StatusOutputs, snapshot, start_metrics
from edge_agent.app.agent.modelset import ModelSet
from edge_agent.app.agent.objects_step import ObjectsStep
from edge_agent.app.agent.parts import start_sensor, start_sync
from edge_agent.app.agent.prefetch import Prefetch
from edge_agent.app.agent.steps import feed_model_updates, result_body
from edge_agent.app.updates.agent_side import ModelUpdates
from edge_agent.core.camera.motion import MotionFilter
from edge_agent.core.camera.source_spec import Frame
from edge_agent.core.config.schema import Config, require_detector
from edge_agent.core.messages.builders import topics
from edge_agent.core.messages.output_policy import OutputPolicy
from edge_agent.core.vision.defaults import NO_SCORE_FRAMES, NO_SCORE_LEVEL
from edge_agent.core.vision.results import Detection
from edge_agent.errors import EdgeAgentError, QueueFullError
from edge_agent.inference.pipeline import Prepared, infer_frame

log = logging.getLogger(__name__)

STATUS_EVERY_S = 2.0
DRAIN_ON_STOP_S = 3.0  # after SIGTERM
DRAIN_ON_END_S = 10.0  # after --max-frames or the end of a file/folder camera


class Agent:
    """Runs until SIGTERM/SIGINT, the end of a finite camera source, or ``max_frames``."""

    def __init__(
        self,
        cfg: Config,
        config_path: Optional[Path] = None,
        *,
        max_frames: Optional[int] = None,
        camera: Optional[Camera] = None,
        models: Optional[ModelSet] = None,
        on_result: Optional[Callable[[dict[str, Any]], None]] = None,
    ) -> None:
        self.cfg = cfg
        self.config_path = config_path
        self.max_frames = max_frames
        self.on_result = on_result
        self._camera = camera
        self._models = models
        self.stop_event = threading.Event()
        self.reload_requested = threading.Event()
        self.frames = 0
        self.emitted = 0
        self.errors = 0
        self.rejected = 0
        self.reloads = 0
        self.reload_failures = 0
        self.ready_s: Optional[float] = None
        self._latency: deque[dict[str, float]] = deque(maxlen=50)
        self._frame_times: deque[float] = deque(maxlen=50)
        self.started_mono = time.monotonic()
        self.started_wall = time.time()
        self.last_status: Optional[dict[str, Any]] = None
        self._parts: Optional[tuple[Camera, Outbox, Any, Any]] = None
        self._status_out = StatusOutputs(cfg)
        self.updates: Optional[ModelUpdates] = None
        self._no_score_streak = 0  # consecutive frames whose best score is <= NO_SCORE_LEVEL
        self._running_camera: Optional[Camera] = None
        self.motion: Optional[MotionFilter] = MotionFilter(cfg.motion) if cfg.motion.enabled else None
        # [output] mode = "objects": tracked objects, zone/line events and counts (docs/objects.md)
        self.objects: Optional[ObjectsStep] = ObjectsStep(cfg) if cfg.output.mode == "objects" else None

    # ---- wiring ---------------------------------------------------------------------------------
    def install_signal_handlers(self) -> None:
        def _stop(signum: int, _frame: Optional[FrameType]) -> None:
            log.info("signal %s: stopping", signal.Signals(signum).name)
            self.stop_event.set()

        def _hup(_signum: int, _frame: Optional[FrameType]) -> None:
            self.reload_requested.set()

        signal.signal(signal.SIGTERM, _stop)
        signal.signal(signal.SIGINT, _stop)
        signal.signal(signal.SIGHUP, _hup)

    def run(self) -> int:
        cfg = self.cfg
        # a first TensorRT engine build can take minutes: adapters.tensorrt extends systemd's start
        # timeout right before one (a cold engine cache), and only then
        sdnotify.status("loading and warming up the models")
        if self._models is None and cfg.model_update.enabled:
            self.updates = ModelUpdates(cfg, self.reload_requested.set)
        models = self._models or self._build_models(cfg)  # warmed up inside OnnxModel
        self._models = models
        sdnotify.status(f"models warm: {models.detector.model.info.model_id}")
        outbox = Outbox.from_config(cfg.queue)
        camera = self._camera or Camera(cfg.camera)
        self._parts = (camera, outbox, None, None)
        sync = start_sync(cfg, outbox, self.current_status, self._count_error)
        self._parts = (camera, outbox, sync, None)
        if self.updates is not None:
            # a model-update step publishes the whole snapshot (the same shape), right away
            self.updates.start(
                (lambda: sync.publish_status(self.current_status(fresh=True))) if sync is not None else None
            )
        sensor = start_sensor(cfg, outbox, self._count_error)
        self._parts = (camera, outbox, sync, sensor)
        metrics = start_metrics(self)
        # JPEG sources decode frames >= 2x the model input at 1/2..1/8 (libjpeg DCT scaling)
        camera.decode_target = models.detector.input_hw
        self._running_camera = camera
        try:
            camera.start()
            self.ready_s = time.monotonic() - self.started_mono
            self._status_tick()
            sdnotify.ready()  # only now: models loaded and warm, queue open, camera started
            log.info(
                "ready in %.2fs: camera %s, detector %s, provider %s",
                self.ready_s,
                camera.name,
                models.detector.model.info.model_id,
                models.provider,
            )
            self._loop(camera, outbox, sensor)
        finally:
            sdnotify.stopping()
            if self.updates is not None:
                self.updates.stop()
            if metrics is not None:
                metrics.stop()
            camera.stop()
            if sensor is not None:
                sensor.stop()
            if self.objects is not None:  # every object still tracked ends; the counts so far
                self.objects.stop(lambda t, b: self._queue(outbox, t, b))
            with contextlib.suppress(QueueFullError):  # reject_new on a full disk: close() accounts for it
                outbox.flush()
            if sync is not None:
                if sync.state == "connected":
                    # a short, bounded push of what is left while the broker is there; the rest
                    # stays queued on disk for the next start (SIGTERM: systemd's stop timeout is 30 s)
                    sync.drain(DRAIN_ON_STOP_S if self.stop_event.is_set() else DRAIN_ON_END_S)
                sync.stop()
            self._status_tick(final=True)
            outbox.close()
        log.info(
            "stopped after %d frames, %d results queued, %d errors", self.frames, self.emitted, self.errors
        )
        return 0

    def _count_error(self) -> None:
        self.errors += 1

    # ---- the loop -------------------------------------------------------------------------------
    def _loop(self, camera: Camera, outbox: Outbox, sensor: Any) -> None:
        cfg = self.cfg
        wd = sdnotify.watchdog_interval_s()
        policy = OutputPolicy.from_config(cfg.output)
        topic = topics(cfg.mqtt.topic_prefix, cfg.device.id).detections
        trigger_only = (
            sensor is not None
            and cfg.sensor is not None
            and bool(cfg.sensor.trigger)
            and cfg.camera.interval_s == 0
        )
        paced = cfg.camera.interval_s > 0 or trigger_only
        gate = self._motion_gate if self.motion is not None else None
        prefetch = None if paced else Prefetch(camera, lambda: self._models, gate)  # type: ignore[arg-type,return-value]
        last_ping = last_status = 0.0
        next_shot = time.monotonic()
        try:
            while not self.stop_event.is_set():
                now = time.monotonic()
                if wd is not None and now - last_ping >= wd:
                    sdnotify.watchdog()
                    last_ping = now
                if now - last_status >= STATUS_EVERY_S:  # the one status timer
                    self._status_tick()
                    last_status = now
                if self.reload_requested.is_set():
                    self.reload_requested.clear()
                    self._reload()
                item = self._next(camera, prefetch, sensor, trigger_only, next_shot)
                if item is None:
                    # free-running: the prefetch thread says when it holds nothing more (a frame it
                    # is still preparing when the camera finishes is not lost)
                    if camera.finished and (prefetch is None or prefetch.ended.is_set()):
                        log.info("camera source ended")
                        break
                    continue
                next_shot = time.monotonic() + cfg.camera.interval_s
                frame, prepared, models = item
                self._process(frame, prepared, models, policy, outbox, topic, sensor)
                if self.max_frames is not None and self.frames >= self.max_frames:
                    break
        finally:
            if prefetch is not None:
                prefetch.close()

    def _next(
        self,
        camera: Camera,
        prefetch: Optional[Prefetch],
        sensor: Any,
        trigger_only: bool,
        next_shot: float,
    ) -> Optional[tuple[Frame, Optional[Prepared], ModelSet]]:
        if prefetch is not None:
            got = prefetch.get(0.25)
            return (got[0], got[1], got[2]) if got is not None else None
        if trigger_only:
            if not sensor.wait_trigger(0.25):
                return None
        else:
            wait = next_shot - time.monotonic()
            if wait > 0:
                fired = False
                if sensor is not None and sensor.cfg.trigger:
                    fired = sensor.wait_trigger(min(wait, 0.25))  # a trigger shoots early
                else:
                    self.stop_event.wait(min(wait, 0.25))
                if not fired and next_shot > time.monotonic():
                    return None
        frame = camera.read(0.25)
        assert self._models is not None
        if frame is None or (self.motion is not None and not self._motion_gate(frame)):
            return None
        return frame, None, self._models

    def _motion_gate(self, frame: Frame) -> bool:
        assert self.motion is not None
        return self.motion.check(frame.image, frame.ts_mono)

    def _process(
        self,
        frame: Frame,
        prepared: Optional[Prepared],
        models: ModelSet,
        policy: OutputPolicy,
        outbox: Outbox,
        topic: str,
        sensor: Any,
    ) -> None:
        """One frame, step by step: infer -> account -> model updates -> track | decide -> queue."""
        if models is not self._models:  # reloaded meanwhile: prepared for the old model's input size
            models, prepared = self._models, None  # type: ignore[assignment]
        inferred = self._infer(frame, prepared, models)
        if inferred is None:
            return
        dets, timings = inferred
        self._account(models, timings)
        if self.updates is not None:
            feed_model_updates(self.updates, frame, len(dets))
        if self.objects is not None:  # objects mode: the tracking step replaces per-frame results
            t1 = time.monotonic()
            self.objects.on_frame(frame, dets, lambda t, b: self._queue(outbox, t, b))
            timings["track"] = (time.monotonic() - t1) * 1e3  # in the status latency (same dict)
            return
        decision = policy.decide(frame.ts_mono, [(d.label, d.box) for d in dets])
        if decision.emit:
            body = result_body(self.cfg, frame, dets, timings, models, decision.reason, sensor)
            self._queue(outbox, topic, body)

    def _infer(
        self, frame: Frame, prepared: Optional[Prepared], models: ModelSet
    ) -> Optional[tuple[list[Detection], dict[str, float]]]:
        """Inference step (boxes in the frame as the camera sent it); a model error is counted."""
        t0 = time.monotonic()
        try:
            dets, timings = infer_frame(
                frame, models.detector, models.classifier, models.classify_ids, models.crop_padding, prepared
            )
        except EdgeAgentError as exc:
            self.errors += 1
            log.error("frame %d: %s", frame.seq, exc)
            return None
        timings["total"] = (time.monotonic() - t0) * 1e3 + (prepared.pre_ms if prepared else 0.0)
        timings["age"] = (t0 - frame.ts_mono) * 1e3  # how old the frame is when inference starts
        return dets, timings

    def _account(self, models: ModelSet, timings: dict[str, float]) -> None:
        """Health step: frame count, latency and fps windows, the detector-cannot-score streak."""
        best = getattr(models.detector, "last_max_score", float("nan"))
        self._no_score_streak = self._no_score_streak + 1 if best <= NO_SCORE_LEVEL else 0
        if self._no_score_streak == NO_SCORE_FRAMES:
            log.warning("%s", self.warnings()[0])
        self.frames += 1
        self._latency.append(timings)
        self._frame_times.append(time.monotonic())

    def _queue(self, outbox: Outbox, topic: str, body: dict[str, Any]) -> bool:
        """Queue step: one message into the durable outbox, counted; False when it was not queued."""
        try:
            outbox.put(topic, body)
        except QueueFullError:  # reject_new: counted and logged once per streak by the outbox
            self.rejected += 1
            return False
        except EdgeAgentError as exc:  # a disk error
            self.errors += 1
            kind = f"{body.get('event', 'counts')} message"
            log.error(
                "%s not queued: %s", f"result of frame {body.get('frame')}" if "image" in body else kind, exc
            )
            return False
        self.emitted += 1
        if self.on_result is not None:
            self.on_result(body)
        return True

    def _reload(self) -> None:
        """SIGHUP: re-read the config, load and warm the new models, then swap atomically."""
        from edge_agent.app.cli.configfile import load_config

        try:
            new_cfg = load_config(self.config_path) if self.config_path else self.cfg
            require_detector(new_cfg, str(self.config_path))
            new_models = self._build_models(new_cfg)
        except EdgeAgentError as exc:
            self.reload_failures += 1
            log.error("reload failed, keeping the running models: %s", exc)
            return
        self._models = new_models
        if self._running_camera is not None:
            self._running_camera.decode_target = new_models.detector.input_hw
        self.cfg.detector = new_cfg.detector
        self.cfg.classifier = new_cfg.classifier
        self.reloads += 1
        log.info("reloaded: detector %s", new_models.detector.model.info.model_id)

    def _build_models(self, cfg: Config) -> ModelSet:
        """The installed model version (with rollback on a load failure), else the config's model."""
        return self.updates.build_models(cfg) if self.updates is not None else ModelSet.from_config(cfg)

    # ---- health ---------------------------------------------------------------------------------
    def warnings(self) -> list[str]:
        """Conditions an operator should look at; carried in the status file."""
        if self._no_score_streak >= NO_SCORE_FRAMES:
            return [
                f"detector: no score above {NO_SCORE_LEVEL:g} for {self._no_score_streak} consecutive "
                "frames (a model that cannot score, or a camera seeing nothing); check with `edge-agent infer`"
            ]
        return []

    def fps(self) -> float:
        t = self._frame_times
        return (len(t) - 1) / (t[-1] - t[0]) if len(t) >= 2 and t[-1] > t[0] else 0.0

    def latency_ms(self) -> dict[str, float]:
        if not self._latency:
            return {}
        keys = set().union(*self._latency)
        return {
            k: round(sorted(d.get(k, 0.0) for d in self._latency)[len(self._latency) // 2], 2) for k in keys
        }

    @property
    def models(self) -> Optional[ModelSet]:
        return self._models

    def current_status(self, fresh: bool = False) -> dict[str, Any]:
        """The latest snapshot (MqttSync's status_fn: connect message and last will); ``fresh``
        builds one now with the same builder (a Prometheus scrape between two ticks)."""
        if (fresh or self.last_status is None) and self._parts is not None:
            camera, outbox, sync, sensor = self._parts
            state = self.last_status["state"] if self.last_status else "running"
            return snapshot(self, camera, outbox, sync, sensor, state)
        return dict(self.last_status or {})

    def _status_tick(self, final: bool = False) -> None:
        """The one status timer: one snapshot to the status file, systemd, Prometheus and MQTT."""
        assert self._parts is not None
        camera, outbox, sync, sensor = self._parts
        self.last_status = snapshot(self, camera, outbox, sync, sensor, "stopped" if final else "running")
        self._status_out.send(self.last_status, sync, final)
