"""Deterministic synthetic scenes for the demo models (detector + crop classifier).

Every scene is a pure function of its integer seed, so training, calibration and held-out data are
reproducible without storing them. Three shape classes (circle, square, triangle) carry one of four
fill patterns (solid, striped, dotted, outlined) on textured, noisy backgrounds with look-alike
distractors (irregular blobs, elongated rectangles and ellipses, lines crossing the shapes) and
partial occlusion, so neither task is trivially separable.

All sizes scale with ``max(width, height) / 160``: a 320x240 scene letterboxed to 160 looks like a
160x120 one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import cv2
import numpy as np

CLASS_NAMES: tuple[str, ...] = ("circle", "square", "triangle")
FILL_NAMES: tuple[str, ...] = ("solid", "striped", "dotted", "outlined")
BASE = 160  # reference scene size (longest side) the size ranges below are expressed in
SIZE_RANGE = (0.085, 0.28)  # object "diameter" as a fraction of the longest side
MAX_OVERLAP = 0.35  # intersection / smaller box area allowed between two shapes
SHIFT = 4  # cv2 fixed-point bits: sub-pixel accurate drawing
F = 1 << SHIFT

FloatArray = np.ndarray
Rng = np.random.Generator


@dataclass(frozen=True)
class Scene:
    """A BGR uint8 image with its objects: boxes xyxy in pixels, class ids and fill-pattern ids."""

    image: np.ndarray
    boxes: np.ndarray  # float32 [M, 4] x1, y1, x2, y2 in pixels
    classes: np.ndarray  # int64 [M] index into CLASS_NAMES
    fills: np.ndarray  # int64 [M] index into FILL_NAMES


def _pts(p: np.ndarray) -> np.ndarray:
    return np.round(np.asarray(p, dtype=np.float64) * F).astype(np.int32).reshape(-1, 1, 2)


def _background(rng: Rng, w: int, h: int, k: float) -> np.ndarray:
    base = rng.uniform(30, 225, size=3)
    cells = max(2, int(rng.uniform(3, 9)))
    low = rng.uniform(-1, 1, size=(cells, cells, 3)).astype(np.float32)
    low = cv2.resize(low, (w, h), interpolation=cv2.INTER_CUBIC)
    img = base[None, None, :] + low * rng.uniform(15, 60)
    # fine texture: blurred noise at a random grain
    grain = rng.normal(0, 1, size=(h, w, 1)).astype(np.float32)
    grain = cv2.GaussianBlur(grain, (0, 0), rng.uniform(0.6, 2.0) * k)[..., None]
    img += grain * rng.uniform(8, 35)
    gx, gy = np.meshgrid(np.linspace(-1, 1, w), np.linspace(-1, 1, h))
    ang = rng.uniform(0, 2 * math.pi)
    img += ((gx * math.cos(ang) + gy * math.sin(ang)) * rng.uniform(0, 40))[..., None]
    out: np.ndarray = np.clip(img, 0, 255).astype(np.float32)
    return out


def _random_colour(rng: Rng, avoid: np.ndarray) -> np.ndarray:
    """A colour that differs from ``avoid`` (local background mean) enough to be visible."""
    colour = rng.uniform(0, 255, size=3)
    for _ in range(8):
        if np.abs(colour - avoid).sum() > 110:
            break
        colour = rng.uniform(0, 255, size=3)
    return colour


def _blend(img: np.ndarray, alpha: np.ndarray, colour: np.ndarray) -> None:
    a = alpha[..., None]
    img *= 1.0 - a
    img += a * colour[None, None, :]


def _distractors(rng: Rng, img: np.ndarray, k: float) -> None:
    h, w = img.shape[:2]
    mask = np.zeros((h, w), np.uint8)
    for _ in range(int(rng.integers(0, 4))):  # irregular blobs (circle look-alikes)
        mask[:] = 0
        c = rng.uniform(0, [w, h])
        r = rng.uniform(6, 20) * k
        n = int(rng.integers(6, 12))
        ang = np.sort(rng.uniform(0, 2 * math.pi, n))
        rad = r * rng.uniform(0.45, 1.0, n)
        pts = np.stack([c[0] + rad * np.cos(ang), c[1] + rad * np.sin(ang)], 1)
        cv2.fillPoly(mask, [_pts(pts)], 255, cv2.LINE_AA, SHIFT)
        _blend(img, mask.astype(np.float32) / 255 * rng.uniform(0.5, 1), rng.uniform(0, 255, 3))
    for _ in range(int(rng.integers(0, 3))):  # elongated ellipses / rectangles (aspect >= 2.2)
        mask[:] = 0
        c = rng.uniform(0, [w, h])
        long_ = rng.uniform(8, 24) * k
        short = long_ / rng.uniform(2.2, 4.0)
        tilt = float(rng.uniform(0, 180))
        if rng.random() < 0.5:
            centre = (int(_pts(c)[0, 0, 0]), int(_pts(c)[0, 0, 1]))
            axes = (int(long_ * F), int(short * F))
            cv2.ellipse(mask, centre, axes, tilt, 0, 360, 255, -1, cv2.LINE_AA, SHIFT)
        else:
            box = cv2.boxPoints(((float(c[0]), float(c[1])), (2 * long_, 2 * short), tilt))
            cv2.fillPoly(mask, [_pts(box)], 255, cv2.LINE_AA, SHIFT)
        _blend(img, mask.astype(np.float32) / 255, rng.uniform(0, 255, 3))
    _lines(rng, img, k, int(rng.integers(2, 9)))


def _lines(rng: Rng, img: np.ndarray, k: float, n: int) -> None:
    h, w = img.shape[:2]
    for _ in range(n):
        p1 = _pts(rng.uniform(0, [w, h]))[0, 0]
        p2 = _pts(rng.uniform(0, [w, h]))[0, 0]
        thick = max(1, round(rng.uniform(1, 2.5) * k))
        cv2.line(
            img,
            (int(p1[0]), int(p1[1])),
            (int(p2[0]), int(p2[1])),
            tuple(float(v) for v in rng.uniform(0, 255, 3)),
            thick,
            cv2.LINE_AA,
            SHIFT,
        )


def _geometry(rng: Rng, cls: int, d: float, c: np.ndarray) -> np.ndarray:
    """Outline polygon of the shape (circles as a 64-gon, exact enough for masks and boxes)."""
    theta = rng.uniform(0, 2 * math.pi)
    if cls == 0:
        n, radius = 64, d / 2
    elif cls == 1:
        n, radius = 4, d * 0.85 / math.sqrt(2)
    else:
        n, radius = 3, d * 0.62
    ang = theta + np.arange(n) * 2 * math.pi / n
    return np.stack([c[0] + radius * np.cos(ang), c[1] + radius * np.sin(ang)], 1)


def _pattern(rng: Rng, fill: int, w: int, h: int, k: float) -> np.ndarray:
    """Coverage in 0..1 of the fill pattern over the whole image (masked by the shape later)."""
    if fill == 0 or fill == 3:
        return np.ones((h, w), np.float32)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    phi = rng.uniform(0, math.pi)
    u = xx * math.cos(phi) + yy * math.sin(phi)
    v = -xx * math.sin(phi) + yy * math.cos(phi)
    if fill == 1:
        period = rng.uniform(3.5, 6.5) * k
        s = np.sin(2 * math.pi * u / period + rng.uniform(0, 2 * math.pi))
        stripes: np.ndarray = np.clip(s * 1.6 + 0.5, 0, 1).astype(np.float32)
        return stripes
    period = rng.uniform(4.0, 7.0) * k
    ru = (u / period + rng.uniform(0, 1)) % 1 - 0.5
    rv = (v / period + rng.uniform(0, 1)) % 1 - 0.5
    dist = np.sqrt(ru * ru + rv * rv) * period
    radius = period * rng.uniform(0.22, 0.33)
    dots: np.ndarray = np.clip(radius - dist + 0.5, 0, 1).astype(np.float32)
    return dots


def _draw_shape(rng: Rng, img: np.ndarray, poly: np.ndarray, fill: int, k: float) -> None:
    h, w = img.shape[:2]
    x1, y1 = np.floor(poly.min(0)).astype(int) - 2
    x2, y2 = np.ceil(poly.max(0)).astype(int) + 3
    x1, y1, x2, y2 = max(x1, 0), max(y1, 0), min(x2, w), min(y2, h)
    sub = img[y1:y2, x1:x2]
    local = poly - [x1, y1]
    mask = np.zeros(sub.shape[:2], np.uint8)
    cv2.fillPoly(mask, [_pts(local)], 255, cv2.LINE_AA, SHIFT)
    inside = mask.astype(np.float32) / 255
    colour = _random_colour(rng, sub.reshape(-1, 3).mean(0))
    if fill != 3:
        if fill != 0 and rng.random() < 0.35:  # pattern on a second colour instead of see-through
            _blend(sub, inside, _random_colour(rng, colour))
        pat = _pattern(rng, fill, x2 - x1, y2 - y1, k)
        _blend(sub, inside * pat, colour)
    outline = fill == 3 or rng.random() < 0.3  # striped/dotted sometimes outlined too
    if outline:
        edge = np.zeros_like(mask)
        thick = max(1, round(rng.uniform(1.0, 2.6) * k)) if fill == 3 else max(1, round(k))
        cv2.polylines(edge, [_pts(local)], True, 255, thick, cv2.LINE_AA, SHIFT)
        _blend(sub, edge.astype(np.float32) / 255, colour)


def _overlap_ok(box: np.ndarray, boxes: list[np.ndarray]) -> bool:
    for other in boxes:
        iw = min(box[2], other[2]) - max(box[0], other[0])
        ih = min(box[3], other[3]) - max(box[1], other[1])
        if iw <= 0 or ih <= 0:
            continue
        small = min((box[2] - box[0]) * (box[3] - box[1]), (other[2] - other[0]) * (other[3] - other[1]))
        if iw * ih > MAX_OVERLAP * small:
            return False
    return True


def make_scene(seed: int, width: int = BASE, height: int = BASE, max_objects: int = 5) -> Scene:
    """Render scene ``seed`` at ``width`` x ``height``; the same arguments always give the same scene."""
    rng = np.random.default_rng(seed)
    k = max(width, height) / BASE
    img = _background(rng, width, height, k)
    _distractors(rng, img, k)
    boxes: list[np.ndarray] = []
    classes: list[int] = []
    fills: list[int] = []
    for _ in range(int(rng.integers(1, max_objects + 1))):
        cls = int(rng.integers(0, len(CLASS_NAMES)))
        fill = int(rng.integers(0, len(FILL_NAMES)))
        d = rng.uniform(*SIZE_RANGE) * max(width, height)
        for _try in range(25):
            c = rng.uniform([d * 0.6, d * 0.6], [width - d * 0.6, height - d * 0.6])
            poly = _geometry(rng, cls, d, c)
            box = np.concatenate([poly.min(0), poly.max(0)])
            inside = box[0] >= 0 and box[1] >= 0 and box[2] <= width and box[3] <= height
            if inside and _overlap_ok(box, boxes):
                break
        else:
            continue
        _draw_shape(rng, img, poly, fill, k)
        boxes.append(box)
        classes.append(cls)
        fills.append(fill)
    _lines(rng, img, k, int(rng.integers(0, 3)))  # thin lines across shapes: partial occlusion
    if rng.random() < 0.35:
        img = cv2.GaussianBlur(img, (0, 0), rng.uniform(0.5, 1.0) * k)
    img = img * rng.uniform(0.75, 1.2) + rng.uniform(-20, 20)
    img += rng.normal(0, rng.uniform(2, 9), size=img.shape).astype(np.float32)
    out = np.clip(img, 0, 255).astype(np.uint8)
    box_arr = np.array(boxes, np.float32).reshape(-1, 4)
    return Scene(out, box_arr, np.array(classes, np.int64), np.array(fills, np.int64))


def letterbox(image: np.ndarray, size: int, pad: int = 114) -> tuple[np.ndarray, float, tuple[int, int]]:
    """Ultralytics-style letterbox to ``size`` x ``size``: returns image, scale and (pad_x, pad_y)."""
    h, w = image.shape[:2]
    scale = min(size / w, size / h)
    nw, nh = round(w * scale), round(h * scale)
    out = np.full((size, size, 3), pad, np.uint8)
    px, py = (size - nw) // 2, (size - nh) // 2
    resized = image if (nw, nh) == (w, h) else cv2.resize(image, (nw, nh), interpolation=cv2.INTER_LINEAR)
    out[py : py + nh, px : px + nw] = resized
    return out, scale, (px, py)


def crop_object(scene: Scene, index: int, rng: Rng | None = None, margin: float = 0.15) -> np.ndarray:
    """Crop object ``index`` with ``margin`` of its size on every side; with ``rng``, jitter it.

    Without rng the crop is what a cascade does (box + fixed margin); with rng, margins and centre
    shift randomly so the classifier does not rely on an exact detector box.
    """
    x1, y1, x2, y2 = (float(v) for v in scene.boxes[index])
    bw, bh = x2 - x1, y2 - y1
    if rng is None:
        ml = mr = mt = mb = margin
    else:
        ml, mr, mt, mb = (float(v) for v in rng.uniform(0.0, 2 * margin, 4))
    h, w = scene.image.shape[:2]
    cx1 = max(0, math.floor(x1 - ml * bw))
    cy1 = max(0, math.floor(y1 - mt * bh))
    cx2 = min(w, math.ceil(x2 + mr * bw))
    cy2 = min(h, math.ceil(y2 + mb * bh))
    return scene.image[cy1:cy2, cx1:cx2].copy()


def scene_size(seed: int) -> tuple[int, int]:
    """Canvas size for training scene ``seed``: mostly square, some 4:3 / 16:9 to train letterboxing."""
    r = np.random.default_rng([seed, 7]).random()
    if r < 0.7:
        return BASE, BASE
    if r < 0.85:
        return BASE, BASE * 3 // 4
    return BASE, BASE * 9 // 16
