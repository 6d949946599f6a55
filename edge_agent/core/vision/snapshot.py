"""The JPEG snapshot a result may carry (``[output] snapshot``): pure cv2 arithmetic, no I/O."""

from __future__ import annotations

import base64
from typing import Optional

import cv2
import numpy as np
import numpy.typing as npt


def encode_snapshot(image: npt.NDArray[np.uint8], max_bytes: int) -> Optional[str]:
    """A JPEG under ``max_bytes`` (lowering quality, then size), base64 for the JSON payload."""
    img = image
    for _ in range(4):
        for quality in (80, 60, 40, 25):
            ok, buf = cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, quality])
            if ok and len(buf) <= max_bytes:
                return base64.b64encode(buf.tobytes()).decode("ascii")
        img = cv2.resize(
            img, (max(1, img.shape[1] // 2), max(1, img.shape[0] // 2)), interpolation=cv2.INTER_AREA
        )
    return None
