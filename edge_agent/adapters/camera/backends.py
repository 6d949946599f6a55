"""Frame sources: the swappable backend under :class:`edge_agent.adapters.camera.capture.Camera`.

A *frame source factory* is a zero-argument callable that opens the source (raising CameraError
or OSError when it cannot) and returns an object with ``read()``/``close()``. ``read()`` returns a
BGR image, or None for "no frame" (the end for a finite source, a failed read for a live one),
raises :class:`ImageError` for one bad item that should be skipped, and CameraError/OSError when
the source is gone (the camera then reconnects). Here: :class:`CvCaptureSource` (cv2.VideoCapture)
and :class:`FolderSourceFactory`; the HTTP MJPEG reader is in ``mjpeg_http``; the tests' fake live
camera (unplug, fail, stall, freeze) is ``tests/support/camera.py``.
"""

from __future__ import annotations

import bisect
import logging
import os
import time
from pathlib import Path
from typing import Callable, Optional, Protocol, Tuple

import cv2
import numpy as np

from edge_agent.adapters.camera.images import check_pixels
from edge_agent.adapters.camera.mjpeg_http import MjpegHttpSource, NotMultipart, decode_jpeg, read_credentials
from edge_agent.adapters.camera.rtsp import open_rtsp
from edge_agent.core.camera.decode_size import stream_size
from edge_agent.core.camera.source_spec import (
    FOLDER_FPS,
    IMAGE_SUFFIXES,
    VIDEO_FPS,
    SourceKind,
    classify_source,
    device_index,
    fourcc_text,
    grant_mismatches,
    redact_source,
    video_rate,
)
from edge_agent.core.config.schema import CameraConfig
from edge_agent.core.vision.image_header import DEFAULT_MAX_PIXELS, pixel_problem
from edge_agent.errors import CameraError, ImageError

log = logging.getLogger(__name__)


class FrameSource(Protocol):
    """What the Camera needs; a source may also have ``current_name`` (file name of the last image)."""

    name: str
    finite: bool

    def read(self) -> Optional[np.ndarray]: ...

    def close(self) -> None: ...


FrameSourceFactory = Callable[[], FrameSource]
# the model input (h, w) a source may decode JPEG frames down to; None = full size
DecodeTarget = Callable[[], Optional[Tuple[int, int]]]


def gstreamer_available() -> bool:
    """Whether this cv2 build can run GStreamer pipelines (the pip wheels cannot)."""
    for line in cv2.getBuildInformation().splitlines():
        if line.strip().startswith("GStreamer:"):
            return line.split(":", 1)[1].strip().upper().startswith("YES")
    return False


class VideoPosition:
    """Frames a video file has handed out, kept across the sources one camera opens."""

    def __init__(self) -> None:
        self.shown = 0


