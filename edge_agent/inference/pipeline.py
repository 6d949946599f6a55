"""Detector, classifier and their cascade: the pure core wired to an :class:`OnnxModel`.

Used by ``infer``, ``bench``, ``validate`` and the agent loop, so timings are measured the same
way everywhere: ``pre`` (letterbox + blob), ``infer`` (``session.run``), ``post`` (decode + NMS).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
import numpy.typing as npt

from edge_agent.adapters.runtime.onnx_model import OnnxModel
from edge_agent.core.camera.source_spec import Frame
from edge_agent.core.vision.classify import Classification, to_probabilities, top_k
from edge_agent.core.vision.defaults import CONF_THRESHOLD, CROP_PADDING, IOU_THRESHOLD, MAX_DET
from edge_agent.core.vision.formats import decode_output
from edge_agent.core.vision.preprocess import (
    ClassifierPreprocess,
    Letterbox,
    preprocess_classifier,
    preprocess_detector,
    rect_size,
)
from edge_agent.core.vision.results import Detection, to_detection_list
from edge_agent.core.vision.yolo import Detections
from edge_agent.errors import ModelError
from edge_agent.inference.preset_choice import choose_preprocess
from edge_agent.inference.task import detector_format, score_refusal

log = logging.getLogger(__name__)


@dataclass
class DetectorParams:
    conf_threshold: float = CONF_THRESHOLD
    iou_threshold: float = IOU_THRESHOLD
    max_det: int = MAX_DET
    classes: Optional[list[int]] = None


@dataclass(frozen=True)
class Prepared:
    blob: npt.NDArray[np.generic]
    letterbox: Letterbox
    pre_ms: float


class PrepRing:
    """Preprocessing buffers for one thread's frames: one being inferred, one waiting, one being
    filled (a prefetch thread that waits for its hand-off to be taken needs two). Each camera's
    prefetch thread has its own: with one ring shared by several cameras a frame was overwritten by
    another camera's while it waited or was being inferred (tests/app/agent/test_agent_cameras.py,
    own_pixels). Not thread-safe by design."""

    def __init__(self, size: int = 3) -> None:
        self.size = size
        self._hw: Optional[tuple[int, int]] = None
        self._bufs: list[tuple[npt.NDArray[np.uint8], npt.NDArray[np.float32]]] = []
        self._pos = 0

    def take(self, hw: tuple[int, int]) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.float32]]:
        """The next pair (canvas, blob) for an input of ``hw``; new buffers when the input changed."""
        if hw != self._hw:
            h, w = self._hw = hw
            self._bufs = [
                (np.empty((h, w, 3), np.uint8), np.empty((1, 3, h, w), np.float32)) for _ in range(self.size)
            ]
        pair = self._bufs[self._pos]
        self._pos = (self._pos + 1) % self.size
        return pair


@dataclass
class DetectOutput:
    detections: Detections
    timings_ms: dict[str, float] = field(default_factory=dict)
    raw: Optional[npt.NDArray[np.generic]] = None
    max_score: float = float("nan")  # this frame's best score, whatever the threshold


class Detector:
    """A detector in one of the formats of :mod:`edge_agent.core.vision.formats` (the one ``output_format``
    names, else the one its output shape and metadata say); refuses anything else at load."""

    def __init__(
        self,
        model: OnnxModel,
        params: Optional[DetectorParams] = None,
        output_format: Optional[str] = None,
        rect: bool = True,
    ) -> None:
        self.model = model
        self.params = params or DetectorParams()
        self.input_hw = model.input_hw()
        self.format = detector_format(model, output_format)
        # a model with dynamic H/W gets the smallest stride-multiple rectangle holding the letterboxed
        # image, as Ultralytics feeds it (less padding, less work); ``rect=False`` keeps the square
        # input_hw (the camera loop: one shape per run, so several cameras batch in one session.run)
        spatial = model.input.shape[2:4] if len(model.input.shape) == 4 else (1, 1)
        dynamic_hw = not all(isinstance(d, int) and d > 0 for d in spatial)
        self.rect = rect and dynamic_hw and not self.format.fmt.stretch_input
        self.stride = model.info.stride or 32
        if model.info.task and model.info.task not in ("detect",):
            raise ModelError(
                f"{model.path}: metadata says task '{model.info.task}', expected a 'detect' model"
            )
        self.num_classes = self.format.num_classes
        self.dtype = model.input.dtype
        # best score of the last frame, whatever the threshold: the loop's "cannot score" watch
        self.last_max_score = float("nan")
        self._ring = PrepRing()  # prepare()'s own, for callers on one thread
        if not model.info.names and self.num_classes:
            model.info.names = {i: f"class{i}" for i in range(self.num_classes)}
        elif self.num_classes and len(model.info.names) != self.num_classes:
            # a labels file for another model, or stale metadata: results would carry wrong names
            log.warning(
                "%s: %d class names but the output has %d classes; unnamed ones are reported as their id",
                model.path,
                len(model.info.names),
                self.num_classes,
            )

    @property
    def names(self) -> dict[int, str]:
        return self.model.info.names

    @property
    def decode_target(self) -> Optional[tuple[int, int]]:
        """What a camera may decode/resize its frames down to (``Camera.decode_target``): the input
        for a letterboxed model; None for one fed the frame stretched (RT-DETR), whose every axis
        needs the input's size, which a frame shrunk to the letterbox shape would not keep."""
        return None if self.format.fmt.stretch_input else self.input_hw

    def class_ids(self, labels: Sequence[str]) -> list[int]:
        """Class names (or numeric ids) -> ids, with an error naming an unknown one."""
        by_name = {v: k for k, v in self.names.items()}
        ids = []
        for lab in labels:
            if lab in by_name:
                ids.append(by_name[lab])
            elif lab.isascii() and lab.isdigit() and int(lab) in self.names:
                ids.append(int(lab))
            else:
                known = ", ".join(list(by_name)[:20])
                raise ModelError(f"{self.model.path}: unknown class '{lab}' (model classes: {known}...)")
        return ids

    def prepare(self, image_bgr: npt.NDArray[np.uint8], ring: Optional[PrepRing] = None) -> Prepared:
        """Preprocessing alone, so a loop can run it on another thread while the model infers.

        Buffers come from ``ring`` (the detector's own when None): a ring of three, so a caller
        keeping more than two Prepared of one ring alive must copy; each preparing thread needs its
        own ring (several cameras: one per camera).
        """
        t0 = time.perf_counter()
        hw = rect_size(image_bgr.shape[:2], self.input_hw, self.stride) if self.rect else self.input_hw
        canvas, blob = (ring or self._ring).take(hw)
        out_blob = blob if np.dtype(self.dtype) == np.float32 else None
        tensor, lb = preprocess_detector(
            image_bgr, hw, self.dtype, canvas, out_blob, stretch=self.format.fmt.stretch_input
        )
        return Prepared(tensor, lb, (time.perf_counter() - t0) * 1e3)

    def detect_prepared(self, prep: Prepared, keep_raw: bool = False) -> DetectOutput:
        t1 = time.perf_counter()
        raw = self.model.run_single(prep.blob)[0]
        return self._decode(raw, prep, (time.perf_counter() - t1) * 1e3, keep_raw)

    def detect_batch(self, preps: Sequence[Prepared]) -> list[DetectOutput]:
        """Frames of several cameras in one ``session.run`` (a dynamic batch axis only: the caller
        checks ``model.dynamic_batch``); each frame's ``infer`` time is its share of the run."""
        if len(preps) == 1 or len({p.blob.shape for p in preps}) > 1:  # rect inputs of other sizes
            return [self.detect_prepared(p) for p in preps]
        t1 = time.perf_counter()
        raw = self.model.run_single(np.concatenate([p.blob for p in preps]))[0]
        share = (time.perf_counter() - t1) * 1e3 / len(preps)
        if len(raw) != len(preps):
            raise ModelError(f"{self.model.path}: {len(preps)} frames in, an output of batch {len(raw)} out")
        return [self._decode(raw[i : i + 1], p, share, False) for i, p in enumerate(preps)]

    def _decode(
        self, raw: npt.NDArray[np.generic], prep: Prepared, infer_ms: float, keep_raw: bool
    ) -> DetectOutput:
        t2 = time.perf_counter()
        p = self.params
        fmt = self.format
        if self.rect:  # normalised boxes (end2end 0..1) scale by the input this frame had
            fmt = dataclasses.replace(fmt, input_hw=(int(prep.blob.shape[-2]), int(prep.blob.shape[-1])))
        try:
            dets, best = decode_output(
                raw, fmt, prep.letterbox, p.conf_threshold, p.iou_threshold, p.max_det, p.classes
            )
        except ValueError as exc:
            raise ModelError(f"{self.model.path}: {exc}") from None
        wrong = score_refusal(self.model.path, self.format.fmt.name, best)
        if wrong:  # a seg/pose head or logits read as scores: every detection would be a lie
            raise ModelError(wrong)
        self.last_max_score = best
        ms = {"pre": prep.pre_ms, "infer": infer_ms, "post": (time.perf_counter() - t2) * 1e3}
        return DetectOutput(dets, ms, raw if keep_raw else None, best)

    def detect(self, image_bgr: npt.NDArray[np.uint8], keep_raw: bool = False) -> DetectOutput:
        return self.detect_prepared(self.prepare(image_bgr), keep_raw)


