"""Image dimensions from the file header (pure), so a decode can be refused before it happens.

A 1.1 MB PNG of 20000x20000 pixels decodes to 1.2 GB of BGR (2.45 GB peak measured in ``infer``,
issue 11); a Pi has 1-8 GB. PNG, JPEG, GIF, BMP and WebP headers are read here; other formats
return None and the adapter asks Pillow (which also reads only the header).

A header whose magic says "BMP" (or PNG, ...) but whose fields make no sense raises
:class:`HeaderError` instead of returning None: the decoder that the magic selects would read
the same bytes its own way, and "could not tell" must never mean "decode and see" (issue 17: an
OS/2 BMP header read as a Windows one gave 1 x 1.5 M pixels for a 65535x65535 image).
"""

from __future__ import annotations

import struct
from typing import Optional

from edge_agent.errors import ImageError

DEFAULT_MAX_PIXELS = 40_000_000  # 40 MP: a 40 MP photo decodes to 120 MB of BGR; 8K video is 33 MP

_JPEG_SOF = {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}
# BITMAPCOREHEADER (12: 16-bit unsigned sizes), OS/2 2.x (16, 64) and the Windows INFO/V2-V5
# headers (40, 52, 56, 108, 124: 32-bit signed sizes, negative height = rows stored top-down)
_BMP_CORE = 12
_BMP_INFO = {16, 40, 52, 56, 64, 108, 124}


class HeaderError(ImageError):
    """The magic names a format but its header is cut short or impossible (negative width, ...)."""


def jpeg_size(data: bytes) -> Optional[tuple[int, int]]:
    """``(width, height)`` from the first SOF marker, without decoding; None if not found.

    One parser for both uses: the size guard before decoding a file, and the MJPEG reader's
    choice of a reduced decode scale. Bytes between segments are skipped up to the next marker
    the way libjpeg's ``next_marker`` does, so the SOF found here is the one libjpeg will use.
    """
    if data[:2] != b"\xff\xd8":
        return None
    i = 2
    n = len(data)
    while i + 1 < n:
        if data[i] != 0xFF:  # garbage between segments: libjpeg warns and resyncs at the next 0xFF
            j = data.find(b"\xff", i)
            if j < 0:
                return None
            i = j
            continue
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if marker == 0x00 or marker == 0x01 or marker == 0xD8 or 0xD0 <= marker <= 0xD7:
            i += 2  # stuffed zero, TEM, SOI and RSTn carry no length
            continue
        if marker in (0xDA, 0xD9):  # start of scan / end of image before any SOF
            return None
        if i + 4 > n:
            return None
        (length,) = struct.unpack(">H", data[i + 2 : i + 4])
        if marker in _JPEG_SOF:
            if i + 9 > n:
                return None
            h, w = struct.unpack(">HH", data[i + 5 : i + 9])
            return (int(w), int(h)) if w and h else None
        if length < 2:
            return None  # libjpeg: "Bogus marker length"
        i += 2 + length
    return None


def _bmp_size(data: bytes) -> tuple[int, int]:
    if len(data) < 26:
        raise HeaderError(f"BMP header cut short ({len(data)} bytes)")
    (size,) = struct.unpack("<I", data[14:18])
    if size == _BMP_CORE:
        w, h = struct.unpack("<HH", data[18:22])
        return int(w), int(h)
    if size not in _BMP_INFO:
        raise HeaderError(f"BMP header size {size} is not one of 12, 16, 40, 52, 56, 64, 108, 124")
    w, h = struct.unpack("<ii", data[18:26])
    if w <= 0 or h == 0 or h == -(2**31):
        raise HeaderError(f"BMP header gives an impossible size {w}x{h}")
    return int(w), abs(int(h))  # negative height: a top-down bitmap of |h| rows


def image_dimensions(data: bytes) -> Optional[tuple[int, int]]:
    """``(width, height)`` from the header of an encoded image, or None if not recognised.

    Raises :class:`HeaderError` when the magic is recognised but the header is not usable.
    """
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        if len(data) < 24 or data[12:16] != b"IHDR":
            raise HeaderError("PNG without an IHDR chunk first")
        w, h = struct.unpack(">II", data[16:24])
        return int(w), int(h)
    if data[:2] == b"\xff\xd8":
        return jpeg_size(data)
    if data[:6] in (b"GIF87a", b"GIF89a"):
        if len(data) < 10:
            raise HeaderError("GIF header cut short")
        w, h = struct.unpack("<HH", data[6:10])
        return int(w), int(h)
    if data[:2] == b"BM":
        return _bmp_size(data)
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return _webp_size(data)
    return None


def _webp_size(data: bytes) -> Optional[tuple[int, int]]:
    kind = data[12:16]
    if kind == b"VP8X" and len(data) >= 30:
        w = int.from_bytes(data[24:27], "little") + 1
        h = int.from_bytes(data[27:30], "little") + 1
        return w, h
    if kind == b"VP8 " and len(data) >= 30:
        w, h = struct.unpack("<HH", data[26:30])
        return int(w) & 0x3FFF, int(h) & 0x3FFF
    if kind == b"VP8L" and len(data) >= 25:
        bits = int.from_bytes(data[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    raise HeaderError(f"WebP header of kind {kind!r} not readable ({len(data)} bytes)")


def _mp(n: int) -> str:
    return f"{n / 1e6:.0f} MP" if n >= 10_000_000 else f"{n / 1e6:.3g} MP"


def pixel_problem(dims: tuple[int, int], max_pixels: int, key: str = "max_pixels") -> Optional[str]:
    """Why an image of ``dims`` (w, h) must not be decoded under ``max_pixels`` (the setting
    ``key``), or None."""
    w, h = dims
    if w * h > max_pixels:
        return f"{w}x{h} pixels ({_mp(w * h)}) exceeds the limit of {_mp(max_pixels)} ({key})"
    return None
