"""``edge-agent infer``: run the detector (+ optional classifier) on test images."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Optional, TextIO

from edge_agent.app.cli.argtypes import non_negative_float, positive_int, thread_count, unit_interval
from edge_agent.app.workbench.track_infer import add_track_args, detector_from_config, mark_defaults
from edge_agent.core.vision.defaults import CONF_THRESHOLD, CROP_PADDING, IOU_THRESHOLD, MAX_DET
from edge_agent.errors import EdgeAgentError, ImageError

if TYPE_CHECKING:
    from edge_agent.app.cli.configfile import Subparsers
    from edge_agent.core.vision.results import ImageResult

log = logging.getLogger(__name__)


def add_model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--provider",
        help="execution provider(s) to use, e.g. cpu, xnnpack, cuda, tensorrt (default: per board)",
    )
    p.add_argument("--threads", type=thread_count, help="intra-op threads (default: per board)")


def register(sub: Subparsers) -> None:
    p = sub.add_parser("infer", help="detect (and classify) objects in images", description=__doc__)
    p.add_argument("images", nargs="*", help="image files, folders or globs (default: bundled samples)")
    p.add_argument("--model", "-m", help="detector ONNX (default: bundled demo detector)")
    p.add_argument("--labels", help="labels file overriding the model's class names (one per line)")
    p.add_argument("--classifier", help="classifier ONNX applied to detected crops")
    p.add_argument(
        "--classifier-labels", help="labels file for the classifier: one name per line (e.g. ImageNet's 1000)"
    )
    p.add_argument(
        "--classifier-preprocess",
        metavar="SPEC",
        help="classifier preprocessing: ultralytics, imagenet, raw, or custom "
        "'resize=shorter,crop=0.875,scale=1/255,mean=a:b:c,std=a:b:c,order=RGB,layout=NCHW' "
        "(default: the model's metadata, else a guess `inspect` shows)",
    )
    p.add_argument(
        "--classify-classes", help="comma-separated detector classes whose crops are classified (default all)"
    )
    p.add_argument(
        "--crop-padding",
        type=non_negative_float,
        default=CROP_PADDING,
        help="crop padding as a fraction of box size",
    )
    p.add_argument("--conf", type=unit_interval, default=CONF_THRESHOLD, help="confidence threshold")
    p.add_argument("--iou", type=unit_interval, default=IOU_THRESHOLD, help="NMS IoU threshold")
    p.add_argument(
        "--max-det",
        type=positive_int,
        default=MAX_DET,
        metavar="N",
        help="keep at most N detections per image",
    )
    p.add_argument("--classes", help="comma-separated detector classes to keep (default all)")
    p.add_argument(
        "--output-format",
        metavar="NAME",
        help="force the detector output format (yolov8, yolov5, end2end, rtdetr) instead of "
        "recognising it from the output shape and metadata",
    )
    p.add_argument("--save", metavar="DIR", help="write annotated images to DIR (never over an input)")
    p.add_argument(
        "--max-pixels",
        type=positive_int,  # 0 fell back to the default and -5 refused every image
        default=None,
        metavar="N",
        help="refuse images larger than N pixels, from the header, before decoding (default 40 MP)",
    )
    p.add_argument("--json", action="store_true", help="one JSON object per image on stdout")
    p.add_argument(
        "--mot",
        metavar="FILE",
        help="also write the detections to FILE as MOTChallenge det.txt lines (frame = the image's "
        "place in name order, from 1), the input of `edge-agent track -d FILE`",
    )
    p.add_argument(
        "--sensor",
        metavar="FILE",
        help="run a sensor model (-m, default: the demo sensor model) on a recorded .csv/.jsonl file of "
        "readings, windowed as the agent does; a 'label' column gives the accuracy",
    )
    p.add_argument(
        "--time-field", metavar="KEY", help="--sensor: the column with each reading's time in s (default: t)"
    )
    add_track_args(p)
    add_model_args(p)
    mark_defaults(p)
    p.set_defaults(func=run)


def _split(s: Optional[str]) -> list[str]:
    return [x.strip() for x in s.split(",") if x.strip()] if s else []


def _refuse_saving_into_an_input(save: Optional[str], inputs: list[str]) -> None:
    """``--save`` into a folder an input lives in makes ``bus_1.jpg`` beside ``bus.jpg``, which the
    next run over that folder takes as an input: refused before any model loads."""
    if not save:
        return
    target = Path(save).resolve()
    for given in inputs:
        p = Path(given).resolve()
        folder = p if p.is_dir() else p.parent
        if target == folder:
            raise EdgeAgentError(
                f"--save {save}: is the folder of the input {given}; the annotated images would become "
                "inputs of the next run there: save to another folder (e.g. --save runs/infer)"
            )


def run(args: argparse.Namespace) -> int:
    if args.sensor:
        from edge_agent.app.workbench.infer_sensor import run_sensor

        return run_sensor(args)
    from edge_agent.adapters.camera.images import expand_inputs, read_image
    from edge_agent.adapters.runtime.onnx_model import OnnxModel
    from edge_agent.app.cli.assets import DEMO_DETECTOR, DEMO_DETECTOR_FP32, demo_file, demo_samples
    from edge_agent.core.objects.mot import format_detections
    from edge_agent.core.vision.image_header import DEFAULT_MAX_PIXELS
    from edge_agent.core.vision.results import ImageResult
    from edge_agent.inference.guard import check_detector, describe
    from edge_agent.inference.pipeline import Classifier, Detector, DetectorParams, run_cascade

    _refuse_saving_into_an_input(args.save, args.images or [])
    if args.mot and args.track:
        raise EdgeAgentError(
            "--mot writes detections for `edge-agent track`; with --track the events are the output"
        )
    detector_from_config(args)  # --track --config F: F's detector, thresholds, classes
    model_path = Path(args.model) if args.model else demo_file(DEMO_DETECTOR, DEMO_DETECTOR_FP32)
    det_model = OnnxModel(model_path, provider=args.provider, threads=args.threads, labels=args.labels)
    detector = Detector(det_model, DetectorParams(args.conf, args.iou, args.max_det), args.output_format)
    problems = check_detector(detector)
    if problems:  # still run (the user may be debugging exactly this), but a script must not see success
        sys.stderr.write(
            f"edge-agent infer: error: {describe(model_path, problems)} (the images are run anyway, "
            "to show what it outputs; exit status 1)\n"
        )
    broken = 1 if problems else 0
    if args.classes:
        detector.params.classes = detector.class_ids(_split(args.classes))
    classifier = None
    cls_ids = None
    if args.classifier:
        cm = OnnxModel(
            args.classifier, provider=args.provider, threads=args.threads, labels=args.classifier_labels
        )
        classifier = Classifier(cm, preprocess_option=args.classifier_preprocess)
        if classifier.choice.is_guess:
            sys.stderr.write(
                f"edge-agent infer: warning: {args.classifier}: preprocessing is a guess: "
                f"{classifier.choice.describe()}; set --classifier-preprocess if it is wrong\n"
            )
        if args.classify_classes:
            cls_ids = detector.class_ids(_split(args.classify_classes))
    inputs = args.images or [str(demo_samples())]
    if args.track:  # objects across frames, zones, lines, counts (docs/objects.md)
        from edge_agent.app.workbench.track_infer import run_tracked

        return run_tracked(args, inputs, detector, classifier, cls_ids) or broken
    save_dir = Path(args.save) if args.save else None
    if save_dir:
        if save_dir.exists() and not save_dir.is_dir():
            raise EdgeAgentError(
                f"--save {save_dir}: is a file, expected a folder for the annotated images "
                "(it is never written over)"
            )
        try:
            save_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise EdgeAgentError(
                f"--save {save_dir}: cannot create the folder: {exc.strerror or exc}"
            ) from None
    failures = processed = 0
    used_names: set[str] = set()
    paths = list(expand_inputs(inputs))
    input_set = {p.resolve() for p in paths}
    limit = args.max_pixels or DEFAULT_MAX_PIXELS
    mot: list[str] = []
    for frame, path in enumerate(paths, 1):
        try:
            img = read_image(path, limit)
            dets, timings = run_cascade(img, detector, classifier, cls_ids, args.crop_padding)
        except ImageError as exc:
            sys.stderr.write(f"edge-agent infer: error: {exc}\n")
            failures += 1
            continue
        processed += 1
        mot.extend(format_detections(frame, ((d.box, d.confidence, d.class_id) for d in dets)))
        result = ImageResult(str(path), img.shape[1], img.shape[0], dets, timings)
        if args.json:
            sys.stdout.write(json.dumps(result.to_json(), separators=(",", ":")) + "\n")
        else:
            print_table(result, sys.stdout)
        if save_dir:
            from edge_agent.app.workbench.annotate import draw_detections, safe_output_name, save_image

            target = safe_output_name(save_dir.resolve(), path.stem, used_names, input_set)
            try:
                save_image(target, draw_detections(img, dets))
            except ImageError as exc:
                sys.stderr.write(f"edge-agent infer: error: {exc}\n")
                failures += 1
    sys.stdout.flush()
    if processed == 0 and failures == 0:
        raise EdgeAgentError(f"no images found in {', '.join(inputs)}")
    if args.mot:
        from edge_agent.adapters.host.durable import write_durable

        write_durable(Path(args.mot), "".join(mot).encode(), 0o644)
    return 1 if failures or broken else 0


def print_table(result: ImageResult, out: TextIO) -> None:
    t = result.timings_ms
    timing = " ".join(f"{k} {v:.1f}" for k, v in t.items())
    out.write(
        f"{result.image}  {result.width}x{result.height}  {len(result.detections)} detections  ({timing} ms)\n"
    )
    if not result.detections:
        return
    out.write(f"  {'label':<16} {'conf':>5}  {'x1':>7} {'y1':>7} {'x2':>7} {'y2':>7}  classification\n")
    for d in result.detections:
        x1, y1, x2, y2 = d.box
        cls = f"{d.classification.label} {d.classification.confidence:.2f}" if d.classification else ""
        out.write(f"  {d.label:<16} {d.confidence:5.2f}  {x1:7.1f} {y1:7.1f} {x2:7.1f} {y2:7.1f}  {cls}\n")
