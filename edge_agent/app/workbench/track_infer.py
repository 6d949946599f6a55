"""``edge-agent infer DIR_OR_VIDEO --track [--config C] [--save OUT]``: the objects mode offline.

Frames (a folder of images in name order, or a video file) go through the detector, the tracker and
the zone/line rules of ``--config`` (its ``[detector]``: model, labels, thresholds, classes, provider,
threads, unless given on the command line; its ``[tracker]``, ``[[zones]]``, ``[[lines]]``), exactly
as ``[output] mode = "objects"`` would run them on the device. Events are
printed (``--json``: one object per line), and ``--save`` writes every frame annotated with track ids,
zones, lines and the running counts, to check a configuration by eye before deploying it.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Union

from edge_agent.app.cli.argtypes import positive_float
from edge_agent.errors import EdgeAgentError, ImageError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from edge_agent.core.config.schema import Config
    from edge_agent.inference.pipeline import Classifier, Detector

    FrameOrError = Union[npt.NDArray[np.uint8], ImageError]  # BGR image, or why it is not one

VIDEO_SUFFIXES = (".mp4", ".avi", ".mkv", ".mov", ".webm", ".m4v", ".mjpeg", ".mjpg")


def add_track_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--track",
        action="store_true",
        help="track objects across the frames (a folder in name order, or a video) and apply the "
        "zones/lines of --config; with --save: annotated frames",
    )
    p.add_argument(
        "--config",
        "-c",
        metavar="FILE",
        help="with --track: FILE's [detector] (model, thresholds, classes: options given here win), "
        "[tracker], [[zones]], [[lines]]",
    )
    p.add_argument(
        "--camera",
        metavar="ID",
        help="with --track and a --config of [[cameras]]: that camera's zones, lines and classes "
        "(needed when the file has several)",
    )
    p.add_argument(
        "--fps",
        type=positive_float,
        default=10.0,  # source_spec.FOLDER_FPS (not imported: numpy is not loaded for --help)
        help="with --track on images: frame rate (for dwell times; a folder camera's camera.fps)",
    )


class _DefaultFloat(float):
    """An option's default, told apart from the same value typed on the command line."""


class _DefaultInt(int):
    """An option's default, told apart from the same value typed on the command line."""


# infer's option -> the [detector] key --track --config takes when the option is not given
FROM_CONFIG = {
    "model": "model",
    "labels": "labels",
    "conf": "conf_threshold",
    "iou": "iou_threshold",
    "max_det": "max_det",
    "classes": "classes",
    "output_format": "output_format",
    "provider": "provider",
    "threads": "threads",
}


def mark_defaults(p: argparse.ArgumentParser) -> None:
    """Wrap the numeric defaults of the detector options, so :func:`detector_from_config` knows
    which ones the user typed (help still shows them as plain numbers)."""
    for action in p._actions:
        if action.dest in FROM_CONFIG and isinstance(action.default, float):
            action.default = _DefaultFloat(action.default)
        elif action.dest in FROM_CONFIG and isinstance(action.default, int):
            action.default = _DefaultInt(action.default)


def _given(args: argparse.Namespace, dest: str) -> bool:
    value = getattr(args, dest, None)
    return value is not None and not isinstance(value, (_DefaultFloat, _DefaultInt))


def detector_from_config(args: argparse.Namespace) -> None:
    """``infer --track --config F``: F's detector, thresholds and classes, as the service runs them
    (it ran the bundled demo detector at 0.25: the preview showed objects the device never reports).
    Options given on the command line still win."""
    if not (getattr(args, "track", False) and getattr(args, "config", None)):
        return
    from edge_agent.app.cli.configfile import load_config

    d = load_config(args.config).detector
    for dest, key in FROM_CONFIG.items():
        value: object = ",".join(d.classes) or None if key == "classes" else getattr(d, key)
        if key == "model" and not str(value).strip():
            continue  # no [detector] model in the file: the command line's (or the demo)
        if value is not None and not _given(args, dest):
            setattr(args, dest, value)


