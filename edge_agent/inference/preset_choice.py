"""Which classifier preprocessing a model gets (the presets and their parser: :mod:`edge_agent.core.vision.classifier_presets`).

A classifier gives wrong answers, silently, when fed the wrong preprocessing (an ImageNet
MobileNetV2 agreed with its documented recipe on 2 of 23 crops under Ultralytics' /255). So the
recipe is chosen explicitly and ``inspect`` says where it came from:

1. ``--classifier-preprocess`` / ``[classifier] preprocess`` (the user knows best; a warning
   when it overrides the model's metadata),
2. the model's metadata: a ``preprocess`` entry (a preset name, the custom form or a JSON
   object) or Ultralytics' own metadata (``task: classify``),
3. a guess, flagged as one: ``imagenet`` for a 1000/1001-class model, else ``ultralytics``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

from edge_agent.core.vision.classifier_presets import parse_spec
from edge_agent.core.vision.preprocess import ClassifierPreprocess, resize_short_side

if TYPE_CHECKING:
    from edge_agent.adapters.runtime.onnx_model import OnnxModel

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Choice:
    pp: ClassifierPreprocess
    spec: str  # as the user would write it
    source: str  # "option", "metadata", "guess"

    @property
    def is_guess(self) -> bool:
        return self.source == "guess"

    def describe(self) -> str:
        p = self.pp
        resize = (
            "stretch"
            if p.resize == "stretch" or not p.center_crop
            else f"shorter side to {resize_short_side(p)} + centre crop"
        )
        return (
            f"{self.spec} ({self.source}): {resize} {p.size_hw[1]}x{p.size_hw[0]}, {p.color}, "
            f"x{p.scale:.6g}, mean {list(p.mean)}, std {list(p.std)}, {p.layout}"
        )


def model_base(model: OnnxModel) -> ClassifierPreprocess:
    """Input size and layout from the model (NHWC when the last axis is the 1/3 channels)."""
    shape = model.input.shape
    nhwc = len(shape) == 4 and shape[3] in (1, 3) and shape[1] not in (1, 3)
    h, w = model.input_hw(default=(224, 224))
    return ClassifierPreprocess(size_hw=(h, w), layout="NHWC" if nhwc else "NCHW")


def choose_preprocess(model: OnnxModel, option: Optional[str] = None) -> Choice:
    """The recipe for ``model`` (an OnnxModel) and where it came from; see the module docstring."""
    base = model_base(model)
    meta: dict[str, str] = model.info.metadata
    raw = meta.get("preprocess")
    if option and option.strip().lower() not in ("", "auto"):
        if raw:
            log.warning(
                "%s: --classifier-preprocess/[classifier] preprocess %r overrides the model's metadata %r",
                model.path,
                option,
                raw,
            )
        return Choice(parse_spec(option, base, "classifier preprocess"), option.strip(), "option")
    if raw:
        return Choice(parse_spec(raw, base, f"{model.path}: metadata 'preprocess'"), raw.strip(), "metadata")
    if model.info.task == "classify":  # Ultralytics writes task/imgsz/names and uses its own recipe
        return Choice(parse_spec("ultralytics", base, ""), "ultralytics", "metadata")
    out = model.info.outputs[0].shape
    ncls = out[-1] if out else None
    guess = "imagenet" if ncls in (1000, 1001) else "ultralytics"
    return Choice(parse_spec(guess, base, ""), guess, "guess")
