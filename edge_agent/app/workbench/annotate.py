"""Draw detections on an image (for ``infer --save`` and snapshots)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import cv2
import numpy as np
import numpy.typing as npt

from edge_agent.core.vision.results import Detection
from edge_agent.errors import ImageError


def _color(class_id: int) -> tuple[int, int, int]:
    # a fixed, well-spread hue per class so the same class keeps its colour across images
    hue = (class_id * 47) % 180
    bgr = cv2.cvtColor(np.array([[[hue, 220, 230]]], dtype=np.uint8), cv2.COLOR_HSV2BGR)[0, 0]
    return int(bgr[0]), int(bgr[1]), int(bgr[2])


def draw_detections(image_bgr: npt.NDArray[np.uint8], dets: Sequence[Detection]) -> npt.NDArray[np.uint8]:
    out = image_bgr.copy()
    h, w = out.shape[:2]
    thick = max(1, round(min(h, w) / 300))
    font_scale = max(0.4, min(h, w) / 900)
    for d in dets:
        x1, y1, x2, y2 = (int(round(v)) for v in d.box)
        color = _color(d.class_id)
        cv2.rectangle(out, (x1, y1), (x2, y2), color, thick, cv2.LINE_AA)
        text = f"{d.label} {d.confidence:.2f}"
        if d.classification is not None:
            text += f" | {d.classification.label} {d.classification.confidence:.2f}"
        (tw, th), base = cv2.getTextSize(text, cv2.FONT_HERSHEY_SIMPLEX, font_scale, thick)
        ty = y1 - 4 if y1 - th - base - 4 >= 0 else min(h - 1, y2 + th + base + 4)
        tx = max(0, min(x1, w - tw - 4))  # keep the label on the picture near the right edge
        cv2.rectangle(out, (tx, ty - th - base), (tx + tw + 4, ty + 2), color, -1)
        cv2.putText(
            out,
            text,
            (tx + 2, ty - base // 2),
            cv2.FONT_HERSHEY_SIMPLEX,
            font_scale,
            (0, 0, 0),
            max(1, thick - 1),
            cv2.LINE_AA,
        )
    return out


def save_image(path: Path, image: npt.NDArray[np.uint8], quality: int = 90) -> None:
    """Write a JPEG without following a symlink at ``path`` (O_NOFOLLOW): an output folder must
    never become a way to overwrite a file elsewhere."""
    ok, buf = cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, quality])
    if not ok:
        raise ImageError(f"{path}: could not encode the annotated image")
    try:
        fd = os.open(str(path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    except OSError as exc:
        raise ImageError(f"{path}: could not write image: {exc.strerror or exc}") from None
    with os.fdopen(fd, "wb") as f:
        f.write(buf.tobytes())


def safe_output_name(out_dir: Path, stem: str, used: set[str], inputs: set[Path]) -> Path:
    """``out_dir/<stem>.jpg`` (then ``<stem>_1.jpg`` ...) that is not an input image, not a symlink
    and not already written in this run: ``infer DIR --save DIR`` must leave the inputs alone."""
    i = 0
    while True:
        name = f"{stem}.jpg" if i == 0 else f"{stem}_{i}.jpg"
        i += 1
        cand = out_dir / name
        if name in used or cand.is_symlink() or cand.resolve() in inputs:
            continue
        used.add(name)
        return cand