def _frames(inputs: list[str], fps: float, max_pixels: int) -> Iterator[tuple[str, float, FrameOrError]]:
    """(name, seconds, BGR image or an ImageError) in order."""
    from edge_agent.adapters.camera.images import expand_inputs, read_image

    n = 0
    for path in expand_inputs(inputs):
        if path.suffix.lower() in VIDEO_SUFFIXES:
            yield from _video(path, max_pixels)
            continue
        try:
            img: FrameOrError = read_image(path, max_pixels)
        except ImageError as exc:
            img = exc
        yield path.stem, n / fps, img
        n += 1


def _video(path: Path, max_pixels: int) -> Iterator[tuple[str, float, FrameOrError]]:
    import cv2

    from edge_agent.core.camera.source_spec import video_rate
    from edge_agent.core.vision.image_header import pixel_problem

    cap = cv2.VideoCapture(str(path))
    if not cap.isOpened():
        yield path.stem, 0.0, ImageError(f"{path}: cannot open as a video")
        return
    # the size the container announces, before a frame is decoded (--max-pixels, as for images)
    size = (int(cap.get(cv2.CAP_PROP_FRAME_WIDTH)), int(cap.get(cv2.CAP_PROP_FRAME_HEIGHT)))
    problem = pixel_problem(size, max_pixels)
    if problem is not None:
        cap.release()
        yield path.stem, 0.0, ImageError(f"{path}: frames of {problem}; not decoded")
        return
    rate = video_rate(cap.get(cv2.CAP_PROP_FPS))  # as `run` times a video file (Frame.ts_media)
    i = 0
    try:
        while True:
            ok, img = cap.read()
            if not ok:
                return
            yield f"{path.stem}_{i:06d}", i / rate, img
            i += 1
    finally:
        cap.release()


def run_tracked(
    args: argparse.Namespace,
    inputs: list[str],
    detector: Detector,
    classifier: Optional[Classifier],
    cls_ids: Optional[Sequence[int]],
) -> int:
    """The ``--track`` branch of ``infer``; returns the exit status."""
    from edge_agent.app.agent.objects_step import tracker_params
    from edge_agent.app.cli.configfile import load_config
    from edge_agent.app.workbench.annotate import safe_output_name, save_image
    from edge_agent.app.workbench.annotate_tracks import draw_tracks
    from edge_agent.core.config.schema import Config
    from edge_agent.core.objects.lifecycle import ObjectEvents
    from edge_agent.core.objects.tracker import Tracker
    from edge_agent.core.vision.image_header import DEFAULT_MAX_PIXELS
    from edge_agent.inference.pipeline import run_cascade

    cfg, keep = _camera_scene(load_config(args.config) if args.config else Config(), args, detector)
    if classifier is not None:  # --track shows what objects mode sends: no classification
        sys.stderr.write(
            "edge-agent infer: warning: --classifier is not used with --track: object events and "
            'counts use the detector\'s classes only (as [output] mode = "objects" on a device)\n'
        )
        classifier = None
    tracker = Tracker(tracker_params(cfg))
    events = ObjectEvents(cfg.tracker, cfg.zones, cfg.lines, cfg.output.counts_interval_s, 0.0)
    from edge_agent.adapters.camera.images import expand_inputs

    save_dir = Path(args.save).resolve() if args.save else None
    input_set = {
        p.resolve() for p in expand_inputs(inputs)
    }  # --save into the input folder: never over an input
    if save_dir:
        save_dir.mkdir(parents=True, exist_ok=True)
    labels: dict[int, str] = {}
    used: set[str] = set()
    failures = frames = 0
    last_ts = 0.0
    for name, ts, img in _frames(inputs, args.fps, args.max_pixels or DEFAULT_MAX_PIXELS):
        if isinstance(img, ImageError):
            sys.stderr.write(f"edge-agent infer: error: {img}\n")
            failures += 1
            continue
        frames += 1
        last_ts = ts
        dets, _ = run_cascade(img, detector, classifier, cls_ids, args.crop_padding)
        if keep is not None:  # the camera's classes, as its pipeline keeps them
            dets = [d for d in dets if d.class_id in keep]
        for d in dets:
            labels[d.class_id] = d.label
        tracks = tracker.update(
            [d.box for d in dets], [d.confidence for d in dets], [d.class_id for d in dets]
        )
        h, w = img.shape[:2]
        for ev in events.update(ts, tracks, tracker.removed, (w, h), lambda c: labels.get(c, str(c))):
            _print_event(name, ev, args.json)
        if save_dir:
            shown = [(t.track_id, labels.get(t.class_id, str(t.class_id)), t.box, t.score) for t in tracks]
            pic = draw_tracks(img, shown, cfg.zones, cfg.lines, events.totals, events.occupancy())
            try:
                save_image(safe_output_name(save_dir, name, used, input_set), pic)
            except ImageError as exc:
                sys.stderr.write(f"edge-agent infer: error: {exc}\n")
                failures += 1
    for ev in events.end_all(tracker.end_all(), last_ts):
        _print_event("end", ev, args.json)
    counts = events.take_counts(last_ts)
    summary = {
        "frames": frames,
        "objects": tracker.next_id - 1,
        "lines": counts["lines"],
        "zones": counts["zones"],
    }
    sys.stdout.write(
        json.dumps({"summary": summary}, separators=(",", ":")) + "\n" if args.json else _summary(summary)
    )
    if frames == 0 and failures == 0:
        raise EdgeAgentError(f"no images or video frames found in {', '.join(inputs)}")
    return 1 if failures else 0


