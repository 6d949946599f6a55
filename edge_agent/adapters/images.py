"""Image files in, BGR arrays out, with one clear error per bad file."""

from __future__ import annotations

import glob
from collections.abc import Iterable, Iterator
from pathlib import Path

import cv2
import numpy as np
import numpy.typing as npt

from edge_agent.errors import ImageError

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".webp", ".bmp", ".tif", ".tiff")


def read_image(path: str | Path) -> npt.NDArray[np.uint8]:
    """Decode ``path`` as BGR uint8. Reads bytes first so an empty or missing file says so."""
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
