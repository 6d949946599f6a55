"""The live view: each camera's latest annotated frame, built only while someone watches.

A frame observer per camera (camera_pipeline's observers, on the loop thread) keeps a reference to
the latest frame, its detections and (objects mode) its tracks and counts -- but only within
``WATCH_S`` of the last request for that camera's picture. Nobody watching, the observer is one
clock read and a comparison per frame, and holds nothing. The drawing and the JPEG encoding happen
on the request's thread, at most ``[web] live_fps`` times a second per camera (a faster poll gets
the cached JPEG), so a viewer costs the loop nothing but the reference it keeps.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple

import cv2

from edge_agent.app.agent.output_steps import ObjectsOutput
from edge_agent.app.workbench.annotate import draw_detections
from edge_agent.app.workbench.annotate_tracks import Image, draw_tracks
from edge_agent.core.camera.source_spec import Frame
from edge_agent.core.config.schema import LineConfig, ZoneConfig
from edge_agent.core.vision.results import Detection

if TYPE_CHECKING:
    from edge_agent.adapters.camera.capture import Camera
    from edge_agent.app.agent.camera_pipeline import CameraPipeline, FrameObserver

WATCH_S = 5.0  # a camera is watched this long after its last picture request
FIRST_FRAME_WAIT_S = 2.0  # a first request waits this long for the observer to keep a frame
JPEG_QUALITY = 80
TrackRow = Tuple[int, str, Sequence[float], float]


@dataclass
class Latest:
    """What the observer kept of one frame (references; copies only of the small parts)."""

    frame: Frame
    dets: List[Detection]
    tracks: Optional[List[TrackRow]] = None
    zones: Sequence[ZoneConfig] = ()
    lines: Sequence[LineConfig] = ()
    totals: Optional[Dict[str, Any]] = None
    occupancy: Optional[Dict[str, int]] = None


def _scaled(box: Sequence[float], sx: float, sy: float) -> Tuple[float, float, float, float]:
    return box[0] / sx, box[1] / sy, box[2] / sx, box[3] / sy


def annotate(latest: Latest) -> Image:
    """The frame as decoded, with the boxes (full-frame pixels) scaled onto it."""
    frame = latest.frame
    sx, sy = frame.full_scale()
    if latest.tracks is None or latest.totals is None:
        dets = [dataclasses.replace(d, box=_scaled(d.box, sx, sy)) for d in latest.dets]
        return draw_detections(frame.image, dets)
    rows = [(tid, label, _scaled(box, sx, sy), conf) for tid, label, box, conf in latest.tracks]
    return draw_tracks(frame.image, rows, latest.zones, latest.lines, latest.totals, latest.occupancy or {})


class LiveView:
    """Every camera's latest frame for the page; ``observer(pipe)`` goes on that pipe."""

    def __init__(self, live_fps: float) -> None:
        self.min_interval_s = 1.0 / live_fps
        self.watched_until: Dict[str, float] = {}
        self.latest: Dict[str, Latest] = {}
        self.kept = 0  # frames the observers kept (nobody watching: stays put)
        self.encoded = 0
        self._cache: Dict[str, Tuple[float, int, bytes]] = {}
        self._lock = threading.Lock()
        self._got = threading.Condition()

    def observer(self, pipe: CameraPipeline) -> FrameObserver:
        cam_id = pipe.id

        def on_frame(_camera: Camera, frame: Frame, dets: List[Detection]) -> None:
            if time.monotonic() > self.watched_until.get(cam_id, 0.0):
                if cam_id in self.latest:
                    self.latest.pop(cam_id, None)  # nobody watches: the frame is let go
                return
            kept = Latest(frame, dets)
            step = pipe.output
            if isinstance(step, ObjectsOutput):
                objects = step.objects
                labels = {d.class_id: d.label for d in dets}
                kept.tracks = [
                    (t.track_id, labels.get(t.class_id, str(t.class_id)), t.box, t.score)
                    for t in objects.tracker.tracks
                    if t.confirmed and not t.lost
                ]
                events = objects.events
                kept.zones, kept.lines = list(events.zones), list(events.lines)
                kept.totals = counts_copy(events.totals)
                kept.occupancy = events.occupancy()
            self.latest[cam_id] = kept
            self.kept += 1
            with self._got:
                self._got.notify_all()

        return on_frame

    def jpeg(self, cam_id: str) -> Optional[Tuple[int, bytes]]:
        """(frame seq, JPEG) of ``cam_id``'s latest frame, annotated; None: no frame yet."""
        now = time.monotonic()
        self.watched_until[cam_id] = now + WATCH_S
        with self._lock:  # one encoder per camera at a time; the rest take the cached picture
            cached = self._cache.get(cam_id)
            if cached is not None and now - cached[0] < self.min_interval_s:
                return cached[1], cached[2]
            latest = self.latest.get(cam_id)
            if latest is None:
                with self._got:
                    self._got.wait_for(lambda: cam_id in self.latest, FIRST_FRAME_WAIT_S)
                latest = self.latest.get(cam_id)
            if latest is None:
                return None
            if cached is not None and cached[1] == latest.frame.seq:
                return cached[1], cached[2]
            ok, buf = cv2.imencode(".jpg", annotate(latest), [cv2.IMWRITE_JPEG_QUALITY, JPEG_QUALITY])
            if not ok:
                return None
            self.encoded += 1
            self._cache[cam_id] = (time.monotonic(), latest.frame.seq, buf.tobytes())
            return latest.frame.seq, self._cache[cam_id][2]


def counts_copy(totals: Dict[str, Any]) -> Dict[str, Any]:
    """A copy of ObjectEvents.totals (two levels of small dicts)."""
    return {kind: {name: dict(c) for name, c in part.items()} for kind, part in totals.items()}
