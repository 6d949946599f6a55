"""``edge-agent track``: run the tracker on MOTChallenge detections, write MOTChallenge tracks.

The tracker of ``[output] mode = "objects"`` with the ``[tracker]`` settings, fed from a file instead
of the camera, so it can be scored offline with TrackEval or motmetrics (tests/bench/bench_mot.py)::

    edge-agent track --detections det.txt -o tracks.txt
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from edge_agent.app.cli.argtypes import non_negative_int, unit_interval
from edge_agent.core.config.schema import TrackerConfig
from edge_agent.errors import EdgeAgentError

if TYPE_CHECKING:
    from edge_agent.app.cli.configfile import Subparsers

_CFG = TrackerConfig()  # the flags default to the [tracker] config's defaults


def register(sub: Subparsers) -> None:
    p = sub.add_parser("track", help="track MOTChallenge detections offline", description=__doc__)
    p.add_argument(
        "--detections", "-d", required=True, help="MOTChallenge det.txt (frame,-1,x,y,w,h,conf,...)"
    )
    p.add_argument("--output", "-o", required=True, help="tracks file to write (MOTChallenge)")
    p.add_argument("--high", type=unit_interval, default=_CFG.high, help="first-association score threshold")
    p.add_argument(
        "--low", type=unit_interval, default=_CFG.low, help="lowest score still used (second association)"
    )
    p.add_argument(
        "--new-track", type=unit_interval, default=_CFG.new_track, help="score needed to start a track"
    )
    p.add_argument(
        "--match-iou", type=unit_interval, default=_CFG.match_iou, help="IoU gate of the first association"
    )
    p.add_argument(
        "--lost-frames", type=non_negative_int, default=_CFG.lost_frames, help="frames a lost track is kept"
    )
    p.add_argument("--per-class", action="store_true", help="match only within a class (column 8)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from edge_agent.core.objects.mot import format_tracks, parse_detections
    from edge_agent.core.objects.tracker import Tracker, TrackerParams

    src = Path(args.detections)
    try:
        with src.open(encoding="utf-8", errors="strict") as f:
            dets = parse_detections(f, str(src))
    except OSError as exc:
        raise EdgeAgentError(f"{src}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise EdgeAgentError(f"{src}: not UTF-8 text (a MOTChallenge det.txt is CSV text)") from None
    params = TrackerParams(
        high=args.high,
        low=args.low,
        new_track=args.new_track,
        match_iou=args.match_iou,
        lost_frames=args.lost_frames,
        per_class=args.per_class,
    )
    tracker = Tracker(params)
    out = Path(args.output)
    last = max(dets) if dets else 0
    t0 = time.perf_counter()
    try:
        with out.open("w", encoding="utf-8") as f:
            for frame in range(1, last + 1):
                fd = dets.get(frame, [])
                tracks = tracker.update([d[:4] for d in fd], [d[4] for d in fd], [d[5] for d in fd])
                f.writelines(format_tracks(frame, ((t.track_id, t.box, t.score) for t in tracks)))
    except OSError as exc:
        raise EdgeAgentError(f"{out}: cannot write: {exc.strerror or exc}") from None
    ms = (time.perf_counter() - t0) * 1e3 / max(last, 1)
    sys.stderr.write(f"{last} frames, {tracker.next_id - 1} tracks, {ms:.3f} ms/frame -> {out}\n")
    return 0