def classifier_preprocess_for(model: OnnxModel, option: Optional[str] = None) -> ClassifierPreprocess:
    """The preprocessing ``model`` gets (see :func:`edge_agent.inference.preset_choice.choose_preprocess`)."""
    return choose_preprocess(model, option).pp


class Classifier:
    """An image classifier; batches crops when the model's batch axis is dynamic."""

    def __init__(
        self,
        model: OnnxModel,
        preprocess: Optional[ClassifierPreprocess] = None,
        top_k: int = 1,
        preprocess_option: Optional[str] = None,
    ) -> None:
        self.model = model
        out = model.info.outputs[0]
        if len(out.shape) != 2:
            raise ModelError(
                f"{model.path}: output '{out.name}' has shape {list(out.shape)}; expected classifier scores [N, classes]"
            )
        self.choice = choose_preprocess(model, preprocess_option)
        self.pp = preprocess or self.choice.pp
        self.k = top_k
        self.dtype = model.input.dtype
        if not model.info.names and isinstance(out.shape[1], int):
            model.info.names = {i: f"class{i}" for i in range(out.shape[1])}

    def classify(self, images_bgr: list[npt.NDArray[np.uint8]]) -> list[list[Classification]]:
        if not images_bgr:
            return []
        batches = [images_bgr] if self.model.dynamic_batch else [[img] for img in images_bgr]
        results: list[list[Classification]] = []
        for batch in batches:
            tensor = preprocess_classifier(batch, self.pp, self.dtype)
            scores = self.model.run_single(tensor)[0]
            results.extend(top_k(to_probabilities(np.asarray(scores)), self.model.info.names, self.k))
        return results


