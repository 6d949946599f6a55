"""Objects mode's step of the agent loop: detections -> tracker -> object events -> outbox.

One instance per camera. ``on_frame`` is the only per-frame call; ``stop`` ends every object and
queues the final counts. The counters are stored by the outbox with the events that changed them
(core.objects.count_keys: each put carries its counter operations); ``restore`` continues them
at start, importing the JSON checkpoint of older versions once (adapters.count_store).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Protocol, Sequence, Tuple

import numpy as np

from edge_agent.adapters.outbox import count_store
from edge_agent.core.camera.source_spec import Frame
from edge_agent.core.config.scene import objects_classifier_warning
from edge_agent.core.config.schema import Config
from edge_agent.core.messages.builders import counts_message, object_message, object_topics
from edge_agent.core.objects import count_keys
from edge_agent.core.objects.count_keys import Op
from edge_agent.core.objects.lifecycle import ObjectEvents
from edge_agent.core.objects.tracker import Tracker, TrackerParams
from edge_agent.core.vision.results import Detection
from edge_agent.core.vision.snapshot import encode_snapshot
from edge_agent.errors import EdgeAgentError

log = logging.getLogger(__name__)


class Put(Protocol):
    def __call__(self, topic: str, body: Dict[str, Any], tally: Optional[Sequence[Op]] = None) -> bool:
        """Queue one message with its counter operations; False when it was not queued."""
        ...


class CountStore(Protocol):
    """Where the counters are stored (the agent's outbox)."""

    def tallies(self) -> Mapping[str, int]: ...

    def store_tallies(self, ops: Sequence[Op]) -> None:
        """Store ``ops`` now (raises EdgeAgentError when it cannot)."""
        ...


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

    def __init__(self, cfg: Config, checkpoint: Optional[Path] = None, camera: Optional[str] = None) -> None:
        self.cfg = cfg
        self.camera = camera  # a [[cameras]] id: in messages, topics and the counters' names
        self.tracker = Tracker(tracker_params(cfg))
        self.events = ObjectEvents(
            cfg.tracker, cfg.zones, cfg.lines, cfg.output.counts_interval_s, time.time()
        )
        self.topic, self.counts_topic = object_topics(cfg.mqtt.topic_prefix, cfg.device.id, camera)
        self.checkpoint = (
            checkpoint if checkpoint is not None else Path(cfg.device.state_dir) / "object-counts.json"
        )
        unused = objects_classifier_warning(cfg.output.mode, cfg.classifier is not None)
        if unused is not None:
            log.warning("%s", unused)
        self._labels: Dict[int, str] = {}
        self.sent = 0
        # the last file frame's time and its wall-clock offset (None: live, the monotonic clock)
        self._media: Optional[Tuple[float, float]] = None

    def restore(self, store: CountStore) -> None:
        """Continue the stored counters; without any, import the old JSON checkpoint once (then
        renamed ``*.imported``: the outbox holds the counters from there on)."""
        stored = count_keys.state_from(store.tallies(), self.events.interval_start, self.camera)
        where = "the queue's counters"
        if stored is None and self.camera is None:  # [[cameras]] came after the JSON checkpoint
            try:
                stored = count_store.load(self.checkpoint)
            except EdgeAgentError as exc:
                log.error("counts start from zero: %s", exc)
            where = str(self.checkpoint)
        if stored is None:
            return
        problem = self.events.restore_counts(stored)
        if problem is not None:
            log.error("counts start from zero: %s: %s", where, problem)
            return
        if where == str(self.checkpoint):
            try:
                store.store_tallies(count_keys.seed_ops(self.events, self.camera))
                count_store.set_aside(self.checkpoint)
            except EdgeAgentError as exc:
                log.error(
                    "%s: counts continue from it in this run, the import is incomplete: %s",
                    self.checkpoint,
                    exc,
                )
                return
            log.info("counts imported into the queue from %s", self.checkpoint)

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
        ts = frame.ts_mono
        if frame.ts_media is not None:  # a file: its own frame times, as infer --track counts
            ts = frame.ts_media
            self._media = (ts, frame.ts_wall - ts)
        events = self.events.update(
            ts, tracks, self.tracker.removed, (int(size[0]), int(size[1])), self._label, crop
        )
        self._queue(events, frame, put)
        self._counts(put)
        return events

    def stop(self, put: Put, frame: Optional[Frame] = None) -> None:
        """End every tracked object, send the counts so far."""
        # a file's objects end at its last frame's time (infer --track's end), a camera's now
        now = self._media[0] if self._media is not None else time.monotonic()
        events = self.events.end_all(self.tracker.end_all(), now)
        self._queue(events, frame, put)
        if self.cfg.zones or self.cfg.lines:
            self._send_counts(time.time(), put)

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
        # dwell and durations are measured on the monotonic clock (a file: its frame times);
        # messages carry wall time
        if frame is not None:
            offset = frame.ts_wall - (frame.ts_media if frame.ts_media is not None else frame.ts_mono)
        elif self._media is not None:
            offset = self._media[1]
        else:
            offset = time.time() - time.monotonic()
        for ev in events:
            captured_at = round(ev.pop("ts") + offset, 3)
            snap = None
            if ev["event"] == "ended":
                ev["first_seen"] = round(ev["first_seen"] + offset, 3)
                ev["last_seen"] = round(ev["last_seen"] + offset, 3)
                best = ev.pop("_best_image", None)
                if best is not None:
                    snap = encode_snapshot(best, self.cfg.output.snapshot_max_bytes)
            body = object_message(
                ev,
                device_id=self.cfg.device.id,
                ts=time.time(),
                captured_at=captured_at,
                frame=frame.seq if frame is not None else None,
                snapshot_jpeg_b64=snap,
                camera=self.camera,
            )
            if put(self.topic, body, count_keys.event_ops(ev, self.camera)):
                self.sent += 1
            else:  # not stored: neither is its count (the outbox took nothing of it)
                count_keys.uncount(self.events, ev)

    def _counts(self, put: Put) -> None:
        now = time.time()
        if self.events.counts_is_due(now):
            self._send_counts(now, put)

    def _send_counts(self, now: float, put: Put) -> None:
        # the interval restarts in the transaction that stores its message: a crash before the
        # commit loses neither (the next boot's first message carries the interval's counts)
        interval, start = self.events.interval, self.events.interval_start
        counts = self.events.take_counts(now)
        body = counts_message(
            counts,
            device_id=self.cfg.device.id,
            ts=time.time(),
            interval_s=self.cfg.output.counts_interval_s,
            camera=self.camera,
        )
        if put(self.counts_topic, body, count_keys.reset_ops(self.events, self.camera)):
            self.sent += 1
        else:  # refused: the interval goes on, its counts go with the next message
            self.events.interval, self.events.interval_start = interval, start
