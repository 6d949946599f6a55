"""Model inputs against plain numpy/PIL references: the blob (channel order, scale, mean/std,
layout, dtype, reused buffers), the letterbox's padding on every side, the classifier resize."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from PIL import Image

from edge_agent.core.vision.preprocess import (
    PAD_VALUE,
    ClassifierPreprocess,
    _bilinear,
    letterbox,
    preprocess_classifier,
    preprocess_detector,
    to_blob,
)

RNG = np.random.default_rng(5)
IMG = RNG.integers(0, 256, (5, 7, 3), dtype=np.uint8)


def ref_blob(img: np.ndarray, scale: float, swap: bool, mean=(0, 0, 0), std=(1, 1, 1)) -> np.ndarray:
    x = img[..., ::-1] if swap else img
    x = (x.astype(np.float64) * scale - np.array(mean)) / np.array(std)
    return x.transpose(2, 0, 1)[None]


@pytest.mark.parametrize("swap", [True, False])
@pytest.mark.parametrize(
    ("mean", "std"),
    [
        ((0.0, 0.0, 0.0), (1.0, 1.0, 1.0)),
        ((0.5, 0.25, 0.0), (1.0, 1.0, 1.0)),
        ((0.0, 0.0, 0.0), (2.0, 1.0, 0.5)),
    ],
)
def test_the_blob_is_scaled_normalised_planes_in_the_asked_channel_order(
    swap: bool, mean: tuple, std: tuple
) -> None:
    got = to_blob(IMG, swap_rb=swap, mean=mean, std=std)
    assert got.dtype == np.float32 and got.shape == (1, 3, 5, 7)
    np.testing.assert_allclose(got, ref_blob(IMG, 1 / 255, swap, mean, std), rtol=1e-6, atol=1e-6)


def test_nhwc_float16_and_grey_inputs() -> None:
    nhwc = to_blob(IMG, dtype=np.float16, layout="NHWC", scale=1.0)
    assert nhwc.dtype == np.float16 and nhwc.shape == (1, 5, 7, 3)
    np.testing.assert_array_equal(nhwc[0], IMG[..., ::-1].astype(np.float16))
    grey = IMG[..., 0]
    g = to_blob(grey, scale=1.0)
    assert g.shape == (1, 3, 5, 7) and all(np.array_equal(g[0, c], grey.astype(np.float32)) for c in range(3))


def test_a_float_image_takes_the_opencv_path_with_the_same_numbers() -> None:
    f = IMG.astype(np.float32)
    np.testing.assert_allclose(to_blob(f, swap_rb=True), ref_blob(IMG, 1 / 255, True), rtol=1e-6)
    np.testing.assert_allclose(to_blob(f, swap_rb=False, scale=2.0), ref_blob(IMG, 2.0, False), rtol=1e-6)
    np.testing.assert_allclose(
        to_blob(f, mean=(0.1, 0.2, 0.3), std=(0.5, 0.5, 0.5)),
        ref_blob(IMG, 1 / 255, True, (0.1, 0.2, 0.3), (0.5,) * 3),
        rtol=1e-5,
    )


def test_a_fitting_buffer_is_filled_in_place_and_a_wrong_one_is_not_used() -> None:
    buf = np.zeros((1, 3, 5, 7), np.float32)
    got = to_blob(IMG, out=buf)
    assert got is buf
    np.testing.assert_allclose(buf, ref_blob(IMG, 1 / 255, True), rtol=1e-6)
    for bad in (
        np.zeros((2, 3, 5, 7), np.float32),
        np.zeros((1, 4, 5, 7), np.float32),
        np.zeros((1, 3, 5, 7), np.float64),
    ):
        before = bad.copy()
        got = to_blob(IMG, out=bad)
        assert got is not bad and np.array_equal(bad, before)
        np.testing.assert_allclose(got, ref_blob(IMG, 1 / 255, True), rtol=1e-6)


@pytest.mark.parametrize(("h", "w"), [(30, 80), (80, 30), (31, 79), (1, 300), (300, 1), (64, 96)])
def test_the_letterbox_pads_every_side_and_places_the_resized_image(h: int, w: int) -> None:
    img = RNG.integers(0, 256, (h, w, 3), dtype=np.uint8)
    canvas = np.zeros((48, 96, 3), np.uint8)  # non-square: each axis against its own side
    out, lb = letterbox(img, (48, 96), out=canvas)
    assert out is canvas and (lb.orig_w, lb.orig_h) == (w, h)
    r = min(48 / h, 96 / w)
    nw, nh = max(1, min(96, round(w * r))), max(1, min(48, round(h * r)))
    left, top = (96 - nw) // 2, (48 - nh) // 2
    assert (lb.pad_left, lb.pad_top, lb.scale_x, lb.scale_y) == (left, top, nw / w, nh / h)
    inside = np.zeros((48, 96), bool)
    inside[top : top + nh, left : left + nw] = True
    assert (out[~inside] == PAD_VALUE).all()
    expect = img if (nw, nh) == (w, h) else cv2.resize(img, (nw, nh), interpolation=cv2.INTER_LINEAR)
    assert np.array_equal(out[top : top + nh, left : left + nw], expect)


def test_stretch_fills_the_whole_input() -> None:
    img = RNG.integers(0, 256, (30, 80, 3), dtype=np.uint8)
    out, lb = letterbox(img, (48, 96), stretch=True)
    assert (lb.pad_left, lb.pad_top, lb.scale_x, lb.scale_y) == (0, 0, 96 / 80, 48 / 30)
    assert np.array_equal(out, cv2.resize(img, (96, 48), interpolation=cv2.INTER_LINEAR))


def test_a_wrong_canvas_is_one_clear_error() -> None:
    with pytest.raises(ValueError) as exc:
        letterbox(IMG, (48, 96), out=np.zeros((48, 96, 4), np.uint8))
    assert str(exc.value) == "letterbox canvas must be uint8 (48, 96, 3), got uint8 (48, 96, 4)"


def test_the_detector_input_uses_the_given_buffers() -> None:
    img = RNG.integers(0, 256, (30, 80, 3), dtype=np.uint8)
    canvas, blob = np.zeros((48, 96, 3), np.uint8), np.zeros((1, 3, 48, 96), np.float32)
    got, lb = preprocess_detector(img, (48, 96), canvas=canvas, blob=blob, stretch=True)
    assert got is blob and lb.pad_top == 0
    np.testing.assert_allclose(got, ref_blob(cv2.resize(img, (96, 48)), 1 / 255, True), rtol=1e-6)
    half, _ = preprocess_detector(img, (48, 96), dtype=np.float16)
    assert half.dtype == np.float16 and half.shape == (1, 3, 48, 96)


def test_classifier_resize_shrinks_like_pil_and_enlarges_like_opencv() -> None:
    img = RNG.integers(0, 256, (40, 60, 3), dtype=np.uint8)
    pil = np.asarray(Image.fromarray(img).resize((30, 40), Image.BILINEAR))  # one axis shrinks
    assert np.array_equal(_bilinear(img, (30, 40)), pil)
    assert np.array_equal(_bilinear(img, (60, 41)), cv2.resize(img, (60, 41), interpolation=cv2.INTER_LINEAR))
    assert np.array_equal(_bilinear(img, (61, 40)), cv2.resize(img, (61, 40), interpolation=cv2.INTER_LINEAR))
    grey = img[:, :, :1]
    assert np.array_equal(
        _bilinear(grey, (30, 20)), np.asarray(Image.fromarray(img[:, :, 0]).resize((30, 20), Image.BILINEAR))
    )


def test_a_classifier_batch_is_each_crop_in_the_recipe_s_colour_order() -> None:
    a = RNG.integers(0, 256, (40, 60, 3), dtype=np.uint8)
    b = RNG.integers(0, 256, (50, 30, 3), dtype=np.uint8)
    pp = ClassifierPreprocess(size_hw=(16, 16), resize="stretch", color="BGR", scale=1.0)
    got = preprocess_classifier([a, b], pp)
    assert got.shape == (2, 3, 16, 16)
    for i, img in enumerate((a, b)):
        np.testing.assert_array_equal(got[i], _bilinear(img, (16, 16)).transpose(2, 0, 1).astype(np.float32))
    rgb = preprocess_classifier([a], ClassifierPreprocess(size_hw=(16, 16), resize="stretch", scale=1.0))
    np.testing.assert_array_equal(rgb[0], got[0][::-1])
    crop = preprocess_classifier(
        [a], ClassifierPreprocess(size_hw=(16, 16), center_crop=False, scale=1.0, color="BGR")
    )
    np.testing.assert_array_equal(crop[0], got[0])  # no centre crop: stretched to the size
    half = preprocess_classifier([a], pp, np.float16)
    assert half.dtype == np.float16


@pytest.mark.parametrize(
    ("h", "w", "size_hw", "crop", "expected"),
    [
        # scale = max(dst_h / h, dst_w / w) / crop_ratio; both sides cover the input; centred crop
        (100, 200, (32, 64), 1.0, (32, 64, 0, 0)),
        (120, 90, (32, 64), 0.875, (98, 73, 33, 4)),
        (90, 400, (48, 32), 1.0, (48, 213, 0, 90)),
    ],
)
def test_a_non_square_classifier_input_covers_both_sides_keeping_the_aspect(
    h: int, w: int, size_hw: tuple[int, int], crop: float, expected: tuple[int, int, int, int]
) -> None:
    from edge_agent.core.vision.preprocess import classifier_geometry

    pp = ClassifierPreprocess(size_hw=size_hw, crop_ratio=crop)
    got = classifier_geometry(h, w, pp)
    assert got == expected
    new_h, new_w, top, left = got
    assert (
        new_h >= size_hw[0]
        and new_w >= size_hw[1]
        and top + size_hw[0] <= new_h
        and left + size_hw[1] <= new_w
    )
