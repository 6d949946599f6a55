"""The result JSON (``infer --json`` lines and the outbox payload) field by field, and the JPEG
snapshot a result may carry: under its byte cap, smaller quality first, then half size."""

from __future__ import annotations

import base64
import json

import cv2
import numpy as np

from edge_agent.core.vision.classify import Classification
from edge_agent.core.vision.results import Detection, ImageResult, to_detection_list
from edge_agent.core.vision.snapshot import encode_snapshot
from edge_agent.core.vision.yolo import Detections


def test_detections_become_named_json_rows() -> None:
    dets = Detections(
        np.array([[1.234, 2.345, 3.456, 4.567], [0, 0, 10, 10]], np.float32),
        np.array([0.9876543, 0.5], np.float32),
        np.array([2, 7], np.int64),
    )
    rows = to_detection_list(dets, {2: "car"})
    assert [(d.label, d.class_id) for d in rows] == [("car", 2), ("7", 7)]
    assert all(isinstance(d.class_id, int) and isinstance(d.confidence, float) for d in rows)
    assert all(isinstance(v, float) for d in rows for v in d.box)
    assert json.loads(json.dumps(rows[0].to_json())) == {
        "label": "car",
        "class_id": 2,
        "confidence": 0.98765,
        "box": [1.23, 2.35, 3.46, 4.57],
    }
    with_cls = Detection("car", 2, 0.5, (0, 0, 1, 1), Classification("red", 0, 0.7777777))
    assert with_cls.to_json()["classification"] == {"label": "red", "confidence": 0.77778}


def test_an_image_result_as_json() -> None:
    r = ImageResult("a.jpg", 640, 480, [Detection("x", 1, 0.5, (0, 0, 1, 1))], {"infer": 1.23456})
    assert r.to_json() == {
        "image": "a.jpg",
        "width": 640,
        "height": 480,
        "detections": [{"label": "x", "class_id": 1, "confidence": 0.5, "box": [0, 0, 1, 1]}],
        "timings_ms": {"infer": 1.235},
    }
    assert ImageResult("b", 1, 2, []).to_json()["timings_ms"] == {}


def _decoded(b64: str) -> tuple[int, np.ndarray]:
    raw = base64.b64decode(b64)
    return len(raw), cv2.imdecode(np.frombuffer(raw, np.uint8), cv2.IMREAD_COLOR)


def test_a_snapshot_fits_its_cap_at_the_best_quality_that_fits() -> None:
    rng = np.random.default_rng(0)
    img = cv2.GaussianBlur(rng.integers(0, 256, (120, 160, 3), dtype=np.uint8), (7, 7), 0)
    sizes = {q: len(cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, q])[1]) for q in (80, 60, 40, 25)}
    assert sizes[80] > sizes[60] > sizes[40] > sizes[25]
    for q in (80, 60, 40, 25):
        n, dec = _decoded(encode_snapshot(img, sizes[q]) or "")
        assert n == sizes[q] and dec.shape == (120, 160, 3), q  # full size, the first quality that fits
    n, dec = _decoded(encode_snapshot(img, sizes[25] - 1) or "")
    assert n < sizes[25] and dec.shape == (60, 80, 3)  # then half size
    half = cv2.resize(img, (80, 60), interpolation=cv2.INTER_AREA)
    assert n == len(cv2.imencode(".jpg", half, [cv2.IMWRITE_JPEG_QUALITY, 80])[1])


def test_three_halvings_at_most_then_no_snapshot() -> None:
    rng = np.random.default_rng(1)
    img = rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)  # noise: every halving shrinks the JPEG
    small = img
    for _ in range(3):
        small = cv2.resize(small, (small.shape[1] // 2, small.shape[0] // 2), interpolation=cv2.INTER_AREA)
    cap = len(cv2.imencode(".jpg", small, [cv2.IMWRITE_JPEG_QUALITY, 25])[1])
    n, dec = _decoded(encode_snapshot(img, cap) or "")
    assert dec.shape == (8, 8, 3) and n == cap
    assert encode_snapshot(img, cap - 1) is None
    one = np.full((1, 3, 3), 128, np.uint8)
    assert _decoded(encode_snapshot(one, 10_000) or "")[1].shape == (1, 3, 3)
    assert _decoded(encode_snapshot(np.full((2, 2, 3), 9, np.uint8), 10_000) or "")[1].shape == (2, 2, 3)


def test_a_halved_snapshot_averages_fine_detail_instead_of_aliasing_it() -> None:
    # 1-pixel black/white columns, odd width: a point-sampling resize turns them into moire bands
    # across the picture; the area average the snapshot promises is an even grey
    img = np.zeros((40, 101, 3), np.uint8)
    img[:, ::2] = 255
    flat = np.full((20, 50, 3), 129, np.uint8)
    cap = len(cv2.imencode(".jpg", flat, [cv2.IMWRITE_JPEG_QUALITY, 80])[1])
    assert len(cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, 25])[1]) > cap
    _, dec = _decoded(encode_snapshot(img, cap) or "")
    assert dec.shape == (20, 50, 3)
    assert float(dec.astype(np.float64).std()) < 4.0  # no bands


def test_a_one_or_two_pixel_side_halves_to_one_pixel_not_more() -> None:
    rng = np.random.default_rng(2)
    for shape, half in (((256, 2, 3), (128, 1, 3)), ((2, 256, 3), (1, 128, 3))):
        img = rng.integers(0, 256, shape, dtype=np.uint8)
        small = cv2.resize(img, (half[1], half[0]), interpolation=cv2.INTER_AREA)
        cap = len(cv2.imencode(".jpg", small, [cv2.IMWRITE_JPEG_QUALITY, 80])[1])
        assert len(cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, 25])[1]) > cap
        n, dec = _decoded(encode_snapshot(img, cap) or "")
        assert dec.shape == half and n == cap, shape
