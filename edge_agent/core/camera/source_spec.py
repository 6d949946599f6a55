"""What a ``camera.source`` string means (pure: no I/O) and the frame record cameras hand out.

The same config key accepts a V4L2 index, a device node, a network URL, a GStreamer pipeline, a
video file or a folder of images; deciding which *before* touching cv2 lets the adapter pick the
right backend and options and lets us test the rules without any hardware.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Optional, Union

import numpy as np

NETWORK_SCHEMES = frozenset({"rtsp", "rtsps", "http", "https", "rtmp", "udp", "tcp"})
IMAGE_SUFFIXES = frozenset({".jpg", ".jpeg", ".png", ".webp", ".bmp"})
# a folder of images has no time of its own: frame n is at n / camera.fps (infer --fps), this unset
FOLDER_FPS = 10.0
VIDEO_FPS = 25.0  # a video container without a usable rate (0, NaN, over 1000): assume this


def video_rate(reported: float) -> float:
    """The frame rate a video file's frame times use: the container's, else ``VIDEO_FPS``."""
    return reported if 0 < reported <= 1000 else VIDEO_FPS


class SourceKind(str, enum.Enum):
    DEVICE_INDEX = "device_index"  # 0, "0": V4L2 by index
    V4L2_DEVICE = "v4l2_device"  # /dev/video0, /dev/v4l/by-id/...
    NETWORK = "network"  # rtsp://, http:// ...
    GSTREAMER = "gstreamer"  # "libcamerasrc ! ... ! appsink"
    VIDEO_FILE = "video_file"  # clip.mp4
    IMAGE_FOLDER = "image_folder"  # frames/

    @property
    def finite(self) -> bool:
        """Files and folders end (or loop); everything else is a live stream."""
        return self in (SourceKind.VIDEO_FILE, SourceKind.IMAGE_FOLDER)


def classify_source(source: Union[int, str], *, is_dir: bool = False) -> SourceKind:
    """Classify a ``camera.source`` value.

    ``is_dir`` is the one fact that needs the filesystem; the caller passes ``os.path.isdir(source)``.
    A path ending in ``/`` is a folder even when it does not exist yet.
    """
    if isinstance(source, bool):
        raise TypeError("camera source must be an int or a str, not a bool")
    if isinstance(source, int):
        return SourceKind.DEVICE_INDEX
    text = source.strip()
    if text.isascii() and text.isdigit():
        return SourceKind.DEVICE_INDEX
    if "!" in text:
        return SourceKind.GSTREAMER
    scheme = text.split("://", 1)[0].lower() if "://" in text else ""
    if scheme in NETWORK_SCHEMES:
        return SourceKind.NETWORK
    if text.startswith("/dev/"):
        return SourceKind.V4L2_DEVICE
    if is_dir or text.endswith("/"):
        return SourceKind.IMAGE_FOLDER
    return SourceKind.VIDEO_FILE


def device_index(source: Union[int, str]) -> int:
    """The V4L2 index of ``0``/``"0"``/``"/dev/video0"``."""
    if isinstance(source, int):
        return source
    text = source.strip()
    return int(text[len("/dev/video") :] if text.startswith("/dev/video") else text)


def redact_source(source: Union[int, str]) -> str:
    """The source as it may appear in logs/status: credentials in URLs replaced by ``***``.

    Never raises: the source is outside data, and ``urlsplit`` refuses a port like ``554x`` or an
    unclosed ``[`` (the camera then only fails to open, with this name in the log). The host part is
    kept as written (an IPv6 address keeps its brackets)."""
    text = str(source)
    scheme, sep, rest = text.partition("://")
    if not sep:
        return text
    end = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    _, at, host = rest[:end].rpartition("@")
    if not at:
        return text
    return f"{scheme}://***@{host}{rest[end:]}"


def csi_pipeline_pi(width: int = 1280, height: int = 720, fps: float = 30) -> str:
    """A Raspberry Pi CSI camera (libcamera) pipeline ending in an appsink OpenCV can read."""
    return (
        f"libcamerasrc ! video/x-raw,width={width},height={height},framerate={int(fps)}/1 "
        "! videoconvert ! video/x-raw,format=BGR ! appsink drop=true max-buffers=1"
    )


def csi_pipeline_jetson(width: int = 1280, height: int = 720, fps: float = 30, sensor_id: int = 0) -> str:
    """A Jetson CSI camera (nvarguscamerasrc) pipeline ending in an appsink OpenCV can read."""
    return (
        f"nvarguscamerasrc sensor-id={sensor_id} ! video/x-raw(memory:NVMM),width={width},height={height},"
        f"framerate={int(fps)}/1 ! nvvidconv ! video/x-raw,format=BGRx ! videoconvert "
        "! video/x-raw,format=BGR ! appsink drop=true max-buffers=1"
    )


@dataclass(frozen=True)
class Frame:
    """One captured image (BGR, HxWx3 uint8) with both clocks: monotonic for latency, wall for records."""

    image: np.ndarray
    ts_mono: float
    ts_wall: float
    seq: int
    source: str
    # file name for folder replays (None for streams)
    name: Optional[str] = None
    # (w, h) the camera sent when ``image`` was decoded smaller (libjpeg DCT scaling); None = same
    full_size: Optional[tuple[int, int]] = None
    # a file source's own time of this frame, s from its start (a video: frame index / its rate; a
    # folder: index / camera.fps): what objects mode measures dwell on, as infer --track does, so
    # both count a clip alike however fast it is read; None for live sources (the capture clock)
    ts_media: Optional[float] = None

    def full_scale(self) -> tuple[float, float]:
        """(x, y) factors from ``image`` coordinates to the frame as the camera sent it."""
        if self.full_size is None:
            return 1.0, 1.0
        h, w = self.image.shape[:2]
        return self.full_size[0] / w, self.full_size[1] / h


def fourcc_text(code: float) -> str:
    """cv2's CAP_PROP_FOURCC double -> "MJPG" ("" when the driver reports none, -1 or garbage)."""
    if not (0 < code < 2**32):  # also NaN; a backend without the property answers 0 or -1
        return ""
    n = int(code)
    text = "".join(chr((n >> (8 * i)) & 0xFF) for i in range(4))
    return text if text.isascii() and text.isprintable() else ""


def grant_mismatches(asked: Mapping[str, object], granted: Mapping[str, object]) -> tuple[str, ...]:
    """What the V4L2 driver did not grant: ``("width 1920 -> 1280", ...)``; fps within 0.5 is granted.

    Drivers silently fall back to the nearest mode (a camera without MJPG gives YUYV at a fraction
    of the fps), and the user should read that in the log, not discover it as a slow loop.
    """
    out = []
    for key, want in asked.items():
        if want is None:
            continue
        got = granted.get(key)
        if key == "fps" and isinstance(want, (int, float)) and isinstance(got, (int, float)):
            if abs(float(want) - float(got)) <= 0.5:
                continue
        elif got == want:
            continue
        out.append(f"{key} {want} -> {got}")
    return tuple(out)
