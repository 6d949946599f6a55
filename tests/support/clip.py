"""Clips made from real frames (never downloaded): a still scene with sensor noise, and objects (crops
of real photos) walking in and out over a background cropped from a real photo."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "models" / "samples"


def real_photo(name: str = "sample_0.jpg") -> np.ndarray:
    img = cv2.imread(str(SAMPLES / name))
    assert img is not None, name
    return img


def noisy(img: np.ndarray, rng: np.random.Generator, sigma: float = 3.0) -> np.ndarray:
    """Sensor noise: what makes a "still" camera frame never bit-identical to the last."""
    n = rng.normal(0.0, sigma, img.shape)
    return np.clip(img.astype(np.float32) + n, 0, 255).astype(np.uint8)


def static_clip(bg: np.ndarray, n: int, seed: int = 0, sigma: float = 3.0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [noisy(bg, rng, sigma) for _ in range(n)]


def paste(bg: np.ndarray, obj: np.ndarray, x: int, y: int) -> np.ndarray:
    """``obj`` with its top-left at (x, y), clipped to the frame."""
    out = bg.copy()
    h, w = obj.shape[:2]
    bh, bw = bg.shape[:2]
    x0, y0, x1, y1 = max(0, x), max(0, y), min(bw, x + w), min(bh, y + h)
    if x1 > x0 and y1 > y0:
        out[y0:y1, x0:x1] = obj[y0 - y : y1 - y, x0 - x : x1 - x]
    return out


def walk(
    bg: np.ndarray, obj: np.ndarray, y: int, enter: int, stay: int, leave: int, seed: int = 0
) -> tuple[list[np.ndarray], list[tuple[int, int]]]:
    """Empty for ``enter`` frames, the object walks in from the left over ``enter`` frames, stays
    ``stay`` frames, walks out to the right over ``leave`` frames, then empty for ``enter`` frames.
    Returns the frames and the (first, last) frame index where the object is fully in view."""
    rng = np.random.default_rng(seed)
    w = obj.shape[1]
    bw = bg.shape[1]
    mid = (bw - w) // 2
    xs: list[int | None] = [None] * enter
    xs += [int(-w + (mid + w) * (i + 1) / enter) for i in range(enter)]
    xs += [mid] * stay
    xs += [int(mid + (bw - mid) * (i + 1) / leave) for i in range(leave)]
    xs += [None] * enter
    frames = [noisy(bg if x is None else paste(bg, obj, x, y), rng) for x in xs]
    return frames, [(2 * enter - 1, 2 * enter + stay - 1)]
