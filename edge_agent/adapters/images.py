"""Image files in, BGR arrays out, with one clear error per bad file."""

from __future__ import annotations

import glob
import io
from collections.abc import Iterable, Iterator
from pathlib import Path

import cv2
import numpy as np
import numpy.typing as npt

from edge_agent.core.image_header import DEFAULT_MAX_PIXELS, image_dimensions
from edge_agent.errors import ImageError

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".webp", ".bmp", ".tif", ".tiff")


def check_pixels(data: bytes, name: object, max_pixels: int = DEFAULT_MAX_PIXELS) -> None:
    """Refuse, from the header alone, an image larger than ``max_pixels`` (ImageError, one line)."""
    dims = image_dimensions(data)
    if dims is None:  # TIFF and friends: Pillow reads the header without decoding
        import warnings

        from PIL import Image, UnidentifiedImageError

        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                with Image.open(io.BytesIO(data)) as im:
                    dims = im.size
        except Image.DecompressionBombError as exc:
            raise ImageError(f"{name}: {exc}; not decoded") from None
        except (UnidentifiedImageError, OSError, ValueError, SyntaxError):
            return  # not an image Pillow knows: cv2 says so below
    w, h = dims
    if w * h > max_pixels:
        raise ImageError(
            f"{name}: {w}x{h} pixels ({w * h / 1e6:.0f} MP) exceeds the limit of {max_pixels / 1e6:g} MP "
            "(max_pixels); not decoded"
        )


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
    img = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
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
