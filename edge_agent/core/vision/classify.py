"""Classifier post-processing: logits or probabilities -> top-k (label, confidence)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt


@dataclass(frozen=True)
class Classification:
    label: str
    class_id: int
    confidence: float

    def to_json(self) -> dict[str, object]:
        return {"label": self.label, "class_id": self.class_id, "confidence": round(self.confidence, 5)}


def looks_like_probabilities(scores: npt.NDArray[np.floating], atol: float = 1e-3) -> bool:
    """True when every row is already a distribution (in [0,1], sums to 1), so no softmax is due."""
    s = np.asarray(scores, dtype=np.float64)
    return bool(np.all(s >= -atol) and np.all(s <= 1 + atol) and np.allclose(s.sum(axis=-1), 1.0, atol=atol))


def softmax(x: npt.NDArray[np.floating]) -> npt.NDArray[np.float32]:
    z = np.asarray(x, dtype=np.float64)
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    out: npt.NDArray[np.float32] = (e / e.sum(axis=-1, keepdims=True)).astype(np.float32)
    return out


def to_probabilities(scores: npt.NDArray[np.floating]) -> npt.NDArray[np.float32]:
    """Softmax when the model emits logits; pass probabilities through unchanged."""
    s = np.asarray(scores)
    if s.ndim == 1:
        s = s[None]
    s = s.reshape(s.shape[0], -1)
    return s.astype(np.float32) if looks_like_probabilities(s) else softmax(s)


def top_k(
    probs: npt.NDArray[np.floating], names: Mapping[int, str], k: int = 1
) -> list[list[Classification]]:
    """Per row, the ``k`` most likely classes (descending)."""
    p = np.asarray(probs, dtype=np.float32)
    k = max(1, min(k, p.shape[-1]))
    idx = np.argsort(-p, axis=-1, kind="stable")[:, :k]
    return [
        [Classification(names.get(int(c), str(int(c))), int(c), float(row[c])) for c in row_idx]
        for row, row_idx in zip(p, idx)
    ]
