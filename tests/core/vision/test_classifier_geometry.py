"""The classifier crop geometry is torchvision's integer arithmetic, for every size (no torch needed:
its formulas are restated here from torchvision.transforms.functional), and the pixels are PIL's
(to 1 grey level when enlarging)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from edge_agent.core.vision.preprocess import (
    ClassifierPreprocess,
    classifier_geometry,
    resize_for_classifier,
    resize_short_side,
)


def torchvision_resize(h: int, w: int, size: int) -> tuple[int, int]:
    """``_compute_resized_output_size((h, w), [size])``: the shorter side to ``size``, the longer
    one ``int(size * long / short)``."""
    short, long = (w, h) if w <= h else (h, w)
    new_short, new_long = size, int(size * long / short)
    new_w, new_h = (new_short, new_long) if w <= h else (new_long, new_short)
    return new_h, new_w


def torchvision_center_crop(h: int, w: int, th: int, tw: int) -> tuple[int, int]:
    """``center_crop``'s offsets: ``int(round((image_height - crop_height) / 2.0))``."""
    return int(round((h - th) / 2.0)), int(round((w - tw) / 2.0))


@settings(max_examples=400, deadline=None)
@given(
    h=st.integers(1, 5000),
    w=st.integers(1, 5000),
    size=st.integers(8, 640),
    extra=st.integers(0, 160),
)
def test_geometry_is_torchvision_arithmetic(h: int, w: int, size: int, extra: int) -> None:
    """crop_ratio = size / resize_size, as presets are defined (224 / 256): ``floor(size /
    crop_ratio)`` (Ultralytics' classify_transforms, timm) gives back exactly that resize size,
    even where the float division lands a hair below it."""
    resize = size + extra
    pp = ClassifierPreprocess(size_hw=(size, size), crop_ratio=size / resize)
    assert resize_short_side(pp) == resize
    new_h, new_w = torchvision_resize(h, w, resize)
    top, left = torchvision_center_crop(new_h, new_w, size, size)
    assert classifier_geometry(h, w, pp) == (new_h, new_w, top, left)
    assert new_h >= size and new_w >= size  # the crop never leaves the image


def test_the_usual_sizes() -> None:
    imagenet = ClassifierPreprocess(size_hw=(224, 224), crop_ratio=224 / 256)
    assert resize_short_side(imagenet) == 256
    assert classifier_geometry(480, 640, imagenet) == (256, 341, 16, 58)  # 256*640/480 = 341.33
    assert classifier_geometry(333, 500, imagenet) == (256, 384, 16, 80)  # (384-224)/2 = 80
    assert classifier_geometry(257, 1000, imagenet) == (256, 996, 16, 386)
    # 160 / 0.875 = 182.86: 182 (floor, as Ultralytics and timm), not 183
    assert resize_short_side(ClassifierPreprocess(size_hw=(160, 160), crop_ratio=0.875)) == 182
    # an odd margin: round-half-to-even, as Python's round in torchvision ((257-224)/2 = 16.5 -> 16)
    assert classifier_geometry(257, 257, ClassifierPreprocess(crop_ratio=224 / 257))[2:] == (16, 16)


@settings(max_examples=60, deadline=None)
@given(h=st.integers(20, 400), w=st.integers(20, 400), seed=st.integers(0, 1000))
def test_pixels_are_pil_bilinear_resize_then_crop(h: int, w: int, seed: int) -> None:
    img = np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)
    pp = ClassifierPreprocess(size_hw=(224, 224), crop_ratio=224 / 256)
    nh, nw, top, left = classifier_geometry(h, w, pp)
    ref = np.asarray(Image.fromarray(img).resize((nw, nh), Image.BILINEAR))[
        top : top + 224, left : left + 224
    ]
    diff = np.abs(resize_for_classifier(img, pp).astype(int) - ref.astype(int))
    if nw < w or nh < h:  # shrinking: PIL itself, bit for bit
        assert diff.max() == 0
    else:  # enlarging: cv2's bilinear, within PIL's fixed-point rounding
        assert diff.max() <= 1 and diff.mean() < 0.5
