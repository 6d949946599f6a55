"""Stand-ins for cv2.VideoCapture backends that cannot exist on this machine or in CI: a V4L2
camera (no /dev/video* here, and the pip OpenCV cannot open one by name) and a GStreamer-enabled
OpenCV (the pip wheels are built without GStreamer). Kept out of the production modules.

Each behaves as OpenCV's backend does, so a test pins what the source *asks* and how it reads
what was *granted* (modules/videoio/src/cap_v4l.cpp, OpenCV 4.x/5.x):

- ``set()`` returns True or False; ``get()`` returns what the driver granted, which may differ
  from what was asked (VIDIOC_S_FMT and VIDIOC_S_PARM move to the nearest mode the device has).
- CAP_PROP_FOURCC: a pixel format the device lacks still returns True: the re-initialisation
  falls back to the first format of OpenCV's own order the device has (YUYV on a UVC camera).
- CAP_PROP_FRAME_WIDTH / HEIGHT: stored until *both* were set, then applied together (one alone
  is accepted, returns True and changes nothing); the driver picks the nearest size.
- CAP_PROP_FPS: rounded to a whole number (cvRound), the driver picks the nearest rate of the
  current format and size; a format or size change re-asks the last granted rate.
- CAP_PROP_BUFFERSIZE: 1..10 (MAX_V4L_BUFFERS) or False.
- CAP_PROP_POS_FRAMES: not a V4L2 control: set() is False, get() -1.
- ``read()``: an MJPG buffer is decoded with ``cv2.imdecode`` as the backend does, so a frame has
  the size of the JPEG the camera sent, not necessarily the granted one; other formats give a
  frame of the granted size.

Every ``set`` is recorded as ``(prop, value asked, returned)`` in ``calls``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional, Union

import cv2
import numpy as np

MAX_V4L_BUFFERS = 10
# the order OpenCV's autosetup_capture_mode_v4l2 tries at open (the formats a fake device may have)
OPEN_ORDER = ("BGR3", "RGB3", "YUYV", "UYVY", "NV12", "MJPG", "GREY")


def fourcc(text: str) -> int:
    return int(cv2.VideoWriter.fourcc(*text))


@dataclass
class V4l2Device:
    """A camera's modes: ``{"MJPG": {(1280, 720): [30, 15]}, "YUYV": {(640, 480): [30]}}``.

    ``frames`` are what the camera sends, one per ``read()``: JPEG bytes (decoded when the format
    is MJPG), or None for a failed dequeue (the driver timing out); once they run out, every read
    fails, as an unplugged camera's do.
    """

    modes: dict[str, dict[tuple[int, int], list[float]]]
    frames: list[Optional[bytes]] = field(default_factory=list)


class FakeV4l2Capture:
    """cv2.VideoCapture(target, cv2.CAP_V4L2) on the devices of :class:`FakeV4l2`."""

    def __init__(self, devices: dict[str, V4l2Device], target: Union[int, str], api: int) -> None:
        assert api == cv2.CAP_V4L2, f"a V4L2 device opened with api {api}"
        self.target = target
        self.api = api
        path = f"/dev/video{target}" if isinstance(target, int) else target
        self.device = devices.get(path)
        self.calls: list[tuple[int, float, bool]] = []
        self.released = False
        self.reads = 0
        self.palette = ""
        self.size = (0, 0)
        self.fps: float = 30  # OpenCV's DEFAULT_V4L_FPS, re-asked at every (re)initialisation
        self.buffers = 4  # DEFAULT_V4L_BUFFERS
        self._want = (640, 480)  # DEFAULT_V4L_WIDTH x HEIGHT
        self._width_set = self._height_set = 0
        if self.device is not None:
            self.palette = self._first_format()
            self._reset()

    def _first_format(self) -> str:
        assert self.device is not None
        return next(f for f in OPEN_ORDER if f in self.device.modes)

    def _reset(self) -> None:
        """v4l2_reset: S_FMT (the nearest size of the palette), then S_PARM with the last rate."""
        assert self.device is not None
        sizes = self.device.modes[self.palette]
        w, h = self._want
        self.size = min(sizes, key=lambda s: (abs(s[0] - w) + abs(s[1] - h), -s[0]))
        self._set_fps(self.fps)

    def _set_fps(self, value: float) -> None:
        assert self.device is not None
        rates = self.device.modes[self.palette][self.size]
        self.fps = min(rates, key=lambda r: (abs(r - value), -r))

    def isOpened(self) -> bool:
        return self.device is not None and not self.released

    def set(self, prop: int, value: float) -> bool:
        ok = self._set(prop, value)
        self.calls.append((prop, value, ok))
        return ok

    def _set(self, prop: int, raw: float) -> bool:
        if not self.isOpened():
            return False
        assert self.device is not None
        value = round(raw)  # cvRound: to nearest, ties to even, as Python's round
        if prop == cv2.CAP_PROP_FOURCC:
            text = "".join(chr((value >> (8 * i)) & 0xFF) for i in range(4))
            if text == self.palette:
                return True
            # a format the device lacks: S_FMT answers another one, and the re-initialisation
            # (autosetup_capture_mode_v4l2) takes the first of its own order the device has: the
            # set succeeds (True) and get() tells the format actually used
            self.palette = text if text in self.device.modes else self._first_format()
            self._reset()
            return True
        if prop in (cv2.CAP_PROP_FRAME_WIDTH, cv2.CAP_PROP_FRAME_HEIGHT):
            if prop == cv2.CAP_PROP_FRAME_WIDTH and value > 0:
                self._width_set = value
            if prop == cv2.CAP_PROP_FRAME_HEIGHT and value > 0:
                self._height_set = value
            if self._width_set <= 0 or self._height_set <= 0:
                return True  # waits for the other one
            self._want = (self._width_set, self._height_set)
            self._width_set = self._height_set = 0
            self._reset()
            return True
        if prop == cv2.CAP_PROP_FPS:
            if value != self.fps:
                self._set_fps(value)
            return True
        if prop == cv2.CAP_PROP_BUFFERSIZE:
            if value == self.buffers:
                return True
            if not 1 <= value <= MAX_V4L_BUFFERS:
                return False
            self.buffers = value
            self._reset()
            return True
        return False  # not a control this driver has (CAP_PROP_POS_FRAMES among them)

    def get(self, prop: int) -> float:
        if not self.isOpened():
            return -1.0
        if prop == cv2.CAP_PROP_FRAME_WIDTH:
            return float(self.size[0])
        if prop == cv2.CAP_PROP_FRAME_HEIGHT:
            return float(self.size[1])
        if prop == cv2.CAP_PROP_FOURCC:
            return float(fourcc(self.palette))
        if prop == cv2.CAP_PROP_FPS:
            return float(self.fps)
        if prop == cv2.CAP_PROP_BUFFERSIZE:
            return float(self.buffers)
        return -1.0

    def read(self) -> tuple[bool, Optional[np.ndarray]]:
        self.reads += 1
        if not self.isOpened() or self.device is None or not self.device.frames:
            return False, None
        data = self.device.frames.pop(0)
        if data is None:
            return False, None
        if self.palette == "MJPG":
            img = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
            return (img is not None), img
        return True, np.zeros((self.size[1], self.size[0], 3), np.uint8)

    def release(self) -> None:
        self.released = True

    def asked(self) -> list[tuple[str, float]]:
        """The settings asked, by name, in order (what a reader of the driver's log would see)."""
        names = {
            cv2.CAP_PROP_FOURCC: "fourcc",
            cv2.CAP_PROP_FRAME_WIDTH: "width",
            cv2.CAP_PROP_FRAME_HEIGHT: "height",
            cv2.CAP_PROP_FPS: "fps",
            cv2.CAP_PROP_BUFFERSIZE: "buffersize",
            cv2.CAP_PROP_POS_FRAMES: "pos_frames",
        }
        return [(names.get(p, str(p)), v) for p, v, _ in self.calls]


class FakeV4l2:
    """Put in place of ``cv2.VideoCapture``: opens the named devices, keeps every capture made."""

    def __init__(self, devices: dict[str, V4l2Device]) -> None:
        self.devices = devices
        self.opened: list[FakeV4l2Capture] = []

    def __call__(self, target: Union[int, str], api: int = cv2.CAP_ANY) -> FakeV4l2Capture:
        cap = FakeV4l2Capture(self.devices, target, api)
        self.opened.append(cap)
        return cap


class FakeGstCapture:
    """cv2.VideoCapture(pipeline, cv2.CAP_GSTREAMER) in an OpenCV built with GStreamer.

    OpenCV's backend takes the pipeline text as given (gst_parse_launch), needs an ``appsink`` as
    the last element, and reports the size the appsink's caps negotiated: here the
    ``width=``/``height=`` of the last caps filter before it."""

    def __init__(self, pipeline: str, api: int) -> None:
        self.pipeline = pipeline
        self.api = api
        self.released = False
        elements = [e.strip() for e in pipeline.split("!")]
        self._opened = api == cv2.CAP_GSTREAMER and elements[-1].split(" ")[0] == "appsink"
        caps = [e for e in elements if re.search(r"\bwidth=", e) and re.search(r"\bheight=", e)]
        self.size = (0, 0)
        if caps:
            w = re.search(r"\bwidth=(?:\(int\))?(\d+)", caps[-1])
            h = re.search(r"\bheight=(?:\(int\))?(\d+)", caps[-1])
            if w and h:
                self.size = (int(w.group(1)), int(h.group(1)))

    def isOpened(self) -> bool:
        return self._opened and not self.released

    def get(self, prop: int) -> float:
        if prop == cv2.CAP_PROP_FRAME_WIDTH:
            return float(self.size[0])
        if prop == cv2.CAP_PROP_FRAME_HEIGHT:
            return float(self.size[1])
        return -1.0

    def set(self, prop: int, value: float) -> bool:
        return False

    def read(self) -> tuple[bool, Optional[np.ndarray]]:
        if not self.isOpened():
            return False, None
        return True, np.zeros((self.size[1], self.size[0], 3), np.uint8)

    def release(self) -> None:
        self.released = True


class RecordingCapture:
    """The real cv2.VideoCapture, with what each open was given kept in ``opens``: the target, the
    api, the open parameters and the FFmpeg options in the environment at that moment."""

    def __init__(self) -> None:
        self.real = cv2.VideoCapture
        self.opens: list[tuple[object, ...]] = []

    def __call__(self, *args: object) -> cv2.VideoCapture:
        import os

        self.opens.append((*args, os.environ.get("OPENCV_FFMPEG_CAPTURE_OPTIONS")))
        return self.real(*args)