def _camera_scene(
    cfg: Config, args: argparse.Namespace, detector: Detector
) -> tuple[Config, Optional[frozenset[int]]]:
    """The config as ``--camera``'s pipeline reads it, and that camera's classes as ids (None: all)."""
    from edge_agent.core.config.cameras import camera_views

    views = camera_views(cfg)
    ids = [v.id for v in views]
    wanted = args.camera
    if wanted is None and len(views) > 1:
        raise EdgeAgentError(
            f"--config {args.config} has cameras {', '.join(ids)}: pick one with --camera ID"
        )
    if wanted is not None and wanted not in ids:
        raise EdgeAgentError(
            f"--camera {wanted!r}: {args.config or 'the default config'} has no such camera "
            f"(its cameras: {', '.join(ids)})"
        )
    view = views[ids.index(wanted)] if wanted is not None else views[0]
    keep = frozenset(detector.class_ids(list(view.classes))) if view.classes else None
    return view.cfg, keep


def _print_event(frame: str, ev: dict[str, Any], as_json: bool) -> None:
    body = {k: v for k, v in ev.items() if not k.startswith("_")}
    if as_json:
        sys.stdout.write(json.dumps({"frame": frame, **body}, separators=(",", ":")) + "\n")
        return
    what: Optional[str] = {
        "line_crossed": f"crossed {body.get('line')} {body.get('direction')}",
        "zone_entered": f"entered {body.get('zone')}",
        "zone_left": f"left {body.get('zone')} after {body.get('dwell_s')} s",
        "ended": f"ended after {body.get('duration_s')} s, best {body.get('best_confidence')}",
    }.get(body["event"], body["event"])
    sys.stdout.write(f"{frame}  #{body['object_id']} {body['label']}  {what}\n")


def _summary(s: dict[str, Any]) -> str:
    parts = [f"{s['frames']} frames, {s['objects']} objects"]
    parts += [f"line {n}: in {c['total_in']} out {c['total_out']}" for n, c in s["lines"].items()]
    parts += [f"zone {n}: entered {c['total_entered']}" for n, c in s["zones"].items()]
    return "; ".join(parts) + "\n"
