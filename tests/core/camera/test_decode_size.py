"""The size a frame is decoded/resized to for the model: never larger than the frame, never smaller
than the letterbox the model gets, the aspect kept, off below 2x (video: stream_size; JPEG:
reduced_scale, libjpeg's 1/2..1/8)."""

from __future__ import annotations

from typing import Optional

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from edge_agent.core.camera.decode_size import letterbox_size, stream_size
from edge_agent.core.camera.mjpeg_parts import reduced_scale
from edge_agent.core.vision.preprocess import letterbox

sizes = st.tuples(st.integers(1, 8000), st.integers(1, 8000))
targets = st.tuples(st.integers(16, 1280), st.integers(16, 1280))


@pytest.mark.parametrize(
    "size, target, out",
    [
        ((1920, 1080), (640, 640), (640, 360)),
        ((1280, 720), (640, 640), (640, 360)),  # exactly 2x: taken
        ((1278, 720), (640, 640), None),  # 639x360 would be the letterbox: less than 2x in width
        ((810, 1080), (640, 640), None),  # the photos: 480x640 is more than half of 810x1080
        ((2592, 1944), (640, 640), (640, 480)),
        ((1080, 1920), (640, 640), (360, 640)),  # portrait
        ((3840, 2160), (384, 640), (640, 360)),  # non-square input (h, w) = (384, 640)
        ((640, 480), (640, 640), None),  # smaller than the model: never
        ((1920, 1080), None, None),
        ((0, 1080), (640, 640), None),
        # a degenerate size on any one axis is handed on as it is, never a 1x1 "letterbox" or a
        # ZeroDivisionError (each axis on its own: a mutant joining two checks with `and` passes a
        # case where only one is zero)
        ((1920, 0), (640, 640), None),
        ((1920, 1080), (0, 640), None),
        ((1920, 1080), (640, 0), None),
        ((-1920, 1080), (640, 640), None),
        ((1920, 1080), (640, -640), None),
        # the smallest real target still works: a 1-pixel-high model input is not "degenerate"
        ((1920, 1080), (1, 640), (2, 1)),
        ((1080, 1920), (640, 1), (1, 2)),
    ],
)
def test_stream_size_examples(
    size: tuple[int, int], target: Optional[tuple[int, int]], out: Optional[tuple[int, int]]
) -> None:
    assert stream_size(size, target) == out


@given(sizes, targets)
def test_stream_size_never_upscales_never_below_the_model_and_keeps_the_aspect(
    size: tuple[int, int], target: tuple[int, int]
) -> None:
    w, h = size
    out = stream_size(size, target)
    lw, lh = letterbox_size(size, target)
    if out is None:
        assert 2 * lw > w or 2 * lh > h  # off only below 2x
        return
    nw, nh = out
    assert 2 * nw <= w and 2 * nh <= h  # at most half: never an upscale, and only when >= 2x
    assert (nw, nh) == (lw, lh)  # exactly what the model's letterbox holds: nothing lost
    th, tw = target
    assert nw <= tw and nh <= th and (nw == tw or nh == th)  # fills the input on its limiting side
    # the aspect kept: both axes scaled by the same factor, to the rounding of half a pixel (a side
    # that would round to 0 is 1 pixel)
    r = min(th / h, tw / w)
    assert abs(nw - w * r) <= 0.5 + 1e-9 or nw == 1
    assert abs(nh - h * r) <= 0.5 + 1e-9 or nh == 1


@given(sizes, targets)
def test_letterbox_of_the_reduced_frame_is_a_plain_copy(
    size: tuple[int, int], target: tuple[int, int]
) -> None:
    """The letterbox of the resized frame does not resize again: its image part is the frame."""
    out = stream_size(size, target)
    if out is None:
        return
    nw, nh = out
    img = np.zeros((nh, nw, 3), np.uint8)
    _, lb = letterbox(img, target)
    assert (lb.scale_x, lb.scale_y) == (1.0, 1.0)


@given(sizes, targets)
def test_reduced_jpeg_scale_is_the_largest_that_stays_at_or_above_the_letterbox(
    size: tuple[int, int], target: tuple[int, int]
) -> None:
    w, h = size
    d = reduced_scale(size, target)
    assert d in (1, 2, 4, 8)
    lw, lh = letterbox_size(size, target)
    if d > 1:  # never below what the model gets (d = 1: the full image, whatever the letterbox does)
        assert w // d >= lw and h // d >= lh
    if d < 8:  # the next denominator would have gone below on one axis
        r = min(target[0] / h, target[1] / w)
        assert w // (2 * d) < w * r or h // (2 * d) < h * r
