"""Output steps: what a camera pipeline makes of one frame's detections, one class per
``[output] mode``.

The pipeline picks its step once, when it is built (``OUTPUT_STEPS[cfg.output.mode]``), and calls
``on_frame`` for every inferred frame and ``stop`` when the agent stops; no mode is tested per
frame. A new mode is one class here and one entry in :data:`OUTPUT_STEPS` (its name is also in
``core/config/outputs.py``, ``OutputConfig.mode``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Optional, Protocol

from edge_agent.app.agent.modelset import ModelSet
from edge_agent.app.agent.objects_step import ObjectsStep
from edge_agent.app.agent.steps import result_body
from edge_agent.core.camera.source_spec import Frame
from edge_agent.core.config.schema import Config
from edge_agent.core.messages.builders import camera_base
from edge_agent.core.messages.output_policy import OutputPolicy
from edge_agent.core.objects.count_keys import Op
from edge_agent.core.vision.results import Detection

if TYPE_CHECKING:
    from edge_agent.adapters.sensor.serial_reader import SerialSensor


class Sink(Protocol):
    """Where a step's messages go (the agent's outbox, shared by every camera) and the sensor
    whose latest reading a result may carry."""

    def put(self, topic: str, body: dict[str, Any], tally: Optional[Sequence[Op]] = None) -> bool:
        """Queue one message (with the counter operations it carries, committed with it); False
        when it was not queued (counted by the agent)."""
        ...

    def tallies(self) -> Mapping[str, int]:
        """The counters the queue stores (objects mode)."""
        ...

    def store_tallies(self, ops: Sequence[Op]) -> None: ...

    @property
    def sensor(self) -> Optional[SerialSensor]: ...


class OutputStep:
    """One camera's output: its state lives in the instance (a policy, a tracker)."""

    name: ClassVar[str]

    def __init__(self, cfg: Config, sink: Sink, camera: Optional[str] = None) -> None:
        self.cfg = cfg
        self.sink = sink
        self.camera = camera  # a [[cameras]] id: in every message and topic; None: the single [camera]

    def on_frame(
        self, frame: Frame, dets: list[Detection], timings: dict[str, float], models: ModelSet
    ) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        """The agent stops: send what is still owed (nothing by default)."""


class _ResultStep(OutputStep):
    """A ``detections`` message per frame the output policy emits (``OutputPolicy.decide``)."""

    policy_mode: ClassVar[Literal["event", "every_frame"]]

    def __init__(self, cfg: Config, sink: Sink, camera: Optional[str] = None) -> None:
        super().__init__(cfg, sink, camera)
        self.policy = OutputPolicy(self.policy_mode, cfg.output.heartbeat_s)
        self.topic = f"{camera_base(cfg.mqtt.topic_prefix, cfg.device.id, camera)}/detections"

    def on_frame(
        self, frame: Frame, dets: list[Detection], timings: dict[str, float], models: ModelSet
    ) -> None:
        decision = self.policy.decide(frame.ts_mono, [(d.label, d.box) for d in dets])
        if decision.emit:
            sensor = self.sink.sensor
            body = result_body(self.cfg, frame, dets, timings, models, decision.reason, sensor, self.camera)
            self.sink.put(self.topic, body)


class EveryFrameStep(_ResultStep):
    """``every_frame``: every inferred frame is a result."""

    name = "every_frame"
    policy_mode = "every_frame"


class EventStep(_ResultStep):
    """``event``: a result on the first frame, on a change of the detections, and a heartbeat."""

    name = "event"
    policy_mode = "event"


class ObjectsOutput(OutputStep):
    """``objects``: tracked objects, zone/line events and counts (docs/objects.md) instead of
    per-frame results; the tracking time goes into the frame's status latency as ``track``."""

    name = "objects"

    def __init__(self, cfg: Config, sink: Sink, camera: Optional[str] = None) -> None:
        super().__init__(cfg, sink, camera)
        self.objects = ObjectsStep(cfg, camera=camera)
        self._restored = False

    def _restore(self) -> None:
        # here, not in __init__: the pipeline is built before the agent opens its outbox
        if not self._restored:
            self._restored = True
            self.objects.restore(self.sink)

    def on_frame(
        self, frame: Frame, dets: list[Detection], timings: dict[str, float], models: ModelSet
    ) -> None:
        t1 = time.monotonic()
        self._restore()
        self.objects.on_frame(frame, dets, self.sink.put)
        timings["track"] = (time.monotonic() - t1) * 1e3  # in the status latency (same dict)

    def stop(self) -> None:
        """Every object still tracked ends; the counts so far."""
        self._restore()
        self.objects.stop(self.sink.put)


# [output] mode -> its step (core/config/outputs.py: OutputConfig.mode names the same modes)
OUTPUT_STEPS: dict[str, type[OutputStep]] = {
    step.name: step for step in (EveryFrameStep, EventStep, ObjectsOutput)
}


def output_step(cfg: Config, sink: Sink, camera: Optional[str] = None) -> OutputStep:
    """The step of ``[output] mode``, built once per camera (``camera``: its [[cameras]] id)."""
    return OUTPUT_STEPS[cfg.output.mode](cfg, sink, camera)