class CvCaptureSource:
    """cv2.VideoCapture configured for the source kind (V4L2 MJPG, RTSP over camera.rtsp_transport,
    GStreamer, file).

    ``model_input``: the model input (h, w); a frame at least twice its letterbox on both axes is resized
    to the letterbox size right after ``read()`` (:func:`edge_agent.core.camera.decode_size.stream_size`:
    FFmpeg decodes H.264 at full size whatever OpenCV is asked), ``full_size`` keeping the camera's.
    """

    def __init__(
        self,
        cfg: CameraConfig,
        kind: SourceKind,
        timeout_s: float,
        model_input: Optional[DecodeTarget] = None,
        resume: Optional[VideoPosition] = None,
    ) -> None:
        self.name = redact_source(cfg.source)
        self._target = model_input
        self.full_size: Optional[tuple[int, int]] = None
        self.kind = kind
        self.finite = kind.finite
        self.loop = cfg.loop
        self.media_ts: Optional[float] = None  # a video file's time of the last frame (Frame.ts_media)
        self._pos = resume or VideoPosition()
        self._rate = VIDEO_FPS
        src = cfg.source
        ms = int(timeout_s * 1000)
        self.granted: Optional[dict[str, object]] = None
        if kind in (SourceKind.DEVICE_INDEX, SourceKind.V4L2_DEVICE):
            target = device_index(src) if kind is SourceKind.DEVICE_INDEX else str(src)
            cap = cv2.VideoCapture(target, cv2.CAP_V4L2)
            if cap.isOpened():
                # MJPG first: most USB cameras only reach their full fps at HD sizes compressed
                cap.set(cv2.CAP_PROP_FOURCC, cv2.VideoWriter.fourcc(*"MJPG"))
                if cfg.width:
                    cap.set(cv2.CAP_PROP_FRAME_WIDTH, cfg.width)
                if cfg.height:
                    cap.set(cv2.CAP_PROP_FRAME_HEIGHT, cfg.height)
                if cfg.fps:
                    cap.set(cv2.CAP_PROP_FPS, cfg.fps)
                cap.set(cv2.CAP_PROP_BUFFERSIZE, 1)
                self._report_grant(cap, cfg)
        elif kind is SourceKind.NETWORK:
            # one decoder thread: FFmpeg's frame threading holds back (threads - 1) decoded frames;
            # measured on the test RTSP server at 10 fps H.264: 202 ms frame age by default, 101 ms with 1
            params = [
                cv2.CAP_PROP_OPEN_TIMEOUT_MSEC,
                ms,
                cv2.CAP_PROP_READ_TIMEOUT_MSEC,
                ms,
                cv2.CAP_PROP_N_THREADS,
                1,
            ]
            if str(src).lower().startswith(("rtsp://", "rtsps://")):
                cap = open_rtsp(str(src), self.name, cfg.rtsp_transport, params, timeout_s)
            else:
                cap = cv2.VideoCapture(str(src), cv2.CAP_FFMPEG, params)
        elif kind is SourceKind.GSTREAMER:
            if not gstreamer_available():
                raise CameraError(
                    f"camera.source is a GStreamer pipeline but this OpenCV was built without GStreamer "
                    f"(cv2.getBuildInformation(): GStreamer: NO; the pip opencv wheels are): {self.name!r}"
                )
            cap = cv2.VideoCapture(str(src), cv2.CAP_GSTREAMER)
        else:
            cap = cv2.VideoCapture(str(src))
        if not cap.isOpened():
            cap.release()
            raise CameraError(f"cannot open camera source {self.name!r} ({kind.value})")
        self.max_pixels = cfg.max_pixels
        size = (int(cap.get(cv2.CAP_PROP_FRAME_WIDTH)), int(cap.get(cv2.CAP_PROP_FRAME_HEIGHT)))
        problem = pixel_problem(size, cfg.max_pixels, "camera.max_pixels")
        if problem is not None:  # what the stream/driver announces, before a frame is handed out
            cap.release()
            raise CameraError(f"camera {self.name!r}: frames of {problem}; not opened")
        self._cap = cap
        if self.finite:  # frame n at n / rate, counted on across a loop and a reopen (the time goes on)
            self._rate = video_rate(float(cap.get(cv2.CAP_PROP_FPS)))
            self._seek(cap)
        if kind in (SourceKind.DEVICE_INDEX, SourceKind.V4L2_DEVICE) and not (cfg.width or cfg.height):
            self._hint_capture_size(size)

    def _seek(self, cap: cv2.VideoCapture) -> None:
        """A reopened file (the camera stopped and started) goes on after its last frame, as a
        folder does: replaying it from frame 0 would count every object on it a second time."""
        if not self._pos.shown:
            return
        count = int(cap.get(cv2.CAP_PROP_FRAME_COUNT))
        at = self._pos.shown % count if self.loop and count > 0 else self._pos.shown
        cap.set(cv2.CAP_PROP_POS_FRAMES, at)

    def _hint_capture_size(self, size: tuple[int, int]) -> None:
        """Say (once per open) that the driver's default size is far above what the model sees; the
        capture size is not changed behind the operator's back: on some drivers a smaller mode is a
        crop of the sensor (a narrower field of view), not a scaled image (docs/cameras.md)."""
        target = self._target() if self._target else None
        small = stream_size(size, target)
        if small is not None:
            log.info(
                "camera %s: the driver delivers %dx%d, the model sees %dx%d: frames are resized after "
                "capture; [camera] width = %d, height = %d would let the driver capture smaller, if that "
                "mode keeps the field of view (docs/cameras.md)",
                self.name,
                *size,
                *small,
                *small,
            )

    def _report_grant(self, cap: cv2.VideoCapture, cfg: CameraConfig) -> None:
        """Read back what the driver granted and say so when it is not what was asked."""
        self.granted = {
            "fourcc": fourcc_text(cap.get(cv2.CAP_PROP_FOURCC)),
            "width": int(cap.get(cv2.CAP_PROP_FRAME_WIDTH)),
            "height": int(cap.get(cv2.CAP_PROP_FRAME_HEIGHT)),
            "fps": round(float(cap.get(cv2.CAP_PROP_FPS)), 2),
        }
        asked = {"fourcc": "MJPG", "width": cfg.width, "height": cfg.height, "fps": cfg.fps}
        missing = grant_mismatches(asked, self.granted)
        g = self.granted
        line = f"camera {self.name}: driver granted {g['fourcc']} {g['width']}x{g['height']} @ {g['fps']} fps"
        if missing:
            log.warning("%s (asked: %s)", line, ", ".join(missing))
        else:
            log.info("%s", line)

    def read(self) -> Optional[np.ndarray]:
        ok, img = self._cap.read()
        if not ok and self.finite and self.loop and self._cap.set(cv2.CAP_PROP_POS_FRAMES, 0):
            ok, img = self._cap.read()
        if not ok:
            return None
        if self.finite:
            self.media_ts = self._pos.shown / self._rate
            self._pos.shown += 1
        frame = np.asarray(img)
        # a stream may change size mid-way (H.264 SPS change): such a frame is skipped and counted
        # before it reaches letterbox/motion/snapshot, which would each copy it again
        size = (frame.shape[1], frame.shape[0])
        problem = pixel_problem(size, self.max_pixels, "camera.max_pixels")
        if problem is not None:
            raise ImageError(f"frame of {problem}; skipped")
        small = stream_size(size, self._target() if self._target else None)
        if small is None:
            self.full_size = None
            return frame
        # INTER_LINEAR to the letterbox size: the very resize the letterbox would do, done before the
        # freeze checksum, the motion gate and the hand-off see 6 MB
        self.full_size = size
        return np.asarray(cv2.resize(frame, small, interpolation=cv2.INTER_LINEAR))

    def close(self) -> None:
        self._cap.release()


