"""What size a decoded video frame is scaled to before it leaves the capture thread (pure).

A 1920x1080 camera feeding a 640x640 model: the detector only ever sees the 640x360 letterbox,
but every full frame was also checksummed for the freeze check (2 ms), shrunk again by the motion
gate and by the letterbox (1.5 ms) and held in the 1-slot holder at 6 MB. Video decoders through
OpenCV's FFmpeg backend cannot decode H.264 smaller (FFmpeg's ``lowres`` is MJPEG/MPEG-2 only,
and OpenCV does not pass it to the decoder: measured, docs/cameras.md), so the next best place is
right after ``read()``: one INTER_LINEAR resize to exactly the letterbox size, the same resize
the letterbox would have done, so the detector's input is the same pixels and the letterbox
becomes a copy. ``Frame.full_size`` keeps the camera's size and boxes are scaled back.

It is off unless the letterbox is at most half the frame on both axes (the rule of libjpeg's DCT
scaling, :func:`edge_agent.core.camera.mjpeg_parts.reduced_scale`): below that the saving is
small and the snapshot/motion images would lose resolution for little.
"""

from __future__ import annotations

from typing import Optional

# the letterbox must be at most 1/MIN_FACTOR of the frame on both axes
MIN_FACTOR = 2.0


def letterbox_size(size_wh: tuple[int, int], target_hw: tuple[int, int]) -> tuple[int, int]:
    """(w, h) of the image inside the letterbox, computed as core.vision.preprocess.letterbox does."""
    w, h = size_wh
    th, tw = target_hw
    r = min(th / h, tw / w)
    return max(1, min(tw, int(round(w * r)))), max(1, min(th, int(round(h * r))))


def stream_size(
    size_wh: tuple[int, int], target_hw: Optional[tuple[int, int]], min_factor: float = MIN_FACTOR
) -> Optional[tuple[int, int]]:
    """(w, h) to resize a ``size_wh`` frame to for a model of input ``target_hw`` (h, w), or None to
    hand it on as it is (no target, a degenerate size, or a frame less than ``min_factor`` x the
    letterbox on either axis). The result is the letterbox size itself: never larger than the frame,
    never smaller than what the model gets, the aspect ratio kept to the pixel."""
    if target_hw is None:
        return None
    w, h = size_wh
    th, tw = target_hw
    if w <= 0 or h <= 0 or th <= 0 or tw <= 0:
        return None
    nw, nh = letterbox_size(size_wh, target_hw)
    if nw * min_factor > w or nh * min_factor > h:
        return None
    return nw, nh
