"""Objects mode's step of the agent loop: detections -> tracker -> object events -> outbox.

One instance per camera. ``on_frame`` is the only per-frame call; ``stop`` ends every object and
writes the final counts. The counter checkpoint (adapters.count_store) is written when counts
change (at most every ``CHECKPOINT_S``), before each counts message is queued, and at stop.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from edge_agent.adapters.outbox import count_store
from edge_agent.core.camera.source_spec import Frame
from edge_agent.core.config.scene import objects_classifier_warning
from edge_agent.core.config.schema import Config
from edge_agent.core.messages.builders import counts_message, object_message, object_topics
from edge_agent.core.objects.lifecycle import ObjectEvents
from edge_agent.core.objects.tracker import Tracker, TrackerParams
from edge_agent.core.vision.results import Detection
from edge_agent.core.vision.snapshot import encode_snapshot
from edge_agent.errors import EdgeAgentError

log = logging.getLogger(__name__)

CHECKPOINT_S = 1.0
Put = Callable[[str, Dict[str, Any]], bool]  # queue one message; False when it was not queued


def tracker_params(cfg: Config) -> TrackerParams:
    t = cfg.tracker
    return TrackerParams(
        high=t.high,
        low=t.low,
        new_track=t.new_track,
        match_iou=t.match_iou,
        lost_frames=t.lost_frames,
        per_class=t.per_class,
        fuse_score=t.fuse_score,
    )


class ObjectsStep:
    """Tracker + lifecycle + message building for one camera."""

    def __init__(self, cfg: Config, checkpoint: Optional[Path] = None) -> None:
        self.cfg = cfg
        self.tracker = Tracker(tracker_params(cfg))
        self.events = ObjectEvents(
            cfg.tracker, cfg.zones, cfg.lines, cfg.output.counts_interval_s, time.time()
        )
        self.topic, self.counts_topic = object_topics(cfg.mqtt.topic_prefix, cfg.device.id)
        self.checkpoint = (
            checkpoint if checkpoint is not None else Path(cfg.device.state_dir) / "object-counts.json"
        )
        unused = objects_classifier_warning(cfg.output.mode, cfg.classifier is not None)
        if unused is not None:
            log.warning("%s", unused)
        self._labels: Dict[int, str] = {}
        self._dirty = False
        self._saved_at = 0.0
        self.sent = 0
        try:
            state = count_store.load(self.checkpoint)
        except EdgeAgentError as exc:
            log.error("counts start from zero: %s", exc)
            state = None
        if state is not None:
            problem = self.events.restore_counts(state)
            if problem is not None:
                log.error("counts start from zero: %s: %s", self.checkpoint, problem)

    def on_frame(self, frame: Frame, dets: Sequence[Detection], put: Put) -> List[Dict[str, Any]]:
        """Track this frame's detections, queue its events (and the counts when due)."""
        for d in dets:
            self._labels[d.class_id] = d.label
        tracks = self.tracker.update(
            [d.box for d in dets], [d.confidence for d in dets], [d.class_id for d in dets]
        )
        h, w = frame.image.shape[:2]
        crop = self._cropper(frame) if self.cfg.output.snapshot else None
        size = frame.full_size or (w, h)
        events = self.events.update(
            frame.ts_mono, tracks, self.tracker.removed, (int(size[0]), int(size[1])), self._label, crop
        )
        self._queue(events, frame, put)
        self._counts(put)
        return events

    def stop(self, put: Put, frame: Optional[Frame] = None) -> None:
        """End every tracked object, send the counts so far, checkpoint."""
        now_mono = time.monotonic()
        events = self.events.end_all(self.tracker.end_all(), now_mono)
        self._queue(events, frame, put)
        if self.cfg.zones or self.cfg.lines:
            self._send_counts(self.events.take_counts(time.time()), put)
        self._save()

    # ---- internals ----------------------------------------------------------------------------
    def _label(self, class_id: int) -> str:
        return self._labels.get(class_id, str(class_id))

    @staticmethod
    def _cropper(frame: Frame) -> Callable[[Tuple[float, float, float, float]], Optional[np.ndarray]]:
        img = frame.image
        h, w = img.shape[:2]
        sx, sy = frame.full_scale()

        def crop(box: Tuple[float, float, float, float]) -> Optional[np.ndarray]:
            x1, y1 = max(0, int(box[0] / sx)), max(0, int(box[1] / sy))
            x2, y2 = min(w, int(box[2] / sx) + 1), min(h, int(box[3] / sy) + 1)
            return img[y1:y2, x1:x2].copy() if x2 > x1 and y2 > y1 else None

        return crop

    def _queue(self, events: List[Dict[str, Any]], frame: Optional[Frame], put: Put) -> None:
        if not events:
            return
        # dwell and durations are measured on the monotonic clock; messages carry wall time
        offset = (frame.ts_wall - frame.ts_mono) if frame is not None else time.time() - time.monotonic()
        for ev in events:
            captured_at = round(ev.pop("ts") + offset, 3)
            snap = None
            if ev["event"] == "ended":
                ev["first_seen"] = round(ev["first_seen"] + offset, 3)
                ev["last_seen"] = round(ev["last_seen"] + offset, 3)
                best = ev.pop("_best_image", None)
                if best is not None:
                    snap = encode_snapshot(best, self.cfg.output.snapshot_max_bytes)
            if ev["event"] in ("line_crossed", "zone_entered"):
                self._dirty = True
            body = object_message(
                ev,
                device_id=self.cfg.device.id,
                ts=time.time(),
                captured_at=captured_at,
                frame=frame.seq if frame is not None else None,
                snapshot_jpeg_b64=snap,
            )
            if put(self.topic, body):
                self.sent += 1

    def _counts(self, put: Put) -> None:
        now = time.time()
        due = self.events.counts_due(now)
        if due is not None:
            self._send_counts(due, put)
        elif self._dirty and time.monotonic() - self._saved_at >= CHECKPOINT_S:
            self._save()

    def _send_counts(self, counts: Dict[str, Any], put: Put) -> None:
        # checkpoint first: a crash between the two loses this message (a seq gap), never re-sends
        # the interval's counts a second time after the restart
        self._save()
        body = counts_message(
            counts, device_id=self.cfg.device.id, ts=time.time(), interval_s=self.cfg.output.counts_interval_s
        )
        if put(self.counts_topic, body):
            self.sent += 1

    def _save(self) -> None:
        try:
            count_store.save(self.checkpoint, self.events.count_state())
        except EdgeAgentError as exc:
            log.error("%s", exc)
        self._dirty = False
        self._saved_at = time.monotonic()
