"""The result schema shared by ``infer --json``, the outbox payload and validation tools."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Optional

from edge_agent.core.vision.classify import Classification
from edge_agent.core.vision.yolo import Detections


@dataclass(frozen=True)
class Detection:
    label: str
    class_id: int
    confidence: float
    box: tuple[float, float, float, float]
    classification: Optional[Classification] = None

    def to_json(self) -> dict[str, object]:
        d: dict[str, object] = {
            "label": self.label,
            "class_id": self.class_id,
            "confidence": round(self.confidence, 5),
            "box": [round(v, 2) for v in self.box],
        }
        if self.classification is not None:
            c = self.classification
            d["classification"] = {"label": c.label, "confidence": round(c.confidence, 5)}
        return d


def to_detection_list(dets: Detections, names: Mapping[int, str]) -> list[Detection]:
    return [
        Detection(
            label=names.get(int(c), str(int(c))),
            class_id=int(c),
            confidence=float(s),
            box=(float(b[0]), float(b[1]), float(b[2]), float(b[3])),
        )
        for b, s, c in zip(dets.boxes, dets.scores, dets.class_ids)
    ]


@dataclass(frozen=True)
class ImageResult:
    """One image's result; ``to_json`` is the ``infer --json`` line contract."""

    image: str
    width: int
    height: int
    detections: list[Detection]
    timings_ms: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        return {
            "image": self.image,
            "width": self.width,
            "height": self.height,
            "detections": [d.to_json() for d in self.detections],
            "timings_ms": {k: round(v, 3) for k, v in self.timings_ms.items()},
        }
