"""The committed demo models: documented I/O and metadata, manifest hashes, and real detections.

Decoding is plain numpy here on purpose (independent of edge_agent's own decode module), so these
tests pin the YOLOv8 output contract itself: output0 [1, 4 + nc, N] with (cx, cy, w, h) in input
pixels followed by sigmoid class scores.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import json
from pathlib import Path
from types import ModuleType

import cv2
import numpy as np
import onnxruntime as ort
import pytest

MODELS = Path(__file__).resolve().parents[2] / "models"
DET = MODELS / "demo-detector.onnx"
CLS = MODELS / "demo-classifier.onnx"
HELDOUT = MODELS / "data" / "heldout"
DET_NAMES = {0: "circle", 1: "square", 2: "triangle"}
CLS_NAMES = {0: "solid", 1: "striped", 2: "dotted", 3: "outlined"}
N_ANCHORS = 20 * 20 + 10 * 10 + 5 * 5  # strides 8/16/32 at 160 px


def _session(path: Path) -> ort.InferenceSession:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


@pytest.fixture(scope="module")
def det() -> ort.InferenceSession:
    return _session(DET)


@pytest.fixture(scope="module")
def cls() -> ort.InferenceSession:
    return _session(CLS)


def _imread(path: Path) -> np.ndarray:
    img = cv2.imread(str(path))
    assert img is not None, f"cannot read {path}"
    return np.asarray(img)


def _letterbox(bgr: np.ndarray, size: int = 160) -> tuple[np.ndarray, float, tuple[int, int]]:
    h, w = bgr.shape[:2]
    scale = min(size / w, size / h)
    nw, nh = round(w * scale), round(h * scale)
    canvas = np.full((size, size, 3), 114, np.uint8)
    px, py = (size - nw) // 2, (size - nh) // 2
    canvas[py : py + nh, px : px + nw] = cv2.resize(bgr, (nw, nh), interpolation=cv2.INTER_LINEAR)
    x = canvas[:, :, ::-1].transpose(2, 0, 1)[None].astype(np.float32) / 255.0
    return np.ascontiguousarray(x), scale, (px, py)


def _iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    lt = np.maximum(a[:, None, :2], b[None, :, :2])
    rb = np.minimum(a[:, None, 2:], b[None, :, 2:])
    inter = np.prod(np.clip(rb - lt, 0, None), axis=2)
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    return np.asarray(inter / (area_a[:, None] + area_b[None] - inter))


def _detect(sess: ort.InferenceSession, bgr: np.ndarray, conf: float = 0.25) -> tuple[np.ndarray, np.ndarray]:
    """Letterbox -> run -> (cx,cy,w,h) to xyxy -> threshold -> greedy per-class NMS 0.5 -> original px."""
    x, scale, (px, py) = _letterbox(bgr)
    out = sess.run(None, {"images": x})[0][0].T
    scores, classes = out[:, 4:].max(1), out[:, 4:].argmax(1)
    ok = scores > conf
    c, s, k = out[ok, :4], scores[ok], classes[ok]
    boxes = np.concatenate([c[:, :2] - c[:, 2:] / 2, c[:, :2] + c[:, 2:] / 2], 1)
    boxes = (boxes - [px, py, px, py]) / scale
    keep: list[int] = []
    for i in np.argsort(-s):
        if all(k[j] != k[i] or _iou(boxes[[i]], boxes[[j]])[0, 0] < 0.5 for j in keep):
            keep.append(int(i))
    return boxes[keep], k[keep]


def _labels(path: Path, w: int, h: int) -> tuple[np.ndarray, np.ndarray]:
    rows = np.loadtxt(path, ndmin=2)
    cx, cy, bw, bh = rows[:, 1] * w, rows[:, 2] * h, rows[:, 3] * w, rows[:, 4] * h
    return np.stack([cx - bw / 2, cy - bh / 2, cx + bw / 2, cy + bh / 2], 1), rows[:, 0].astype(int)


def _matches(sess: ort.InferenceSession, image: Path, labels: Path) -> tuple[int, int, int]:
    """(labelled objects, found with right class and IoU >= 0.5, detections) for one image."""
    bgr = _imread(image)
    gt_boxes, gt_cls = _labels(labels, bgr.shape[1], bgr.shape[0])
    boxes, classes = _detect(sess, bgr)
    if len(boxes) == 0:
        return len(gt_cls), 0, 0
    ious = _iou(gt_boxes, boxes) * (gt_cls[:, None] == classes[None, :])
    return len(gt_cls), int((ious.max(1) >= 0.5).sum()), len(boxes)


def _meta(sess: ort.InferenceSession) -> dict[str, str]:
    return dict(sess.get_modelmeta().custom_metadata_map)


@pytest.mark.arm_smoke
def test_detector_io_and_metadata(det: ort.InferenceSession) -> None:
    (inp,), (out,) = det.get_inputs(), det.get_outputs()
    assert (inp.name, inp.shape, inp.type) == ("images", [1, 3, 160, 160], "tensor(float)")
    assert (out.name, out.shape) == ("output0", [1, 4 + 3, N_ANCHORS])
    meta = _meta(det)
    assert ast.literal_eval(meta["names"]) == DET_NAMES
    assert (meta["task"], meta["imgsz"], meta["stride"]) == ("detect", "[160, 160]", "32")
    assert (meta["author"], meta["license"]) == ("edge-agent", "Apache-2.0")
    assert meta["version"] and meta["description"]


@pytest.mark.arm_smoke
def test_classifier_io_metadata_and_dynamic_batch(cls: ort.InferenceSession) -> None:
    (inp,), (out,) = cls.get_inputs(), cls.get_outputs()
    assert inp.name == "images" and inp.shape[1:] == [3, 64, 64] and isinstance(inp.shape[0], str)
    assert out.name == "output0" and out.shape[1:] == [4] and isinstance(out.shape[0], str)
    meta = _meta(cls)
    assert ast.literal_eval(meta["names"]) == CLS_NAMES
    assert (meta["task"], meta["imgsz"], meta["license"]) == ("classify", "[64, 64]", "Apache-2.0")
    pre = json.loads(meta["preprocess"])
    assert pre["resize"] == "stretch" and pre["color"] == "RGB" and pre["layout"] == "NCHW"
    assert len(pre["mean"]) == 3 and len(pre["std"]) == 3
    logits = cls.run(None, {"images": np.zeros((3, 3, 64, 64), np.float32)})[0]
    assert logits.shape == (3, 4)


def test_models_are_small() -> None:
    assert DET.stat().st_size < 2_000_000 and CLS.stat().st_size < 1_000_000


def _dir_digest(base: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(q for q in base.rglob("*") if q.is_file()):
        h.update(f"{p.relative_to(base).as_posix()} {hashlib.sha256(p.read_bytes()).hexdigest()}\n".encode())
    return h.hexdigest()


def test_manifest_matches_files() -> None:
    manifest = json.loads((MODELS / "MANIFEST.json").read_text())
    assert manifest["license"] == "Apache-2.0"
    for stem in ("demo-detector", "demo-classifier"):
        entry = manifest["models"][stem]
        fp32 = entry["files"]["fp32"]
        data = (MODELS / fp32["path"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == fp32["sha256"], stem
        assert len(data) == fp32["size"]
        assert entry["made"]["seed"] is not None and entry["metrics"]["fp32"]
    for rel, desc in manifest["data"].items():
        assert _dir_digest(MODELS / rel) == desc["sha256"], rel


def test_manifest_metrics_meet_targets_but_are_not_perfect() -> None:
    metrics = json.loads((MODELS / "MANIFEST.json").read_text())["models"]
    det_m = metrics["demo-detector"]["metrics"]["fp32"]
    cls_m = metrics["demo-classifier"]["metrics"]["fp32"]
    assert 0.8 <= det_m["mAP50"] < 1.0 and det_m["mAP50-95"] < det_m["mAP50"]
    assert 0.9 <= cls_m["top1"] < 1.0


@pytest.mark.parametrize("stem", ["heldout_000", "heldout_001", "heldout_002"])
def test_detector_finds_labelled_shapes(det: ort.InferenceSession, stem: str) -> None:
    n_gt, found, n_det = _matches(det, HELDOUT / f"{stem}.jpg", HELDOUT / "labels" / f"{stem}.txt")
    assert found == n_gt, f"{stem}: {found}/{n_gt} labelled shapes found"
    assert n_det <= n_gt + 1


def test_detector_recall_on_heldout_and_letterboxed_samples(det: ort.InferenceSession) -> None:
    stems = [f"heldout_{i:03d}" for i in range(20)]
    pairs = [(HELDOUT / f"{s}.jpg", HELDOUT / "labels" / f"{s}.txt") for s in stems]
    pairs += [
        (p, MODELS / "samples" / "labels" / f"{p.stem}.txt")
        for p in sorted((MODELS / "samples").glob("*.jpg"))
    ]  # 320x240: exercises letterboxing
    totals = np.array([_matches(det, img, lab) for img, lab in pairs]).sum(0)
    assert totals[1] / totals[0] >= 0.8, totals
    assert totals[1] / totals[2] >= 0.8, totals  # precision at conf 0.25


def test_classifier_heldout_top1_matches_manifest(cls: ort.InferenceSession) -> None:
    pre = json.loads(_meta(cls)["preprocess"])
    mean, std = np.array(pre["mean"], np.float32), np.array(pre["std"], np.float32)
    correct = total = 0
    for idx, name in CLS_NAMES.items():
        crops = [_imread(p) for p in sorted((MODELS / "data" / "heldout-cls" / name).glob("*.jpg"))]
        x = np.stack(
            [
                (
                    (cv2.resize(c, (64, 64), interpolation=cv2.INTER_LINEAR)[:, :, ::-1] / 255.0 - mean) / std
                ).transpose(2, 0, 1)
                for c in crops
            ]
        ).astype(np.float32)
        correct += int((cls.run(None, {"images": x})[0].argmax(1) == idx).sum())
        total += len(crops)
    manifest = json.loads((MODELS / "MANIFEST.json").read_text())
    assert abs(correct / total - manifest["models"]["demo-classifier"]["metrics"]["fp32"]["top1"]) < 0.01


def _synth() -> ModuleType:
    spec = importlib.util.spec_from_file_location("demo_synth", MODELS / "synth.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_synth_is_deterministic_and_matches_heldout_labels() -> None:
    synth = _synth()
    a, b = synth.make_scene(3_000_000), synth.make_scene(3_000_000)
    assert np.array_equal(a.image, b.image) and np.array_equal(a.boxes, b.boxes)
    assert not np.array_equal(a.image, synth.make_scene(3_000_001).image)
    boxes, classes = _labels(HELDOUT / "labels" / "heldout_000.txt", 160, 160)
    np.testing.assert_allclose(boxes, a.boxes, atol=1e-3)
    assert classes.tolist() == a.classes.tolist()


@pytest.mark.arm_smoke
def test_arm_smoke_detector_one_inference(det: ort.InferenceSession) -> None:
    x, _, _ = _letterbox(_imread(HELDOUT / "heldout_000.jpg"))
    out = det.run(None, {"images": x})[0]
    assert out.shape == (1, 7, N_ANCHORS) and out.dtype == np.float32
    assert out[0, 4:].max() > 0.5 and out[0, 4:].min() >= 0.0
    assert np.all(out[0, 2:4] >= 0)  # widths/heights are non-negative distances
