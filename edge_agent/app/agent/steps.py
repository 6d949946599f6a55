"""The per-frame steps of the agent loop that are not inference itself (``CameraPipeline.process``
lists them in order: infer -> account -> model updates -> output step -> observers; the output
steps in ``outputs.py`` decide -> result -> queue, or track).

Inference, with the rescale of reduced-scale decodes, is :func:`edge_agent.inference.pipeline.infer_frame`;
the message body is :func:`edge_agent.core.messages.builders.result_message`; this module only gathers
what the loop knows about a frame into those calls, so each step reads in one place.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Optional

from edge_agent.adapters.host.probes import clock_synchronised
from edge_agent.app.agent.modelset import ModelSet
from edge_agent.app.updates.agent_side import ModelUpdates
from edge_agent.core.camera.source_spec import Frame
from edge_agent.core.config.schema import Config
from edge_agent.core.messages.builders import ABSENT, result_message
from edge_agent.core.vision.results import Detection, ImageResult
from edge_agent.core.vision.snapshot import encode_snapshot

if TYPE_CHECKING:
    from edge_agent.adapters.sensor.serial_reader import SerialSensor


def feed_model_updates(updates: ModelUpdates, frame: Frame, detections: int) -> None:
    """Model-update step: the frame ring keeps the frame when a slot is due (what the update gate
    compares models on; off unless ``ring_frames`` > 0), and the frame's detection count goes to
    the running model's trial (a collapse rolls it back, a quiet ``trial_s`` confirms it).
    Both are cheap on the loop thread; the slow parts run on the updates' worker."""
    updates.ring.offer(frame.image)
    updates.on_frame(detections)


def result_body(
    cfg: Config,
    frame: Frame,
    dets: list[Detection],
    timings: dict[str, float],
    models: ModelSet,
    event: Optional[str],
    sensor: Optional[SerialSensor],
    camera: Optional[str] = None,
) -> dict[str, Any]:
    """Result step: the ``detections`` message of one frame the output policy chose to emit."""
    h, w = frame.image.shape[:2]
    if frame.full_size is not None:  # decoded small: the size the camera sent (the boxes' frame)
        w, h = frame.full_size
    image = frame.name or f"{frame.source}#{frame.seq}"
    snap: Optional[str] = None
    if cfg.output.snapshot:
        snap = encode_snapshot(frame.image, cfg.output.snapshot_max_bytes)
    attach = cfg.sensor is not None and cfg.sensor.attach_to_results
    return result_message(
        ImageResult(image, w, h, dets, timings).to_json(),
        device_id=cfg.device.id,
        ts=time.time(),
        camera=camera,
        frame=frame.seq,
        ts_mono=round(frame.ts_mono, 6),
        captured_at=frame.ts_wall,
        clock_synced=clock_synchronised(),
        event=event,
        models=models.describe(),
        sensor=sensor.latest() if attach and sensor is not None else ABSENT,
        snapshot_jpeg_b64=snap,
    )
