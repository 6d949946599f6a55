"""The guard's rules pinned where mutation testing found them loose: the exact cause line (scale
and representable levels) for coarse, borderline and fine output scales; problems joined in one
line; a model file gone after loading (the static check is skipped, the probe still runs); the
probe image is deterministic, textured, holds filled shapes and is the same picture on every build."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest
from support.models import make_format_detector

from edge_agent.adapters.runtime.onnx_model import OnnxModel
from edge_agent.inference.guard import FIX, MAX_SCORE_STEP, Problem, check_detector, describe, probe_image
from edge_agent.inference.pipeline import Detector


@pytest.mark.parametrize(
    ("scale", "causes"),
    [
        (
            8.0,
            [
                "output 'output0' is INT8-quantized with scale 8: scores in (0,1) have 0 representable level(s)"
            ],
        ),
        (
            1.0,
            [
                "output 'output0' is INT8-quantized with scale 1: scores in (0,1) have 1 representable level(s)"
            ],
        ),
        (
            0.0625,
            [
                "output 'output0' is INT8-quantized with scale 0.0625: scores in (0,1) have 16 representable level(s)"
            ],
        ),
        (0.03125, []),  # finer than MAX_SCORE_STEP: fine
    ],
)
def test_the_static_check_names_scale_and_levels(tmp_path: Path, scale: float, causes: list[str]) -> None:
    det = Detector(OnnxModel(make_format_detector(tmp_path / "m.onnx", output_scale=scale)))
    got = [p.cause for p in check_detector(det) if "probe" not in p.cause]
    assert got == [f"{c} (needs a step <= {MAX_SCORE_STEP})" for c in causes]


def test_problems_are_one_line_joined_by_and() -> None:
    line = describe(Path("m.onnx"), [Problem("a"), Problem("b", fix="do b")])
    assert line == f"m.onnx: cannot produce detection scores: a and b; fix: {FIX}; or do b"
    # the static check and the probe share their fix: it is printed once (issue 22)
    line = describe(Path("m.onnx"), [Problem("a"), Problem("c")])
    assert line == f"m.onnx: cannot produce detection scores: a and c; fix: {FIX}"


def test_a_model_file_gone_after_loading_is_still_probed(tmp_path: Path) -> None:
    good = Detector(OnnxModel(make_format_detector(tmp_path / "good.onnx")))
    zero = Detector(OnnxModel(make_format_detector(tmp_path / "zero.onnx", score_gain=0.0)))
    (tmp_path / "good.onnx").unlink()
    (tmp_path / "zero.onnx").unlink()
    assert check_detector(good) == []
    assert [p.cause for p in check_detector(zero)] == ["every class score is 0 on the probe image (best 0)"]


def _uniform_pixels(img: np.ndarray) -> int:
    """Pixels equal to their 4 neighbours in every channel: filled shapes, never blurred noise."""
    c = img[1:-1, 1:-1]
    same = (
        (c == img[:-2, 1:-1]).all(-1)
        & (c == img[2:, 1:-1]).all(-1)
        & (c == img[1:-1, :-2]).all(-1)
        & (c == img[1:-1, 2:]).all(-1)
    )
    return int(same.sum())


def test_the_probe_image_is_deterministic_textured_and_has_filled_shapes() -> None:
    img = probe_image()
    assert img.shape == (480, 640, 3) and img.dtype == np.uint8
    assert np.array_equal(img, probe_image())  # the same verdict on every start
    assert not np.array_equal(img, probe_image(seed=1))
    assert 25.0 < float(img.std()) < 60.0  # texture and shapes, not flat
    # 8 filled shapes (rectangles 20..160 px, circles r 10..60) cover ~1/6 of the frame
    assert 30_000 < _uniform_pixels(img) < 120_000
    assert probe_image(240, 320).shape == (240, 320, 3)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_the_probe_image_holds_both_round_and_rectangular_filled_shapes(seed: int) -> None:
    """Detectors key on different shapes; a probe that lost its circles (or its rectangles) is
    a weaker check, whatever its pixel count."""
    img = probe_image(seed=seed)
    c = img[1:-1, 1:-1]
    flat = (
        (c == img[:-2, 1:-1]).all(-1)
        & (c == img[2:, 1:-1]).all(-1)
        & (c == img[1:-1, :-2]).all(-1)
        & (c == img[1:-1, 2:]).all(-1)
    )
    _, _, stats, _ = cv2.connectedComponentsWithStats(flat.astype(np.uint8), connectivity=4)
    round_, square = 0, 0
    for _x, _y, w, h, area in stats[1:]:
        if area < 150:
            continue
        fill = area / (w * h)
        round_ += int(0.68 < fill < 0.82 and abs(w - h) <= 2)  # a disc fills pi/4 of its box
        square += int(fill > 0.99)
    assert round_ >= 3 and square >= 3, (round_, square)


# seed 0's shapes, in drawing order: (colour BGR, bounding box x1, y1, x2, y2 of its visible
# pixels (exclusive), visible area). The first disc is partly under the second rectangle.
PROBE_SHAPES = [
    ((255, 182, 245), (251, 366, 288, 425), 1743),
    ((20, 41, 127), (198, 345, 251, 472), 6731),
    ((207, 4, 77), (36, 118, 73, 155), 1009),
    ((40, 22, 252), (188, 155, 325, 305), 20550),
    ((118, 64, 80), (375, 152, 494, 270), 10752),
    ((116, 107, 225), (486, 242, 604, 269), 2821),
    ((128, 10, 177), (475, 55, 560, 140), 5525),
    ((134, 226, 72), (427, 264, 559, 294), 3960),
]


def test_the_probe_image_is_the_same_picture_on_every_board_and_release() -> None:
    """The probe decides whether a model loads, and its best score is the figure the update gate
    reports (``candidate_max_score``): a probe that changes between releases or boards changes the
    verdict on an unchanged model. Pinned where every build draws the same: the 8 shapes (exact
    colours, drawn after the blur: where they sit, their sizes, which one covers which) and the
    texture's strength with a tolerance (the blur's rounding may differ on the ARM wheels)."""
    img = probe_image()
    flat = np.zeros(img.shape[:2], bool)
    got = []
    for colour, _box, _area in PROBE_SHAPES:
        mask = (img == np.array(colour, np.uint8)).all(-1)
        flat |= mask
        _, _, stats, _ = cv2.connectedComponentsWithStats(mask.astype(np.uint8), connectivity=4)
        x, y, w, h, area = (int(v) for v in stats[1 + int(np.argmax(stats[1:, 4]))])
        got.append((colour, (x, y, x + w, y + h), area))
    assert got == PROBE_SHAPES
    # blurred uniform noise: OpenCV's 5x5 kernel (sigma 1.1) leaves a std of 20.3 (sigma 1: 21.4)
    assert float(img[~flat].std()) == pytest.approx(20.33, abs=0.25)
