"""HTTP multipart MJPEG (pure): split a ``multipart/x-mixed-replace`` byte stream into JPEG parts.

ESP32-CAM's CameraWebServer, mjpg-streamer, motion and most IP cameras serve ``/stream`` like
this: one endless HTTP response, each part a JPEG, usually with a Content-Length header (ESP32,
mjpg-streamer) and sometimes without (then the part ends at the next boundary). Field streams are
not tidy: Wi-Fi cameras drop bytes, reboot mid-part, or quote the boundary with its leading
``--``; the parser tolerates all of that and marks a part cut short so the adapter can skip it.

Also here: reading a JPEG's size from its SOF marker without decoding it, and choosing libjpeg's
DCT scaling factor (1/2, 1/4, 1/8) so a frame much larger than the model input is decoded small.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from edge_agent.errors import CameraError

MAX_PART_BYTES = 16 * 1024 * 1024  # a 4K JPEG is ~2 MB; more than this without a boundary is garbage


class MultipartError(CameraError, ValueError):
    """The stream is not multipart at all (or a part grew past MAX_PART_BYTES)."""


@dataclass(frozen=True)
class Part:
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)
    # cut short: a boundary came before Content-Length bytes did
    truncated: bool = False


def boundary_from_content_type(content_type: str) -> Optional[str]:
    """The boundary of a ``multipart/x-mixed-replace; boundary=...`` header, None if not multipart."""
    main, _, params = content_type.partition(";")
    if not main.strip().lower().startswith("multipart/"):
        return None
    for item in params.split(";"):
        key, _, value = item.strip().partition("=")
        if key.strip().lower() == "boundary" and value.strip():
            return value.strip().strip('"')
    return None


class MultipartParser:
    """Incremental: ``feed(bytes)`` returns the parts completed by those bytes."""

    def __init__(self, boundary: str, max_part: int = MAX_PART_BYTES) -> None:
        b = boundary.encode("latin-1")
        # RFC 2046 says the delimiter is "--" + boundary; some cameras put the "--" in the header too
        self._delims = [b"--" + b] + ([b] if b.startswith(b"--") else [])
        self._buf = bytearray()
        self._headers: Optional[dict[str, str]] = None  # set while reading a part's body
        self._max = max_part
        self.bytes_seen = 0

    @property
    def in_part(self) -> bool:
        """Headers of a part were read and its body is not complete yet."""
        return self._headers is not None

    def feed(self, data: bytes) -> list[Part]:
        self.bytes_seen += len(data)
        self._buf += data
        parts: list[Part] = []
        while True:
            part = self._next()
            if part is None:
                break
            parts.append(part)
        if len(self._buf) > self._max:
            raise MultipartError(f"no part boundary within {self._max} bytes")
        return parts

    def _find_delim(self, start: int = 0) -> tuple[int, int]:
        """(index, length) of the first delimiter at/after ``start`` (-1 when none yet)."""
        best, length = -1, 0
        for d in self._delims:
            i = self._buf.find(d, start)
            if i >= 0 and (best < 0 or i < best):
                best, length = i, len(d)
        return best, length

    def _next(self) -> Optional[Part]:
        if self._headers is None:
            i, n = self._find_delim()
            if i < 0:
                # keep a tail that could be the start of a delimiter split across reads
                keep = max(len(d) for d in self._delims)
                if len(self._buf) > keep:
                    del self._buf[: len(self._buf) - keep]
                return None
            end = self._buf.find(b"\r\n\r\n", i + n)
            sep = 4
            lf_end = self._buf.find(b"\n\n", i + n)
            if lf_end >= 0 and (end < 0 or lf_end < end):
                end, sep = lf_end, 2
            if end < 0:
                return None
            head = bytes(self._buf[i + n : end]).decode("latin-1")
            headers: dict[str, str] = {}
            for line in head.splitlines():
                key, colon, value = line.partition(":")
                if colon:
                    headers[key.strip().lower()] = value.strip()
            del self._buf[: end + sep]
            self._headers = headers
        return self._body()

    def _body(self) -> Optional[Part]:
        assert self._headers is not None
        headers = self._headers
        length: Optional[int] = None
        raw = headers.get("content-length", "")
        # ASCII digits only ("\xb2" is a latin-1 digit to str.isdigit), and few of them: a 5000-digit
        # value would make int() raise instead of being refused as too large
        if raw.isascii() and raw.isdigit():
            length = int(raw) if len(raw) <= 12 else self._max + 1
        if length is not None and length > self._max:
            shown = raw if len(raw) <= 20 else raw[:20] + "..."  # what the camera sent, bounded
            raise MultipartError(f"part Content-Length {shown} exceeds {self._max} bytes")
        if length is not None:
            # a boundary inside the declared length means the sender gave up on this part
            i, _ = self._find_delim()
            if 0 <= i < length:
                return self._take(i, headers, truncated=True)
            if len(self._buf) < length:
                return None
            return self._take(length, headers, truncated=False)
        i, _ = self._find_delim()
        if i < 0:
            return None
        return self._take(i, headers, truncated=False)

    def _take(self, n: int, headers: dict[str, str], truncated: bool) -> Part:
        if n > self._max:  # one read can complete a part that never sat in the buffer check
            raise MultipartError(f"part of {n} bytes exceeds {self._max} bytes")
        body = bytes(self._buf[:n])
        del self._buf[:n]
        self._headers = None
        # the CRLF before the next delimiter belongs to the delimiter, not to the JPEG
        if body.endswith(b"\r\n"):
            body = body[:-2]
        return Part(body, headers, truncated)


def is_complete_jpeg(data: bytes) -> bool:
    """Starts with SOI and ends with EOI (trailing padding tolerated): not cut off mid-stream."""
    if len(data) < 4 or data[:2] != b"\xff\xd8":
        return False
    return data.rstrip(b"\r\n\x00")[-2:] == b"\xff\xd9"


def reduced_scale(size_wh: tuple[int, int], target_hw: Optional[tuple[int, int]]) -> int:
    """The largest libjpeg DCT scale denominator (1, 2, 4, 8) that still leaves the image at least
    as large as the letterboxed copy the model gets, so decoding small loses nothing it would keep.

    An 1280x720 frame for a 640x640 model decodes at 1/2 (640x360, exactly the letterbox size).
    """
    if target_hw is None:
        return 1
    w, h = size_wh
    th, tw = target_hw
    r = min(th / h, tw / w)  # the letterbox scale
    for d in (8, 4, 2):
        if w // d >= w * r and h // d >= h * r:
            return d
    return 1