class FolderSourceFactory:
    """Opens a replay of the images in a folder, in name order (use zero-padded names).

    Remembers the last file handed out, so a reopen after the folder vanished resumes after it
    instead of replaying from the start.
    """

    def __init__(
        self,
        folder: str,
        loop: bool = False,
        fps: Optional[float] = None,
        target: Optional[DecodeTarget] = None,
        max_pixels: int = DEFAULT_MAX_PIXELS,
    ) -> None:
        self.folder = Path(folder)
        self.loop = loop
        # replay at the camera's rate (camera.fps) instead of as fast as the consumer takes frames
        self.period = 1.0 / fps if fps else 0.0
        self.target = target
        self.max_pixels = max_pixels
        self.last_name: Optional[str] = None
        self.rate = fps or FOLDER_FPS  # frame times (Frame.ts_media): n / rate, paced or not
        self.shown = 0  # images handed out, across loops and reopens

    def __call__(self) -> FolderSource:
        return FolderSource(self)


class FolderSource:
    def __init__(self, factory: FolderSourceFactory) -> None:
        self._f = factory
        self.name = str(factory.folder)
        self.finite = True
        self._files = self._list()
        last = factory.last_name
        self._idx = bisect.bisect_right(self._files, last) if last is not None else 0
        self._bad_in_a_row = 0
        self.current_name: Optional[str] = None
        self.full_size: Optional[tuple[int, int]] = None
        self.media_ts: Optional[float] = None
        self._due = time.monotonic()

    def _list(self) -> list[str]:
        try:
            names = [e.name for e in os.scandir(self._f.folder) if e.is_file()]
        except OSError as exc:
            raise CameraError(f"camera.source folder {self.name!r}: {exc.strerror or exc}") from None
        return sorted(n for n in names if Path(n).suffix.lower() in IMAGE_SUFFIXES)

    def read(self) -> Optional[np.ndarray]:
        while True:
            if self._idx >= len(self._files):
                if not self._f.loop:
                    return None
                self._files, self._idx = self._list(), 0
                if not self._files:
                    raise CameraError(f"camera.source folder {self.name!r} has no images to loop over")
            if self._bad_in_a_row > len(self._files):
                # a looping folder of only broken files would otherwise spin forever
                raise CameraError(f"camera.source folder {self.name!r}: no readable image in a full pass")
            name = self._files[self._idx]
            self._idx += 1
            self._f.last_name = self.current_name = name
            n, self._f.shown = self._f.shown, self._f.shown + 1  # a skipped image keeps its time slot
            path = self._f.folder / name
            try:
                data = np.fromfile(path, dtype=np.uint8)
            except OSError as exc:
                if not self._f.folder.is_dir():
                    raise CameraError(f"camera.source folder {self.name!r} disappeared") from None
                raise ImageError(f"{path}: cannot read image: {exc.strerror or exc}") from None
            try:  # refused from the header, before a 20000x20000 PNG becomes 1.2 GB of pixels
                check_pixels(data.tobytes(), path, self._f.max_pixels)
            except ImageError:
                self._bad_in_a_row += 1
                raise
            img: Optional[np.ndarray] = None
            self.full_size = None
            if data.size and data[:2].tobytes() == b"\xff\xd8":
                try:
                    img, self.full_size = decode_jpeg(
                        data.tobytes(), self._f.target() if self._f.target else None, self._f.max_pixels
                    )
                except ImageError:
                    img = None
            elif data.size:
                try:
                    img = cv2.imdecode(data, cv2.IMREAD_COLOR)
                except cv2.error:
                    img = None
            if img is None:
                self._bad_in_a_row += 1
                raise ImageError(f"{path}: unreadable or corrupt image, skipped")
            self._bad_in_a_row = 0
            if self._f.period:
                delay = self._due - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                self._due = max(self._due + self._f.period, time.monotonic())
            self.media_ts = n / self._f.rate
            return np.asarray(img)

    def close(self) -> None:
        self._files = []


