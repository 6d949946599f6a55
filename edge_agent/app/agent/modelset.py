"""The detector (+ optional classifier) the agent runs, built from config and warmed as one unit.

Built completely before it is used, so a SIGHUP reload can construct a new set beside the old
one and swap a single reference: a model that fails to load never replaces a working one. The set
keeps the host's :class:`ProviderPlanner`; ``reload`` gives it to the new set, so the board is
detected and the providers planned once per process, not once per load.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from edge_agent.adapters.runtime.onnx_model import OnnxModel
from edge_agent.adapters.runtime.planner import ProviderPlanner
from edge_agent.app.cli.assets import DEMO_DETECTOR, DEMO_DETECTOR_FP32, demo_file
from edge_agent.core.config.schema import Config
from edge_agent.core.vision.defaults import CROP_PADDING
from edge_agent.errors import ModelError
from edge_agent.inference.guard import check_detector, describe
from edge_agent.inference.pipeline import Classifier, Detector, DetectorParams

log = logging.getLogger(__name__)


@dataclass
class ModelSet:
    detector: Detector
    classifier: Optional[Classifier] = None
    classify_ids: Optional[list[int]] = None
    crop_padding: float = CROP_PADDING
    planner: Optional[ProviderPlanner] = field(default=None, repr=False, compare=False)

    @classmethod
    def from_config(cls, cfg: Config, planner: Optional[ProviderPlanner] = None) -> ModelSet:
        """Load and warm the configured models; ``planner``: the one a running set keeps (a reload),
        else this host is detected now."""
        planner = planner or ProviderPlanner.detect()
        d = cfg.detector
        state = cfg.device.state_dir
        path = Path(d.model) if d.model else demo_file(DEMO_DETECTOR, DEMO_DETECTOR_FP32)
        model = OnnxModel(
            path,
            provider=d.provider,
            threads=d.threads,
            labels=d.labels,
            state_dir=state,
            float_source=d.float_model,
            planner=planner,
        )
        detector = Detector(  # rect=False: one input shape for every camera (batching, decode_target)
            model, DetectorParams(d.conf_threshold, d.iou_threshold, d.max_det), d.output_format, rect=False
        )
        problems = check_detector(detector)
        if problems:  # run and SIGHUP hot swap both come here: refuse, unless the config says otherwise
            msg = describe(path, problems)
            if not d.allow_broken_model:
                raise ModelError(f"{msg} (to run it anyway: [detector] allow_broken_model = true)")
            log.warning("%s (running it: [detector] allow_broken_model = true)", msg)
        if d.classes:
            detector.params.classes = detector.class_ids(d.classes)
        classifier = None
        ids = None
        c = cfg.classifier
        if c is not None:
            cm = OnnxModel(
                c.model,
                provider=c.provider or d.provider,
                threads=d.threads,
                labels=c.labels,
                state_dir=state,
                planner=planner,
            )
            classifier = Classifier(cm, top_k=c.top_k, preprocess_option=c.preprocess)
            ids = detector.class_ids(c.classes) if c.classes else None
        return cls(detector, classifier, ids, c.crop_padding if c else CROP_PADDING, planner)

    def reload(self, cfg: Config) -> ModelSet:
        """A new set from ``cfg`` on this set's planner (SIGHUP, a model switch): no second board
        detection, and no new plan unless ``cfg`` asks for other providers or threads."""
        return ModelSet.from_config(cfg, self.planner)

    def describe(self) -> dict[str, dict[str, str]]:
        """Model ids and hashes carried in every result, so a record says which weights made it."""
        out = {"detector": self._one(self.detector.model)}
        if self.classifier is not None:
            out["classifier"] = self._one(self.classifier.model)
        return out

    @staticmethod
    def _one(m: OnnxModel) -> dict[str, str]:
        return {"id": m.info.model_id, "sha256": m.info.sha256, "quantization": m.info.quant_kind}

    @property
    def provider(self) -> str:
        return ",".join(self.detector.model.info.providers)
