from __future__ import annotations

import numpy as np
import pytest

from edge_agent.core.vision.classify import looks_like_probabilities, to_probabilities, top_k


def test_logits_get_softmax_and_probabilities_pass_through() -> None:
    logits = np.array([[2.0, 0.0, -1.0]], np.float32)
    p = to_probabilities(logits)
    e = np.exp([2.0, 0.0, -1.0])
    assert p[0] == pytest.approx(e / e.sum(), rel=1e-5)
    probs = np.array([[0.7, 0.2, 0.1]], np.float32)
    assert looks_like_probabilities(probs)
    assert to_probabilities(probs)[0].tolist() == pytest.approx(probs[0].tolist())


def test_top_k_orders_and_labels() -> None:
    probs = np.array([[0.1, 0.6, 0.3], [0.5, 0.2, 0.3]], np.float32)
    res = top_k(probs, {0: "a", 1: "b"}, k=2)
    assert [[c.label for c in row] for row in res] == [["b", "2"], ["a", "2"]]
    assert res[0][0].confidence == pytest.approx(0.6)
    assert len(top_k(probs, {}, k=10)[0]) == 3
