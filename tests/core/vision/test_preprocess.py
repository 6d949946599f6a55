"""Letterbox and blob conversion against hand-computed placements."""

from __future__ import annotations

import numpy as np
import pytest

from edge_agent.core.vision.preprocess import (
    ClassifierPreprocess,
    letterbox,
    preprocess_classifier,
    preprocess_detector,
    resize_for_classifier,
)


@pytest.mark.arm_smoke
def test_letterbox_wide_image_into_square_pads_top_and_bottom() -> None:
    img = np.full((100, 200, 3), 7, np.uint8)  # h=100, w=200
    out, lb = letterbox(img, (64, 64))
    # r = min(64/100, 64/200) = 0.32 -> 64 x 32 content, 16 rows of padding above and below
    assert out.shape == (64, 64, 3)
    assert (lb.scale_x, lb.scale_y) == (pytest.approx(0.32), pytest.approx(0.32))
    assert (lb.pad_left, lb.pad_top) == (0, 16)
    assert (out[:16] == 114).all() and (out[48:] == 114).all()
    assert (out[16:48] == 7).all()


def test_letterbox_into_non_square_input_uses_each_axis() -> None:
    img = np.full((100, 100, 3), 9, np.uint8)
    out, lb = letterbox(img, (32, 64))  # model input 32 high, 64 wide
    assert out.shape == (32, 64, 3)
    assert (lb.pad_left, lb.pad_top) == (16, 0)
    assert (out[:, :16] == 114).all() and (out[:, 48:] == 114).all() and (out[:, 16:48] == 9).all()


def test_letterbox_tall_image_pads_left_and_right() -> None:
    img = np.zeros((1080, 810, 3), np.uint8)
    out, lb = letterbox(img, (640, 640))
    # r = 640/1080; content 480 x 640; 80 px each side
    assert (lb.pad_left, lb.pad_top) == (80, 0)
    assert lb.scale_x == pytest.approx(480 / 810)
    assert lb.scale_y == pytest.approx(640 / 1080)
    assert (out[:, :80] == 114).all() and (out[:, 80:560] == 0).all()


def test_preprocess_detector_is_rgb_nchw_unit_range_and_model_dtype() -> None:
    img = np.zeros((64, 64, 3), np.uint8)
    img[..., 0] = 255  # pure blue in BGR
    blob, _ = preprocess_detector(img, (64, 64), np.float16)
    assert blob.shape == (1, 3, 64, 64) and blob.dtype == np.float16
    assert float(blob[0, 2].min()) == 1.0  # blue lands in the third (B of RGB) channel
    assert float(blob[0, 0].max()) == 0.0


def test_classifier_shorter_side_resize_then_centre_crop() -> None:
    img = np.zeros((100, 300, 3), np.uint8)
    img[:, 100:200] = 200  # the centre third is bright
    pp = ClassifierPreprocess(size_hw=(50, 50))
    crop = resize_for_classifier(img, pp)
    # shorter side 100 -> 50, width 300 -> 150, centre crop 50 = exactly the bright third; PIL's
    # antialiased bilinear (a 2-px triangle at this 2x shrink) blends the dark sides into the edge columns
    assert crop.shape == (50, 50, 3)
    assert crop[:, 1:-1].min() == 200 and crop[:, 0].max() < 200 and crop[:, -1].max() < 200
    assert crop[:, 0].min() > 100 and crop[:, -1].min() > 100  # a blend, not a dark column: no shift


def test_classifier_mean_std_and_nhwc_layout() -> None:
    img = np.full((8, 8, 3), 255, np.uint8)
    pp = ClassifierPreprocess(
        size_hw=(4, 4), resize="stretch", mean=(0.5, 0.5, 0.5), std=(0.25, 0.25, 0.25), layout="NHWC"
    )
    t = preprocess_classifier([img, img], pp)
    assert t.shape == (2, 4, 4, 3)
    assert np.allclose(t, (1.0 - 0.5) / 0.25)


def test_letterbox_into_a_reused_canvas_matches_a_fresh_one() -> None:
    rng = np.random.default_rng(0)
    canvas = np.zeros((64, 64, 3), np.uint8)
    for shape in ((100, 200, 3), (200, 100, 3), (64, 64, 3)):  # padding moves between frames
        img = rng.integers(0, 255, shape, dtype=np.uint8)
        fresh, lb1 = letterbox(img, (64, 64))
        reused, lb2 = letterbox(img, (64, 64), out=canvas)
        assert reused is canvas and lb1 == lb2
        assert np.array_equal(fresh, reused)
    with pytest.raises(ValueError, match="canvas"):
        letterbox(img, (32, 32), out=canvas)
