"""MOTChallenge text files (pure): detections in, tracks out, every bad line named.

Format (MOT15/16/17 ``det.txt`` / results): ``frame,id,x,y,w,h,conf,...`` one box per line, frames
1-based, boxes as top-left corner + size in pixels. Detections carry id -1; tracks carry their id
and write ``-1,-1,-1`` for the unused 3D columns, which is what TrackEval and motmetrics read.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from typing import Dict, List, Tuple

from edge_agent.errors import EdgeAgentError

MAX_FRAME = 10_000_000  # ~4 days at 30 fps: a larger frame number is a corrupt file, not a video
MAX_COORD = 1e6
MAX_LINES = 20_000_000

Det = Tuple[float, float, float, float, float, int]  # x1, y1, x2, y2, conf, class id


def parse_detections(lines: Iterable[str], source: str) -> Dict[int, List[Det]]:
    """Frame -> detections. A column 8 (MOT16+ class) is taken as the class id when it is a whole
    number >= 0, else class 0. Raises one :class:`EdgeAgentError` naming ``source:line``."""
    out: Dict[int, List[Det]] = {}
    for n, raw in enumerate(lines, 1):
        if n > MAX_LINES:
            raise EdgeAgentError(f"{source}: more than {MAX_LINES} lines; split the sequence")
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        cols = [c.strip() for c in line.split(",")]
        if len(cols) < 7:
            raise EdgeAgentError(
                f"{source}:{n}: {len(cols)} columns, expected at least 7 (frame,id,x,y,w,h,conf)"
            )
        try:
            frame_f = float(cols[0])
            x, y, w, h, conf = (float(c) for c in cols[2:7])
        except ValueError:
            raise EdgeAgentError(
                f"{source}:{n}: {line[:80]!r} is not numbers (frame,id,x,y,w,h,conf)"
            ) from None
        if not frame_f.is_integer() or not 1 <= frame_f <= MAX_FRAME:
            raise EdgeAgentError(
                f"{source}:{n}: frame {cols[0]!r} is not a whole number from 1 to {MAX_FRAME}"
            )
        vals = (x, y, w, h, conf)
        if not all(math.isfinite(v) and abs(v) <= MAX_COORD for v in vals):
            raise EdgeAgentError(
                f"{source}:{n}: a value is not finite or beyond {MAX_COORD:g}: {line[:80]!r}"
            )
        if w <= 0 or h <= 0:
            continue  # an empty box: nothing to track (some detectors write them), not an error
        cls = 0
        if len(cols) >= 8:
            try:
                c = float(cols[7])
                cls = int(c) if c.is_integer() and 0 <= c < 1_000_000 else 0
            except ValueError:
                cls = 0
        out.setdefault(int(frame_f), []).append((x, y, x + w, y + h, conf, cls))
    return out


def format_tracks(
    frame: int, tracks: Iterable[Tuple[int, Tuple[float, float, float, float], float]]
) -> Iterator[str]:
    """MOTChallenge result lines ``frame,id,x,y,w,h,conf,-1,-1,-1`` for one frame."""
    for tid, (x1, y1, x2, y2), conf in tracks:
        yield f"{frame},{tid},{x1:.2f},{y1:.2f},{x2 - x1:.2f},{y2 - y1:.2f},{conf:.3f},-1,-1,-1\n"


def format_detections(
    frame: int, dets: Iterable[Tuple[Tuple[float, float, float, float], float, int]]
) -> Iterator[str]:
    """MOTChallenge ``det.txt`` lines ``frame,-1,x,y,w,h,conf,class`` for one frame: what
    :func:`parse_detections` (``edge-agent track -d``) reads, the class in column 8."""
    for (x1, y1, x2, y2), conf, cls in dets:
        yield f"{frame},-1,{x1:.2f},{y1:.2f},{x2 - x1:.2f},{y2 - y1:.2f},{conf:.4f},{cls}\n"