def crop_boxes(
    image_bgr: npt.NDArray[np.uint8], boxes: npt.NDArray[np.float32], padding: float
) -> list[npt.NDArray[np.uint8]]:
    """Crops of ``boxes`` grown by ``padding`` x their size on each side, clipped to the image."""
    h, w = image_bgr.shape[:2]
    crops = []
    for x1, y1, x2, y2 in boxes:
        pw, ph = (x2 - x1) * padding, (y2 - y1) * padding
        # at least one pixel, even for a degenerate box clipped onto the image border
        a = min(w - 1, max(0, int(np.floor(x1 - pw))))
        b = min(h - 1, max(0, int(np.floor(y1 - ph))))
        c = max(a + 1, min(w, int(np.ceil(x2 + pw))))
        d = max(b + 1, min(h, int(np.ceil(y2 + ph))))
        crops.append(image_bgr[b:d, a:c])
    return crops


def run_cascade(
    image_bgr: npt.NDArray[np.uint8],
    detector: Detector,
    classifier: Optional[Classifier] = None,
    classify_classes: Optional[Sequence[int]] = None,
    padding: float = CROP_PADDING,
    prepared: Optional[Prepared] = None,
) -> tuple[list[Detection], dict[str, float]]:
    """Detect (from ``prepared`` when the caller preprocessed already), then classify the crops
    of the chosen detector classes (all when None)."""
    out = detector.detect_prepared(prepared or detector.prepare(image_bgr))
    return classify_crops(image_bgr, out, detector, classifier, classify_classes, padding)


