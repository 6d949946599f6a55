"""Image dimensions from the file header (pure), so a decode can be refused before it happens.

A 1.1 MB PNG of 20000x20000 pixels decodes to 1.2 GB of BGR (2.45 GB peak measured in ``infer``,
issue 11); a Pi has 1-8 GB. PNG, JPEG, GIF, BMP and WebP headers are read here; other formats
return None and the adapter asks Pillow (which also reads only the header).
"""

from __future__ import annotations

import struct
from typing import Optional

DEFAULT_MAX_PIXELS = 40_000_000  # 40 MP: a 40 MP photo decodes to 120 MB of BGR; 8K video is 33 MP

_JPEG_SOF = {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}


def jpeg_size(data: bytes) -> Optional[tuple[int, int]]:
    """``(width, height)`` from the first SOF marker, without decoding; None if not found.

    One parser for both uses: the size guard before decoding a file, and the MJPEG reader's
    choice of a reduced decode scale.
    """
    if data[:2] != b"\xff\xd8":
        return None
    i = 2
    n = len(data)
    while i + 4 <= n:
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:  # markers without a length
            i += 2
            continue
        if marker == 0xDA:  # start of scan before any SOF
            return None
        (length,) = struct.unpack(">H", data[i + 2 : i + 4])
        if marker in _JPEG_SOF:
            if i + 9 > n:
                return None
            h, w = struct.unpack(">HH", data[i + 5 : i + 9])
            return (int(w), int(h)) if w and h else None
        i += 2 + length
    return None


def image_dimensions(data: bytes) -> Optional[tuple[int, int]]:
    """``(width, height)`` from the header of an encoded image, or None if not recognised."""
    if data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) >= 24:
        w, h = struct.unpack(">II", data[16:24])
        return int(w), int(h)
    if data[:2] == b"\xff\xd8":
        return jpeg_size(data)
    if data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
        w, h = struct.unpack("<HH", data[6:10])
        return int(w), int(h)
    if data[:2] == b"BM" and len(data) >= 26:
        w, h = struct.unpack("<ii", data[18:26])
        return abs(int(w)), abs(int(h))
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP" and len(data) >= 30:
        kind = data[12:16]
        if kind == b"VP8X":
            w = int.from_bytes(data[24:27], "little") + 1
            h = int.from_bytes(data[27:30], "little") + 1
            return w, h
        if kind == b"VP8 ":
            w, h = struct.unpack("<HH", data[26:30])
            return int(w) & 0x3FFF, int(h) & 0x3FFF
        if kind == b"VP8L" and len(data) >= 25:
            bits = int.from_bytes(data[21:25], "little")
            return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    return None
