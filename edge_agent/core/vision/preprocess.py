"""Image -> tensor preprocessing for detectors (letterbox) and classifiers (resize/crop/normalise).

Pure functions: ndarray in, ndarray out. The detector path is on the hot loop, so it does one
resize, one border and one blob conversion that writes each channel plane, scaled, straight into
the NCHW output (BGR->RGB, /255 and HWC->NCHW in one pass per plane).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal, Optional

import cv2
import numpy as np
import numpy.typing as npt

PAD_VALUE = 114


@dataclass(frozen=True)
class Letterbox:
    """How an original image was placed in the model input (to map boxes back)."""

    scale_x: float  # resized width / original width
    scale_y: float  # resized height / original height
    pad_left: int
    pad_top: int
    orig_w: int
    orig_h: int


def letterbox(
    image: npt.NDArray[np.uint8],
    size_hw: tuple[int, int],
    pad_value: int = PAD_VALUE,
    out: Optional[npt.NDArray[np.uint8]] = None,
    stretch: bool = False,
) -> tuple[npt.NDArray[np.uint8], Letterbox]:
    """Resize keeping aspect ratio and pad (centred) to ``size_hw``; ``stretch``: resize to
    ``size_hw`` exactly, no padding (what RT-DETR's predictor does).

    The scale is taken from the limiting side of *each* axis separately (height against height,
    width against width): the Ultralytics ONNXRuntime example mixes them up for non-square inputs.
    With ``out`` (a ``size_hw`` x 3 canvas reused across frames) the image is resized straight into
    the canvas and only the padding is filled: no per-frame allocation, no border copy.
    """
    h, w = image.shape[:2]
    dst_h, dst_w = size_hw
    r = min(dst_h / h, dst_w / w)
    new_w = dst_w if stretch else max(1, min(dst_w, int(round(w * r))))
    new_h = dst_h if stretch else max(1, min(dst_h, int(round(h * r))))
    left = (dst_w - new_w) // 2
    top = (dst_h - new_h) // 2
    lb = Letterbox(new_w / w, new_h / h, left, top, w, h)
    if out is None:
        out = np.empty((dst_h, dst_w, 3), np.uint8)
    elif out.shape != (dst_h, dst_w, 3) or out.dtype != np.uint8:
        raise ValueError(f"letterbox canvas must be uint8 {(dst_h, dst_w, 3)}, got {out.dtype} {out.shape}")
    out[:top] = pad_value
    out[top + new_h :] = pad_value
    out[top : top + new_h, :left] = pad_value
    out[top : top + new_h, left + new_w :] = pad_value
    roi = out[top : top + new_h, left : left + new_w]
    if (new_w, new_h) != (w, h):
        # INTER_LINEAR like Ultralytics' predictor: INTER_AREA costs ~1 ms more per 640 frame on a
        # 2-core CPU for no measurable change in detections (bench_pipeline.py)
        cv2.resize(image, (new_w, new_h), dst=roi, interpolation=cv2.INTER_LINEAR)
    else:
        roi[...] = image
    return out, lb


def to_blob(
    image_bgr: npt.NDArray[np.uint8],
    dtype: npt.DTypeLike = np.float32,
    scale: float = 1.0 / 255.0,
    swap_rb: bool = True,
    mean: tuple[float, float, float] = (0.0, 0.0, 0.0),
    std: tuple[float, float, float] = (1.0, 1.0, 1.0),
    layout: Literal["NCHW", "NHWC"] = "NCHW",
    out: Optional[npt.NDArray[np.float32]] = None,
) -> npt.NDArray[np.generic]:
    """HWC uint8 BGR -> [1,C,H,W] (or [1,H,W,C]) in ``dtype``: (pixel*scale - mean) / std.

    ``out``: a reusable float32 [1,3,H,W] buffer for the plain NCHW path (the detector's hot loop).
    """
    if image_bgr.ndim == 2:
        image_bgr = cv2.cvtColor(image_bgr, cv2.COLOR_GRAY2BGR)
    if image_bgr.dtype == np.uint8 and image_bgr.shape[2] == 3:
        blob = _planes_scaled(image_bgr, scale, swap_rb, out)
    else:
        blob = cv2.dnn.blobFromImage(image_bgr, scalefactor=scale, swapRB=swap_rb, crop=False)
    if any(m != 0.0 for m in mean) or any(s != 1.0 for s in std):
        m = np.asarray(mean, dtype=np.float32).reshape(1, 3, 1, 1)
        s = np.asarray(std, dtype=np.float32).reshape(1, 3, 1, 1)
        blob = (blob - m) / s
    if layout == "NHWC":
        blob = np.ascontiguousarray(blob.transpose(0, 2, 3, 1))
    result: npt.NDArray[np.generic] = blob.astype(dtype, copy=False)
    return result


def _planes_scaled(
    image_bgr: npt.NDArray[np.uint8],
    scale: float,
    swap_rb: bool,
    out: Optional[npt.NDArray[np.float32]] = None,
) -> npt.NDArray[np.float32]:
    """uint8 HWC -> float32 [1,3,H,W] * scale, bit-identical to ``cv2.dnn.blobFromImage``.

    One float32 multiply per channel plane straight into the output: ~0.8 ms for 640x640 here,
    against 2.5-7 ms for ``blobFromImage`` (which converts the whole HWC image to float first).
    """
    h, w = image_bgr.shape[:2]
    if out is None or out.shape != (1, 3, h, w) or out.dtype != np.float32:
        out = np.empty((1, 3, h, w), np.float32)
    s = np.float32(scale)
    for dst, src in enumerate((2, 1, 0) if swap_rb else (0, 1, 2)):
        np.multiply(image_bgr[:, :, src], s, out=out[0, dst])
    return out


def preprocess_detector(
    image_bgr: npt.NDArray[np.uint8],
    size_hw: tuple[int, int],
    dtype: npt.DTypeLike = np.float32,
    canvas: Optional[npt.NDArray[np.uint8]] = None,
    blob: Optional[npt.NDArray[np.float32]] = None,
    stretch: bool = False,
) -> tuple[npt.NDArray[np.generic], Letterbox]:
    """The Ultralytics detector input: letterbox (pad 114; ``stretch``: none), RGB, 0..1, NCHW, the model's dtype.

    ``canvas``/``blob``: buffers reused across frames (see :class:`edge_agent.inference.pipeline.Detector`).
    """
    padded, lb = letterbox(image_bgr, size_hw, out=canvas, stretch=stretch)
    return to_blob(padded, dtype=dtype, out=blob), lb


@dataclass(frozen=True)
class ClassifierPreprocess:
    """How a classifier wants its input; defaults match Ultralytics ``-cls`` exports."""

    size_hw: tuple[int, int] = (224, 224)
    resize: Literal["shorter_side", "stretch"] = "shorter_side"
    center_crop: bool = True
    # shorter side -> size / crop_ratio before the centre crop: 1.0 Ultralytics, 0.875 ImageNet (256 -> 224)
    crop_ratio: float = 1.0
    scale: float = 1.0 / 255.0
    mean: tuple[float, float, float] = (0.0, 0.0, 0.0)
    std: tuple[float, float, float] = (1.0, 1.0, 1.0)
    color: Literal["RGB", "BGR"] = "RGB"
    layout: Literal["NCHW", "NHWC"] = "NCHW"
    extra: dict[str, str] = field(default_factory=dict)


def resize_short_side(pp: ClassifierPreprocess) -> int:
    """The shorter-side size before the centre crop: ``floor(size / crop_ratio)``, as Ultralytics'
    ``classify_transforms`` and timm compute it (224 / 0.875 = 256; 160 -> 182, not 183)."""
    return int(math.floor(max(pp.size_hw) / pp.crop_ratio + 1e-9))


def classifier_geometry(h: int, w: int, pp: ClassifierPreprocess) -> tuple[int, int, int, int]:
    """(resized h, resized w, crop top, crop left) for an ``h`` x ``w`` image, with torchvision's
    integer arithmetic: ``Resize(s)`` puts the shorter side at ``s`` and the longer at
    ``int(s * long / short)`` (truncated); ``CenterCrop`` starts at ``int(round((H - th) / 2.0))``.
    A non-square input keeps the aspect ratio and covers both sides (torchvision would pad)."""
    dst_h, dst_w = pp.size_hw
    if dst_h == dst_w:
        s = max(dst_h, resize_short_side(pp))
        if w <= h:
            new_w, new_h = s, int(s * h / w)
        else:
            new_h, new_w = s, int(s * w / h)
    else:
        r = max(dst_h / h, dst_w / w) / pp.crop_ratio
        new_w, new_h = max(dst_w, int(round(w * r))), max(dst_h, int(round(h * r)))
    return new_h, new_w, int(round((new_h - dst_h) / 2.0)), int(round((new_w - dst_w) / 2.0))


def _bilinear(image: npt.NDArray[np.uint8], size_wh: tuple[int, int]) -> npt.NDArray[np.uint8]:
    """PIL's bilinear resize, what torchvision's ``Resize`` and Ultralytics' classify predictor
    apply to the PIL images ImageNet-style classifiers are evaluated on.

    Shrinking, PIL's filter is antialiased (a triangle as wide as the scale): cv2's INTER_AREA is a
    box filter whose pixels differ, and borderline crops of a real MobileNetV2 changed their top-1;
    PIL costs about the same there (4.6 vs 5.0 ms, 600x400 -> 384x256). Enlarging, PIL and cv2's
    INTER_LINEAR are the same half-pixel bilinear up to 1 grey level of fixed-point rounding, and
    cv2 is ~10x faster (0.3 vs 3.7 ms for a 300x200 crop), so cv2 does that. Channels are
    resampled independently, so BGR is fine."""
    h, w = image.shape[:2]
    if size_wh[0] >= w and size_wh[1] >= h:
        enlarged: npt.NDArray[np.uint8] = cv2.resize(image, size_wh, interpolation=cv2.INTER_LINEAR)
        return enlarged
    from PIL import Image

    if image.ndim == 3 and image.shape[2] == 1:
        image = image[:, :, 0]
    shrunk: npt.NDArray[np.uint8] = np.asarray(
        Image.fromarray(np.ascontiguousarray(image)).resize(size_wh, Image.BILINEAR)
    )
    return shrunk


def resize_for_classifier(
    image_bgr: npt.NDArray[np.uint8], pp: ClassifierPreprocess
) -> npt.NDArray[np.uint8]:
    """Resize (shorter side to target, then centre crop; or stretch) to exactly ``pp.size_hw``."""
    dst_h, dst_w = pp.size_hw
    h, w = image_bgr.shape[:2]
    if pp.resize == "stretch" or not pp.center_crop:
        return _bilinear(image_bgr, (dst_w, dst_h))
    new_h, new_w, top, left = classifier_geometry(h, w, pp)
    resized = _bilinear(image_bgr, (new_w, new_h))
    return resized[top : top + dst_h, left : left + dst_w]


def preprocess_classifier(
    images_bgr: list[npt.NDArray[np.uint8]], pp: ClassifierPreprocess, dtype: npt.DTypeLike = np.float32
) -> npt.NDArray[np.generic]:
    """A batch of crops -> one [N,...] tensor laid out as the classifier wants."""
    blobs = [
        to_blob(
            resize_for_classifier(img, pp),
            dtype=dtype,
            scale=pp.scale,
            swap_rb=pp.color == "RGB",
            mean=pp.mean,
            std=pp.std,
            layout=pp.layout,
        )
        for img in images_bgr
    ]
    return np.concatenate(blobs, axis=0)


def rect_size(image_hw: tuple[int, int], size_hw: tuple[int, int], stride: int = 32) -> tuple[int, int]:
    """The input Ultralytics feeds a model with dynamic H/W (``LetterBox(auto=True)``): the image
    scaled to fit ``size_hw``, padded only up to the next multiple of ``stride`` on each axis
    (1080x810 into 640: 640x480, not 640x640)."""
    h, w = image_hw
    dst_h, dst_w = size_hw
    r = min(dst_h / h, dst_w / w)
    new_h, new_w = max(1, min(dst_h, int(round(h * r)))), max(1, min(dst_w, int(round(w * r))))
    return new_h + (dst_h - new_h) % stride, new_w + (dst_w - new_w) % stride
