"""Training pools and the small on-disk data sets (calibration, held-out, demo samples).

Seeds are disjoint per split (SEEDS) so held-out scenes are never trained on; every split is a pure
function of its seed range, so ``python models/train_demo.py`` rewrites byte-identical JPEGs.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import cv2
import numpy as np
import onnxruntime as ort
from demo_eval import decode, det_input, imread, iou_matrix, session
from synth import BASE, CLASS_NAMES, FILL_NAMES, Scene, crop_object, letterbox, make_scene, scene_size

SEEDS = {
    "det_train": 1_000_000,
    "calib": 2_000_000,
    "heldout": 3_000_000,
    "samples": 4_000_000,
    "cls_train": 5_000_000,
    "calib_cls": 6_000_000,
}
MAX_OBJ = 5
CLS_SIZE = 64
CROP_MARGIN = 0.15  # cascade crop margin (fraction of box size per side), also in the metadata
JPEG_QUALITY = 90


def _jpeg_roundtrip(img: np.ndarray, rng: np.random.Generator | None) -> np.ndarray:
    """Half of the training images get JPEG artefacts like the held-out files and camera frames.

    Without rng: always, at the quality the data folders are written with.
    """
    if rng is not None and rng.random() < 0.5:
        return img
    quality = JPEG_QUALITY if rng is None else int(rng.integers(60, 96))
    ok, buf = cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, quality])
    assert ok
    out = cv2.imdecode(buf, cv2.IMREAD_COLOR)
    assert out is not None
    return np.asarray(out)


def detector_pool(count: int, seed0: int, size: int = BASE) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``count`` letterboxed RGB scenes [K,S,S,3] uint8, boxes [K,MAX_OBJ,4] px, classes (-1 = pad)."""
    images = np.zeros((count, size, size, 3), np.uint8)
    boxes = np.zeros((count, MAX_OBJ, 4), np.float32)
    classes = np.full((count, MAX_OBJ), -1, np.int64)
    for i in range(count):
        seed = seed0 + i
        w, h = scene_size(seed)
        scene = make_scene(seed, w, h, MAX_OBJ)
        img = _jpeg_roundtrip(scene.image, np.random.default_rng([seed, 3]))
        lb, scale, (px, py) = letterbox(img, size)
        images[i] = lb[:, :, ::-1]
        n = len(scene.classes)
        boxes[i, :n] = scene.boxes * scale + np.array([px, py, px, py], np.float32)
        classes[i, :n] = scene.classes
    return images, boxes, classes


def classifier_pool(scenes: int, seed0: int) -> tuple[np.ndarray, np.ndarray]:
    """Jittered crops of every object in ``scenes`` scenes, stretched to 64x64 RGB, with fill labels."""
    crops: list[np.ndarray] = []
    labels: list[int] = []
    for i in range(scenes):
        seed = seed0 + i
        rng = np.random.default_rng([seed, 5])
        side = BASE if rng.random() < 0.7 else int(BASE * 1.5)
        scene = make_scene(seed, side, side, MAX_OBJ)
        scene = Scene(_jpeg_roundtrip(scene.image, rng), scene.boxes, scene.classes, scene.fills)
        for j in range(len(scene.classes)):
            crop = crop_object(scene, j, rng, CROP_MARGIN)
            crops.append(cv2.resize(crop, (CLS_SIZE, CLS_SIZE), interpolation=cv2.INTER_LINEAR)[:, :, ::-1])
            labels.append(int(scene.fills[j]))
    return np.stack(crops), np.array(labels, np.int64)


def _write_jpeg(path: Path, img: np.ndarray, quality: int = JPEG_QUALITY) -> None:
    ok = cv2.imwrite(str(path), img, [cv2.IMWRITE_JPEG_QUALITY, quality])
    if not ok:
        raise OSError(f"cannot write {path}")


def yolo_label_lines(scene: Scene) -> str:
    """``cls cx cy w h`` normalised to the image size, one object per line."""
    h, w = scene.image.shape[:2]
    lines = []
    for (x1, y1, x2, y2), c in zip(scene.boxes.tolist(), scene.classes.tolist()):
        cx, cy, bw, bh = (x1 + x2) / 2 / w, (y1 + y2) / 2 / h, (x2 - x1) / w, (y2 - y1) / h
        lines.append(f"{c} {cx:.6f} {cy:.6f} {bw:.6f} {bh:.6f}")
    return "\n".join(lines) + ("\n" if lines else "")


def _fresh(path: Path) -> Path:
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    return path


