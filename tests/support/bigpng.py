"""A 20000x20000 PNG of about 1 MB built by hand (streamed, never held in memory as pixels)."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path


def _chunk(kind: bytes, data: bytes) -> bytes:
    return (
        struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    )


def write_huge_png(path: Path, width: int = 20000, height: int = 20000) -> Path:
    """1-bit greyscale: 50 MB through zlib instead of 1.2 GB, same decoded size for cv2 (BGR)."""
    ihdr = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    comp = zlib.compressobj(9)
    row = b"\x00" + b"\x00" * ((width + 7) // 8)
    parts = [comp.compress(row) for _ in range(height)]
    parts.append(comp.flush())
    path.write_bytes(
        b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", b"".join(parts)) + _chunk(b"IEND", b"")
    )
    return path
