"""The agent: camera (+ sensor) -> detect -> classify crops -> result -> outbox, beside MQTT sync.

The agent owns what every camera shares (the model set, the outbox, MQTT sync, the sensor, model
updates, the status) and a list of camera pipelines (one per camera: the single ``[camera]``, or
each of ``[[cameras]]``: :mod:`edge_agent.app.agent.camera_pipeline`). With several cameras the
loop's step is :class:`edge_agent.app.agent.scheduling.ManyCameras` (one shared session per
model; the next ready frames by weighted round robin, in one ``session.run`` when the detector's
batch axis is dynamic).

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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from queue import SimpleQueue
from types import FrameType
from typing import TYPE_CHECKING, Any, Optional

from edge_agent.adapters.camera.capture import Camera
from edge_agent.adapters.host import sdnotify
from edge_agent.adapters.outbox.outbox import Outbox
from edge_agent.app.agent.camera_pipeline import CameraPipeline, FrameObserver
from edge_agent.app.agent.health import StatusOutputs, snapshot, start_metrics
from edge_agent.app.agent.modelset import ModelSet
from edge_agent.app.agent.objects_step import ObjectsStep
from edge_agent.app.agent.output_steps import ObjectsOutput
from edge_agent.app.agent.parts import start_sensor, start_sensor_models, start_sync
from edge_agent.app.agent.scheduling import ManyCameras
from edge_agent.app.updates.agent_side import ModelUpdates
from edge_agent.app.web.web_app import WebApp, start_web
from edge_agent.core.camera.motion import MotionFilter
from edge_agent.core.config.cameras import camera_views
from edge_agent.core.config.schema import Config, require_detector
from edge_agent.core.messages.log_throttle import DEVICE_EVERY, LogThrottle
from edge_agent.core.objects.count_keys import Op
from edge_agent.errors import EdgeAgentError, QueueFullError

if TYPE_CHECKING:
    from edge_agent.adapters.mqtt.sync import MqttSync
    from edge_agent.adapters.sensor.serial_reader import SerialSensor
    from edge_agent.app.agent.sensor_inference import SensorInference

log = logging.getLogger(__name__)

STATUS_EVERY_S = 2.0
DRAIN_ON_STOP_S = 3.0  # after SIGTERM
DRAIN_ON_END_S = 10.0  # after --max-frames or the end of a file/folder camera
# the sections the running pipelines and parts were built from: a reload keeps them (said in the log)
SCENE_SECTIONS: tuple[str, ...] = ("camera", "cameras", "motion", "zones", "lines", "output", "tracker")
SCENE_SECTIONS += ("sensor", "sensor_models", "mqtt", "web")


@dataclass
class Parts:
    """What ``run`` starts beside the pipelines, shared by every camera (None: off or not started)."""

    outbox: Outbox
    sync: Optional[MqttSync] = None
    sensor: Optional[SerialSensor] = None
    sensor_models: list[SensorInference] = field(default_factory=list)


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
        self._models = models
        self.stop_event = threading.Event()
        self.reload_requested = threading.Event()
        self.emitted = 0
        self.errors = 0
        self.rejected = 0
        self._not_queued = LogThrottle(DEVICE_EVERY)
        self.reloads = 0
        self.reload_failures = 0
        self.ready_s: Optional[float] = None
        self.started_mono = time.monotonic()
        self.started_wall = time.time()
        self.last_status: Optional[dict[str, Any]] = None
        self._parts: Optional[Parts] = None
        self._status_out = StatusOutputs(cfg)
        self.updates: Optional[ModelUpdates] = None
        # one per camera, each with its output step chosen from its [output] mode; several cameras
        # wait on one event that any camera's prefetch sets when it hands a frame over
        views = camera_views(cfg)
        self._wake = threading.Event()
        wake = self._wake if len(views) > 1 else None
        self.pipelines: list[CameraPipeline] = [
            CameraPipeline(view, self, camera if i == 0 else None, wake) for i, view in enumerate(views)
        ]
        self.named_cameras = bool(cfg.cameras)
        self.scheduling: Optional[ManyCameras] = None  # the loop's, while it runs
        self.web: Optional[WebApp] = None  # [web], while it runs
        self._in_loop: SimpleQueue[Callable[[], None]] = SimpleQueue()  # run between two frames

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
        web = self.web = start_web(self)  # [web] first: a token file others can read stops the start
        if self._models is None and cfg.model_update.enabled:
            self.updates = ModelUpdates(cfg, self.reload_requested.set)
        models = self._models or self._build_models(cfg)  # warmed up inside OnnxModel
        self._models = models
        sdnotify.status(f"models warm: {models.detector.model.info.model_id}")
        outbox = Outbox.from_config(cfg.queue)
        cameras = [pipe.open() for pipe in self.pipelines]
        parts = self._parts = Parts(outbox)
        # a fresh snapshot for the connect status, the will and the goodbye: the last tick's (every
        # health interval) counted the queue before the drain at stop, so a stopped device with an
        # empty queue showed BACKLOG 1 in `fleet status` (issue 33)
        sync = parts.sync = start_sync(cfg, outbox, lambda: self.current_status(fresh=True), self.count_error)
        if self.updates is not None:
            # a model-update step publishes the whole snapshot (the same shape), right away
            self.updates.start(
                (lambda: sync.publish_status(self.current_status(fresh=True))) if sync is not None else None
            )
        parts.sensor_models = start_sensor_models(cfg, outbox)
        sensor = parts.sensor = start_sensor(cfg, outbox, self.count_error, parts.sensor_models)
        metrics = start_metrics(self)
        try:
            for pipe in self.pipelines:
                pipe.start(models)
            self.ready_s = time.monotonic() - self.started_mono
            self._status_tick()
            sdnotify.ready()  # only now: models loaded and warm, queue open, camera started
            log.info(
                "ready in %.2fs: camera %s, detector %s, provider %s",
                self.ready_s,
                ", ".join(
                    f"{p.id}={c.name}" if self.named_cameras else c.name
                    for p, c in zip(self.pipelines, cameras)
                ),
                models.detector.model.info.model_id,
                models.provider,
            )
            self._loop()
        finally:
            sdnotify.stopping()
            if self.updates is not None:
                self.updates.stop()
            if metrics is not None:
                metrics.stop()
            if web is not None:
                web.stop()
            for pipe in self.pipelines:
                pipe.stop_camera()
            if sensor is not None:
                sensor.stop()
            for sensor_model in parts.sensor_models:  # the windows already waiting still go out
                sensor_model.stop()
            for pipe in self.pipelines:  # objects mode: every object still tracked ends; the counts so far
                pipe.output.stop()
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

    def count_error(self) -> None:
        self.errors += 1

    def put(self, topic: str, body: dict[str, Any], tally: Optional[Sequence[Op]] = None) -> bool:
        """Queue one message of a pipeline into the outbox (the output steps' sink)."""
        assert self._parts is not None
        return self._queue(self._parts.outbox, topic, body, tally)

    def tallies(self) -> Mapping[str, int]:
        """The counters the outbox stores with the rows that changed them (objects mode)."""
        assert self._parts is not None
        return self._parts.outbox.tallies()

    def store_tallies(self, ops: Sequence[Op]) -> None:
        assert self._parts is not None
        self._parts.outbox.store_tallies(ops)

    @property
    def sensor(self) -> Optional[SerialSensor]:
        return self._parts.sensor if self._parts is not None else None

    def call_in_loop(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the loop thread before its next frame (the page editor's live apply)."""
        self._in_loop.put(fn)

    def add_frame_observer(self, fn: FrameObserver) -> None:
        """``fn(camera, frame, detections)`` after inference for each processed frame of every
        camera (views, tests); one that raises is logged once and counted, and the loop goes on."""
        for pipe in self.pipelines:
            pipe.add_observer(fn)

    # ---- the loop -------------------------------------------------------------------------------
    def _loop(self) -> None:
        wd = sdnotify.watchdog_interval_s()
        pipes = self.pipelines
        one = pipes[0] if len(pipes) == 1 else None  # one camera: its blocking next(), as always
        many = ManyCameras(pipes, self._wake, self.cfg.detector.max_batch)
        self.scheduling = many
        last_ping = last_status = 0.0
        for pipe in pipes:
            pipe.drop_stale = one is None
            pipe.begin()
        try:
            while not self.stop_event.is_set():
                now = time.monotonic()
                if wd is not None and now - last_ping >= wd:
                    sdnotify.watchdog()
                    last_ping = now
                if now - last_status >= STATUS_EVERY_S:  # the one status timer
                    self._status_tick()
                    last_status = now
                while not self._in_loop.empty():
                    self._in_loop.get()()
                if self.reload_requested.is_set():
                    self.reload_requested.clear()
                    self._reload()
                left = None if self.max_frames is None else self.max_frames - self.frames
                if one is not None:
                    item = one.next()
                    if item is not None:
                        one.process(*item)
                    elif one.ended():
                        log.info("camera source ended")
                        break
                else:
                    ran = many.step(self._models, left)
                    if ran is False:
                        log.info("every camera source ended")
                        break
                if self.max_frames is not None and self.frames >= self.max_frames:
                    break
        finally:
            for pipe in pipes:
                pipe.end()

    def _queue(
        self, outbox: Outbox, topic: str, body: dict[str, Any], tally: Optional[Sequence[Op]] = None
    ) -> bool:
        """Queue step: one message into the durable outbox, counted; False when it was not queued."""
        try:
            outbox.put(topic, body, tally)
        except QueueFullError:  # reject_new: counted and logged once per streak by the outbox
            self.rejected += 1
            return False
        except EdgeAgentError as exc:  # a disk error
            self.errors += 1
            kind = "result" if "image" in body else f"{body.get('event', 'counts')} message"
            what = f"result of frame {body.get('frame')}" if "image" in body else kind
            line = self._not_queued.line(kind, f"{what} not queued: {exc}")  # per message: throttled
            if line is not None:
                log.error("%s", line)
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
        for pipe in self.pipelines:
            pipe.reloaded(new_models)
        self.cfg.detector = new_cfg.detector
        self.cfg.classifier = new_cfg.classifier
        self.reloads += 1
        log.info("reloaded: detector %s", new_models.detector.model.info.model_id)
        # the pipelines were built from these: said, not silently kept (a reload swaps the models)
        kept = [name for name in SCENE_SECTIONS if getattr(new_cfg, name) != getattr(self.cfg, name)]
        if kept:
            log.warning(
                "%s changed in %s: the running cameras keep the old settings until the next restart "
                "(a reload swaps the models only)",
                ", ".join(kept),
                self.config_path,
            )

    def _build_models(self, cfg: Config) -> ModelSet:
        """The installed model version (with rollback on a load failure), else the config's model;
        a reload plans on the running set's providers (no second board detection)."""
        if self.updates is not None:
            return self.updates.build_models(cfg)
        if self._models is not None:
            return self._models.reload(cfg)
        return ModelSet.from_config(cfg)

    # ---- health ---------------------------------------------------------------------------------
    def warnings(self) -> list[str]:
        """Conditions an operator should look at; carried in the status file."""
        return [w for pipe in self.pipelines for w in pipe.warnings()]

    @property
    def frames(self) -> int:
        """Frames inferred, every camera's."""
        return sum(pipe.frames for pipe in self.pipelines)

    def fps(self) -> float:
        """Frames inferred per second, every camera's."""
        return sum(pipe.fps() for pipe in self.pipelines)

    def latency_ms(self) -> dict[str, float]:
        """The first camera's latency medians (every camera's: the status ``cameras`` map's ages)."""
        return self.pipelines[0].latency_ms()

    @property
    def motion(self) -> Optional[MotionFilter]:
        """The first camera's motion gate (the single [camera]'s)."""
        return self.pipelines[0].motion

    @property
    def objects(self) -> Optional[ObjectsStep]:
        """Objects mode's tracking step of the first camera (the single [camera]'s), else None."""
        step = self.pipelines[0].output
        return step.objects if isinstance(step, ObjectsOutput) else None

    @property
    def models(self) -> Optional[ModelSet]:
        return self._models

    def current_status(self, fresh: bool = False) -> dict[str, Any]:
        """The latest snapshot (MqttSync's status_fn: connect message and last will); ``fresh``
        builds one now with the same builder (a Prometheus scrape between two ticks)."""
        parts = self._parts
        if (fresh or self.last_status is None) and parts is not None:
            state = self.last_status["state"] if self.last_status else "running"
            return self._snapshot(parts, state)
        return dict(self.last_status or {})

    def _snapshot(self, parts: Parts, state: str) -> dict[str, Any]:
        # [[cameras]]: each camera in the ``cameras`` map and no single ``camera``; [camera]: as before
        named = self.named_cameras
        cameras = {p.id: p.stats() for p in self.pipelines} if named else None
        camera = None if named else self.pipelines[0].camera
        return snapshot(self, camera, parts.outbox, parts.sync, parts.sensor, state, cameras)

    def _status_tick(self, final: bool = False) -> None:
        """The one status timer: one snapshot to the status file, systemd, Prometheus and MQTT."""
        parts = self._parts
        assert parts is not None
        self.last_status = self._snapshot(parts, "stopped" if final else "running")
        self._status_out.send(self.last_status, parts.sync, final)