def write_datasets(root: Path, n_calib: int = 64, n_heldout: int = 120) -> dict[str, int]:
    """Write calib/, calib-cls/, heldout/ (+labels/), heldout-cls/<fill>/ under root/data."""
    data = root / "data"
    calib = _fresh(data / "calib")
    for i in range(n_calib):
        seed = SEEDS["calib"] + i
        _write_jpeg(calib / f"calib_{i:03d}.jpg", make_scene(seed, *scene_size(seed)).image)
    calib_cls = _fresh(data / "calib-cls")
    crops, _ = _heldout_like_crops(SEEDS["calib_cls"], 24)
    for i, (crop, _fill) in enumerate(crops[:n_calib]):
        _write_jpeg(calib_cls / f"crop_{i:03d}.jpg", crop, 95)
    heldout = _fresh(data / "heldout")
    labels = _fresh(heldout / "labels")
    heldout_cls = _fresh(data / "heldout-cls")
    for name in FILL_NAMES:
        (heldout_cls / name).mkdir()
    n_crops = 0
    for i in range(n_heldout):
        scene = make_scene(SEEDS["heldout"] + i)
        stem = f"heldout_{i:03d}"
        _write_jpeg(heldout / f"{stem}.jpg", scene.image)
        (labels / f"{stem}.txt").write_text(yolo_label_lines(scene))
        # crops come from the decoded JPEG, exactly what a cascade sees after the detector
        seen = Scene(imread(heldout / f"{stem}.jpg"), scene.boxes, scene.classes, scene.fills)
        for j in range(len(scene.classes)):
            crop = crop_object(seen, j, None, CROP_MARGIN)
            _write_jpeg(heldout_cls / FILL_NAMES[int(scene.fills[j])] / f"{stem}_{j}.jpg", crop, 95)
            n_crops += 1
    return {
        "calib": n_calib,
        "calib-cls": min(n_calib, len(crops)),
        "heldout": n_heldout,
        "heldout-cls": n_crops,
    }


def _detects_all(sess: ort.InferenceSession, scene: Scene) -> bool:
    """Every labelled shape found (right class, IoU >= 0.5, score >= 0.25) and nothing else."""
    img = _jpeg_roundtrip(scene.image, None)
    x, scale, pad = det_input(img, BASE)
    boxes, _scores, classes = decode(sess.run(None, {"images": x})[0], scale, pad, conf=0.25)
    if len(boxes) != len(scene.classes):
        return False
    ious = iou_matrix(scene.boxes, boxes) * (scene.classes[:, None] == classes[None, :])
    return bool((ious.max(1) >= 0.5).all())


def write_samples(root: Path, detector: Path | None, count: int = 6, candidates: int = 300) -> list[int]:
    """Demo frames for the README demo: 320x240 "camera" scenes with 3+ shapes of at least 28 px.

    Demo frames should show the detector working, so with ``detector`` only scenes it gets fully
    right are kept (metrics come from data/heldout, never from these); without one, or when too few
    pass (``--quick``), the first plain candidates fill up. Returns the seeds used.
    """
    sess = session(detector) if detector is not None and detector.exists() else None
    plain: list[int] = []
    chosen: list[int] = []
    for seed in range(SEEDS["samples"], SEEDS["samples"] + candidates):
        scene = make_scene(seed, 320, 240)
        sides = np.minimum(scene.boxes[:, 2] - scene.boxes[:, 0], scene.boxes[:, 3] - scene.boxes[:, 1])
        if len(scene.classes) < 3 or sides.min() < 28:
            continue
        plain.append(seed)
        if sess is not None and _detects_all(sess, scene):
            chosen.append(seed)
        if len(chosen) == count:
            break
    chosen += [s for s in plain if s not in chosen][: count - len(chosen)]
    samples = _fresh(root / "samples")
    (samples / "labels").mkdir()
    for i, seed in enumerate(chosen):
        scene = make_scene(seed, 320, 240)
        _write_jpeg(samples / f"sample_{i}.jpg", scene.image)
        (samples / "labels" / f"sample_{i}.txt").write_text(yolo_label_lines(scene))
    return chosen


def _heldout_like_crops(seed0: int, scenes: int) -> tuple[list[tuple[np.ndarray, int]], int]:
    out: list[tuple[np.ndarray, int]] = []
    for i in range(scenes):
        scene = make_scene(seed0 + i)
        out.extend(
            (crop_object(scene, j, None, CROP_MARGIN), int(scene.fills[j])) for j in range(len(scene.classes))
        )
    return out, scenes


def class_names_literal(names: tuple[str, ...]) -> str:
    """Ultralytics' ``names`` metadata: a Python dict literal string."""
    return str(dict(enumerate(names)))


__all__ = [
    "CLASS_NAMES",
    "FILL_NAMES",
    "SEEDS",
    "class_names_literal",
    "classifier_pool",
    "detector_pool",
    "write_datasets",
    "write_samples",
    "yolo_label_lines",
]
