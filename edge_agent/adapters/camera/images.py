"""Image files in, BGR arrays out, with one clear error per bad file."""

from __future__ import annotations

import glob
import io
from collections.abc import Iterable, Iterator
from pathlib import Path

import cv2
import numpy as np
import numpy.typing as npt

from edge_agent.core.vision.image_header import (
    DEFAULT_MAX_PIXELS,
    HeaderError,
    image_dimensions,
    pixel_problem,
)
from edge_agent.errors import ImageError

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".webp", ".bmp", ".tif", ".tiff")


def check_pixels(data: bytes, name: object, max_pixels: int = DEFAULT_MAX_PIXELS) -> tuple[int, int]:
    """Refuse, from the header alone, an image larger than ``max_pixels`` (ImageError, one line).

    Returns the header's (w, h). Bytes whose size no header parser (ours, then Pillow's) can tell
    are refused too: cv2 would pick a decoder by the same magic and allocate whatever it reads.
    """
    try:
        dims = image_dimensions(data)
    except HeaderError as exc:
        raise ImageError(f"{name}: {exc}; not decoded") from None
    if dims is None:  # TIFF and friends: Pillow reads the header without decoding
        import warnings

        from PIL import Image

        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                with Image.open(io.BytesIO(data)) as im:
                    dims = im.size
        except Image.DecompressionBombError as exc:
            raise ImageError(f"{name}: {exc}; not decoded") from None
        except Exception:  # noqa: BLE001 - Pillow's plugins raise anything on crafted headers
            raise ImageError(
                f"{name}: not a decodable image ({len(data)} bytes), expected JPEG/PNG/WebP/BMP/TIFF"
            ) from None
    problem = pixel_problem(dims, max_pixels)
    if problem is not None:
        raise ImageError(f"{name}: {problem}; not decoded")
    return dims


def read_image(path: str | Path, max_pixels: int = DEFAULT_MAX_PIXELS) -> npt.NDArray[np.uint8]:
    """Decode ``path`` as BGR uint8. Reads bytes first so an empty or missing file says so, and
    checks the header against ``max_pixels`` before decoding."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise ImageError(f"{p}: no such file") from None
    except IsADirectoryError:
        raise ImageError(f"{p}: is a directory, expected an image file") from None
    except OSError as exc:
        raise ImageError(f"{p}: cannot read: {exc.strerror or exc}") from None
    if not data:
        raise ImageError(f"{p}: empty file, expected a JPEG/PNG/WebP/BMP image")
    check_pixels(data, p, max_pixels)
    try:
        img = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    except cv2.error:  # a decoder's own abort (OpenCV's pixel cap, libpng): the file, not the run
        img = None
    if img is None:
        raise ImageError(f"{p}: not a decodable image ({len(data)} bytes), expected JPEG/PNG/WebP/BMP")
    return img  # type: ignore[no-any-return]


def expand_inputs(items: Iterable[str]) -> Iterator[Path]:
    """Files as given; folders -> their images in name order; globs expanded (sorted).

    A name that matches nothing is still yielded, so the caller reports it as missing.
    """
    for item in items:
        p = Path(item)
        if p.is_dir():
            yield from sorted(c for c in p.iterdir() if c.is_file() and c.suffix.lower() in IMAGE_SUFFIXES)
        elif p.exists():
            yield p
        elif glob.has_magic(item):
            yield from (Path(m) for m in sorted(glob.glob(item)) if Path(m).is_file())
        else:
            yield p