def build_source_factory(
    cfg: CameraConfig, target: Optional[DecodeTarget] = None
) -> tuple[FrameSourceFactory, SourceKind]:
    """The real factory for ``cfg.source``; permanent mistakes (no GStreamer, missing file) raise now."""
    src = cfg.source
    kind = classify_source(src, is_dir=isinstance(src, str) and os.path.isdir(src))
    if kind is SourceKind.GSTREAMER and not gstreamer_available():
        raise CameraError(
            f"camera.source = {redact_source(src)!r} is a GStreamer pipeline but this OpenCV has no "
            "GStreamer (cv2.getBuildInformation() shows GStreamer: NO); use the distro's python3-opencv "
            "or a V4L2 source"
        )
    if kind is SourceKind.IMAGE_FOLDER:
        if not os.path.isdir(str(src)):
            raise CameraError(f"camera.source = {src!r}: folder not found")
        return FolderSourceFactory(str(src), cfg.loop, cfg.fps, target, max_pixels=cfg.max_pixels), kind
    if kind is SourceKind.VIDEO_FILE and not os.path.isfile(str(src)):
        raise CameraError(f"camera.source = {src!r}: no such video file (or folder)")
    if kind is SourceKind.NETWORK and str(src).lower().startswith(("http://", "https://")):
        if cfg.credentials_file:
            read_credentials(cfg.credentials_file)  # a missing/garbled file is a config mistake: now
        return (lambda: _open_http(cfg, kind, target)), kind
    pos = VideoPosition() if kind is SourceKind.VIDEO_FILE else None
    return (lambda: CvCaptureSource(cfg, kind, cfg.stall_timeout_s, target, pos)), kind


def _open_http(cfg: CameraConfig, kind: SourceKind, target: Optional[DecodeTarget]) -> FrameSource:
    """multipart MJPEG through our own reader; anything else over HTTP (HLS, MP4) through FFmpeg."""
    try:
        return MjpegHttpSource(
            str(cfg.source), cfg.stall_timeout_s, cfg.credentials_file, target, cfg.max_pixels
        )
    except NotMultipart as exc:
        log.info("%s; opening it with FFmpeg", exc)
        return CvCaptureSource(cfg, kind, cfg.stall_timeout_s, target)
