"""The objects-mode test clip: a demo photo with its shapes painted out, real square crops of another
photo pasted at known positions, written as JPEG frames (tests/app/agent/test_objects_e2e.py, infer --track)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from support.clip import REPO, SAMPLES, noisy, paste, real_photo
from support.runner import cli
from support.world import agent_toml

FPS = 10.0
# the line the crossers cross (x = 0.5, upper 60 %) and the zone the dwellers sit in (bottom band)
GEOMETRY = """[[lines]]
name = "gate"
points = [[0.5, 0.0], [0.5, 0.6]]
in_side = "left"
[[zones]]
name = "bay"
polygon = [[0.0, 0.62], [1.0, 0.62], [1.0, 1.0], [0.0, 1.0]]
min_dwell_s = 1.5
"""
W, H = 320, 240


def _label_boxes(n: int) -> list[tuple[int, int, int, int, int]]:
    out = []
    for line in (SAMPLES / "labels" / f"sample_{n}.txt").read_text().split("\n"):
        if line.strip():
            c, cx, cy, bw, bh = map(float, line.split())
            out.append(
                (
                    int(c),
                    int((cx - bw / 2) * W),
                    int((cy - bh / 2) * H),
                    int((cx + bw / 2) * W),
                    int((cy + bh / 2) * H),
                )
            )
    return out


def background() -> np.ndarray:
    """sample_0 with its shapes inpainted away: a real textured frame the detector finds nothing in."""
    img = real_photo("sample_0.jpg")
    mask = np.zeros(img.shape[:2], np.uint8)
    for _, x1, y1, x2, y2 in _label_boxes(0):
        mask[max(0, y1 - 6) : y2 + 6, max(0, x1 - 6) : x2 + 6] = 255
    return cv2.inpaint(img, mask, 5, cv2.INPAINT_TELEA)


def square() -> np.ndarray:
    _, x1, y1, x2, y2 = next(b for b in _label_boxes(5) if b[0] == 1 and b[1] < 100)  # a 49 px square
    return real_photo("sample_5.jpg")[y1 - 3 : y2 + 3, x1 - 3 : x2 + 3]


def make_clip(out: Path) -> dict[str, Any]:
    """Frames as JPEGs in ``out``; returns what must be found."""
    bg, obj = background(), square()
    rng = np.random.default_rng(7)
    frames: list[list[tuple[int, int]]] = []  # per frame: top-left corners of the objects in it

    def blank(n: int) -> None:
        frames.extend([] for _ in range(n))

    xs = list(range(5, 262, 17))  # 16 positions left -> right across the line at x = 160
    for n, direction in enumerate(("in", "out", "in", "out", "in")):
        path = xs if direction == "in" else xs[::-1]
        for k, x in enumerate(path):
            hidden = n == 2 and k in (10, 11)  # the third crosser is hidden just after the line
            frames.append([] if hidden else [(x, 30)])
        blank(6)
    start = len(frames)
    for _ in range(30):  # two objects dwell 30 frames (3.0 s) inside the zone (bottom band)
        frames.append([(40, 170), (200, 170)])
    blank(35)  # the dwellers' tracks end (lost for 30 frames) before the passer-by walks their spot
    for x in range(5, 262, 24):  # a passer-by: 11 frames (1.1 s) through the zone, below the line
        frames.append([(x, 170)])
    blank(40)  # the lost-track buffer (30 frames) runs out: every object ends
    for i, objs in enumerate(frames):
        img = bg
        for x, y in objs:
            img = paste(img, obj, x, y)
        cv2.imwrite(str(out / f"{i:04d}.jpg"), noisy(img, rng, 2.0), [cv2.IMWRITE_JPEG_QUALITY, 92])
    return {"frames": len(frames), "dwell_start": start}


def config(root: Path, cam: Path, mode: str) -> Path:
    """``root/MODE.toml``: the demo detector on the clip ``cam`` at its frame rate, state in
    ``root/MODE``, the gate line and the bay zone."""
    cfg = root / f"{mode}.toml"
    cfg.write_text(
        agent_toml(
            root / mode,
            cam,
            REPO / "models" / "demo-detector.onnx",
            extra=GEOMETRY,
            camera={"fps": FPS},
            detector={"conf_threshold": 0.5},
            queue={"path": str(root / mode / "q.db")},
            output={"mode": mode, "counts_interval_s": 5},
        )
    )
    return cfg


def run_agent(cfg: Path, *args: str) -> list[tuple[str, dict[str, Any], int]]:
    """``edge-agent run`` of ``cfg`` to its end (exit 0), then every message it queued."""
    proc = cli("run", "--config", str(cfg), *args, timeout=180)
    assert proc.returncode == 0, proc.stderr
    db = cfg.parent / cfg.stem / "q.db"
    with sqlite3.connect(db) as con:
        rows = con.execute("SELECT topic, payload, size FROM messages ORDER BY id").fetchall()
    return [(t, json.loads(p), s) for t, p, s in rows]
