"""Draw detections on an image (for ``infer --save`` and snapshots)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import cv2
import numpy as np
import numpy.typing as npt

from edge_agent.core.vision.label_layout import Rect, place
from edge_agent.core.vision.results import Detection
from edge_agent.errors import ImageError


def _color(class_id: int) -> tuple[int, int, int]:
    # a fixed, well-spread hue per class so the same class keeps its colour across images
    hue = (class_id * 47) % 180
    bgr = cv2.cvtColor(np.array([[[hue, 220, 230]]], dtype=np.uint8), cv2.COLOR_HSV2BGR)[0, 0]
    return int(bgr[0]), int(bgr[1]), int(bgr[2])


def _text(d: Detection) -> str:
    text = f"{d.label} {d.confidence:.2f}"
    if d.classification is not None:
        text += f" | {d.classification.label} {d.classification.confidence:.2f}"
    return text


def label_places(
    size: tuple[int, int], dets: Sequence[Detection], font_scale: float, thick: int
) -> list[tuple[Rect, int]]:
    """Each detection's label rectangle and text baseline offset, at the first free place by its
    box (above, inside the top, below): labels drawn just above each box covered one another's text
    on a crowd. With no free place nearby a label still goes by its box (hidden helps no one)."""
    w, h = size
    taken: list[Rect] = []
    out = []
    for d in dets:
        x1, y1, _x2, y2 = (int(round(v)) for v in d.box)
        (tw, th), base = cv2.getTextSize(_text(d), cv2.FONT_HERSHEY_SIMPLEX, font_scale, thick)
        lw, lh = tw + 4, th + base + 2
        r = place(size, lw, lh, [(x1, y1 - lh), (x1, y1), (x1, y2)], taken)
        if r is None:
            x, y = max(0, min(x1, w - lw)), max(0, min(y1 - lh, h - lh))
            r = (x, y, x + lw, y + lh)
        taken.append(r)
        out.append((r, base))
    return out


def draw_detections(image_bgr: npt.NDArray[np.uint8], dets: Sequence[Detection]) -> npt.NDArray[np.uint8]:
    out = image_bgr.copy()
    h, w = out.shape[:2]
    thick = max(1, round(min(h, w) / 300))
    font_scale = max(0.4, min(h, w) / 900)
    for d in dets:  # every box first, so no box line crosses a label
        x1, y1, x2, y2 = (int(round(v)) for v in d.box)
        cv2.rectangle(out, (x1, y1), (x2, y2), _color(d.class_id), thick, cv2.LINE_AA)
    for d, (r, base) in zip(dets, label_places((w, h), dets, font_scale, thick)):
        cv2.rectangle(out, (r[0], r[1]), (r[2] - 1, r[3] - 1), _color(d.class_id), -1)
        cv2.putText(
            out,
            _text(d),
            (r[0] + 2, r[3] - 2 - base),
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