def classify_crops(
    image_bgr: npt.NDArray[np.uint8],
    out: DetectOutput,
    detector: Detector,
    classifier: Optional[Classifier] = None,
    classify_classes: Optional[Sequence[int]] = None,
    padding: float = CROP_PADDING,
) -> tuple[list[Detection], dict[str, float]]:
    """The cascade's second half: one frame's detections, its chosen crops classified."""
    dets = to_detection_list(out.detections, detector.names)
    timings = dict(out.timings_ms)
    if classifier is not None and dets:
        t0 = time.perf_counter()
        chosen = [i for i, d in enumerate(dets) if classify_classes is None or d.class_id in classify_classes]
        if chosen:
            crops = crop_boxes(image_bgr, out.detections.boxes[chosen], padding)
            for i, top in zip(chosen, classifier.classify(crops)):
                d = dets[i]
                dets[i] = Detection(d.label, d.class_id, d.confidence, d.box, top[0])
        timings["classify"] = (time.perf_counter() - t0) * 1e3
    return dets, timings


def infer_frame(
    frame: Frame,
    detector: Detector,
    classifier: Optional[Classifier] = None,
    classify_classes: Optional[Sequence[int]] = None,
    padding: float = CROP_PADDING,
    prepared: Optional[Prepared] = None,
) -> tuple[list[Detection], dict[str, float]]:
    """:func:`run_cascade` on one camera frame, boxes in pixels of the frame *as the camera sent it*.

    A JPEG source may decode a frame at 1/2..1/8 scale (``Camera.decode_target``: libjpeg DCT
    scaling, far cheaper than a full decode and a resize), a video source resize it to the
    letterbox size right after decoding (core/camera/decode_size.py); the detector then sees the
    small image and its boxes are scaled back here, so every consumer gets full-size coordinates."""
    dets, timings = run_cascade(frame.image, detector, classifier, classify_classes, padding, prepared)
    return to_full_scale(dets, frame.full_scale()), timings


def infer_frames(
    frames: Sequence[Frame],
    prepared: Sequence[Prepared],
    detector: Detector,
    classifier: Optional[Classifier] = None,
    classify_classes: Optional[Sequence[int]] = None,
    padding: float = CROP_PADDING,
) -> list[tuple[list[Detection], dict[str, float], float]]:
    """:func:`infer_frame` for frames of several cameras, detected in one run: per frame its
    detections (full-frame pixels), timings and best score."""
    out = []
    for frame, o in zip(frames, detector.detect_batch(prepared)):
        dets, timings = classify_crops(frame.image, o, detector, classifier, classify_classes, padding)
        out.append((to_full_scale(dets, frame.full_scale()), timings, o.max_score))
    return out


def to_full_scale(dets: list[Detection], scale: tuple[float, float]) -> list[Detection]:
    """Boxes of a reduced-scale decode back to the full frame (``scale`` = ``Frame.full_scale()``)."""
    sx, sy = scale
    if (sx, sy) == (1.0, 1.0):
        return dets
    return [
        dataclasses.replace(d, box=(d.box[0] * sx, d.box[1] * sy, d.box[2] * sx, d.box[3] * sy)) for d in dets
    ]
