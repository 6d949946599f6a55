"""Classifier preprocessing presets: a table of named recipes plus a ``key=value`` custom form,
parsed from text (config, CLI, model metadata) into a :class:`ClassifierPreprocess`. Pure, so the
config schema checks a spec at ``config check`` time; choosing one for a model is
:mod:`edge_agent.inference.preset_choice`.
"""

from __future__ import annotations

import json
import logging
from dataclasses import replace

from edge_agent.core.vision.preprocess import ClassifierPreprocess
from edge_agent.errors import ModelError

log = logging.getLogger(__name__)

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)

# the table; a new preset is one entry (sizes come from the model input at load)
PRESETS: dict[str, ClassifierPreprocess] = {
    # Ultralytics -cls: shorter side to the input size, centre crop, RGB, /255, no mean/std
    "ultralytics": ClassifierPreprocess(),
    # torchvision/ONNX Model Zoo ImageNet: shorter side to 256*(input/224), centre crop, RGB, /255, mean/std
    "imagenet": ClassifierPreprocess(crop_ratio=224 / 256, mean=IMAGENET_MEAN, std=IMAGENET_STD),
    # stretch to the input size, pixel values 0..255 as float, RGB
    "raw": ClassifierPreprocess(resize="stretch", center_crop=False, scale=1.0),
}

CUSTOM_KEYS = "resize=shorter|stretch, crop=RATIO (0<r<=1), scale=X or 1/N, mean=a:b:c, std=a:b:c, order=RGB|BGR, layout=NCHW|NHWC"


def _floats3(key: str, raw: str, where: str) -> tuple[float, float, float]:
    parts = [v for v in raw.replace(",", ":").replace(" ", ":").split(":") if v]
    try:
        vals = tuple(float(v) for v in parts)
    except ValueError:
        raise ModelError(f"{where}: {key}={raw!r}: expected three numbers a:b:c") from None
    if len(vals) == 1:
        vals = vals * 3
    if len(vals) != 3:
        raise ModelError(f"{where}: {key}={raw!r}: expected three numbers a:b:c")
    return (vals[0], vals[1], vals[2])


def _scale(raw: str, where: str) -> float:
    try:
        if "/" in raw:
            num, den = raw.split("/", 1)
            return float(num) / float(den)
        return float(raw)
    except (ValueError, ZeroDivisionError):
        raise ModelError(f"{where}: scale={raw!r}: expected a number such as 1/255 or 0.0039") from None


def apply_key(pp: ClassifierPreprocess, key: str, value: str, where: str) -> ClassifierPreprocess:
    key, v = key.strip().lower(), value.strip()
    if key == "resize":
        mode = {"shorter": "shorter_side", "shorter_side": "shorter_side", "stretch": "stretch"}.get(
            v.lower()
        )
        if mode is None:
            raise ModelError(f"{where}: resize={v!r}: expected shorter or stretch")
        return replace(pp, resize=mode, center_crop=mode == "shorter_side")  # type: ignore[arg-type]
    if key in ("crop", "crop_ratio"):
        if v.lower() in ("true", "false"):
            return replace(pp, center_crop=v.lower() == "true")
        try:
            r = float(v)
        except ValueError:
            r = -1.0
        if not 0 < r <= 1:
            raise ModelError(f"{where}: crop={v!r}: expected a ratio in (0, 1], e.g. 0.875 for 256->224")
        return replace(pp, crop_ratio=r, center_crop=True)
    if key == "scale":
        return replace(pp, scale=_scale(v, where))
    if key in ("mean", "std"):
        vals = _floats3(key, v, where)
        if key == "std" and any(x == 0 for x in vals):
            raise ModelError(f"{where}: std={v!r}: must not contain 0")
        return replace(pp, mean=vals) if key == "mean" else replace(pp, std=vals)
    if key in ("order", "color"):
        if v.upper() not in ("RGB", "BGR"):
            raise ModelError(f"{where}: order={v!r}: expected RGB or BGR")
        return replace(pp, color=v.upper())  # type: ignore[arg-type]
    if key == "layout":
        if v.upper() not in ("NCHW", "NHWC"):
            raise ModelError(f"{where}: layout={v!r}: expected NCHW or NHWC")
        return replace(pp, layout=v.upper())  # type: ignore[arg-type]
    raise ModelError(f"{where}: unknown preprocessing key {key!r}; known: {CUSTOM_KEYS}")


def parse_spec(spec: str, base: ClassifierPreprocess, where: str) -> ClassifierPreprocess:
    """``imagenet`` / ``raw,order=BGR`` / ``resize=shorter,crop=0.875,mean=...``: preset then overrides.

    ``base`` carries the model's input size and layout, which a preset never changes.
    """
    text = spec.strip()
    if text.startswith("{"):
        return _from_json(text, base, where)
    pp = base
    for tok in (t.strip() for t in text.split(",")):
        if not tok:
            continue
        if "=" in tok:
            k, v = tok.split("=", 1)
            pp = apply_key(pp, k, v, where)
        elif tok.lower() in PRESETS:
            preset = PRESETS[tok.lower()]
            pp = replace(preset, size_hw=base.size_hw, layout=base.layout)
        else:
            raise ModelError(
                f"{where}: unknown preprocessing preset {tok!r}; presets: {', '.join(PRESETS)}; "
                f"or custom {CUSTOM_KEYS}"
            )
    return pp


# keys a JSON ``preprocess`` entry may set; the input size always comes from the model itself
_JSON_KEYS = ("resize", "crop", "crop_ratio", "scale", "mean", "std", "color", "order", "layout")


def _from_json(text: str, base: ClassifierPreprocess, where: str) -> ClassifierPreprocess:
    try:
        hints: object = json.loads(text)
    except ValueError:
        raise ModelError(f"{where}: preprocess is not JSON: {text[:80]!r}") from None
    if not isinstance(hints, dict):
        raise ModelError(f"{where}: preprocess JSON must be an object, got {text[:80]!r}")
    pp = base
    if "preset" in hints:
        pp = parse_spec(str(hints["preset"]), base, where)
    for k, v in hints.items():
        if k == "preset":
            continue
        if k not in _JSON_KEYS:  # metadata written by other tools carries extras (size, interpolation)
            log.debug("%s: preprocess key %r ignored", where, k)
            continue
        # true/false (crop) and "shorter_side" (resize) read as their text forms do
        val = ":".join(str(x) for x in v) if isinstance(v, (list, tuple)) else str(v)
        pp = apply_key(pp, k, val, where)
    return pp
