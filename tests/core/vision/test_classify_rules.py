"""Classifier post-processing on exact numbers: softmax per row, when scores already are
probabilities (at the tolerance's edges), top-k per row, and the JSON a result carries."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from edge_agent.core.vision.classify import (
    Classification,
    looks_like_probabilities,
    softmax,
    to_probabilities,
    top_k,
)


def ref_softmax(row: list[float]) -> list[float]:
    m = max(row)
    e = [math.exp(v - m) for v in row]
    return [v / sum(e) for v in e]


def test_softmax_is_per_row_and_survives_huge_logits() -> None:
    x = np.array([[1000.0, 1001.0, 999.0], [-5.0, 0.0, 5.0]], np.float32)
    got = softmax(x)
    assert got.dtype == np.float32 and got.shape == (2, 3)
    for row, out in zip(x.tolist(), got.tolist()):
        assert out == pytest.approx(ref_softmax(row), rel=1e-6)
    one = softmax(np.array([2.0, 1.0, 0.1]))
    assert one.shape == (3,) and one.tolist() == pytest.approx(ref_softmax([2.0, 1.0, 0.1]), rel=1e-6)


@pytest.mark.parametrize(
    ("row", "probs"),
    [
        ([0.5, 0.5], True),
        ([1.0, 0.0], True),
        ([-0.001, 1.001], True),  # at the tolerance: float noise of an exported softmax
        ([-0.002, 1.002], False),
        ([0.0005, 1.0005], True),
        ([0.3, 0.3], False),  # in [0, 1] but not a distribution
        ([2.0, -1.0], False),  # sums to 1 but logits
        ([1.0, 1.0, -1.0], False),
    ],
)
def test_what_counts_as_probabilities(row: list[float], probs: bool) -> None:
    assert looks_like_probabilities(np.array([row], np.float64)) is probs


def test_every_row_must_be_a_distribution() -> None:
    assert looks_like_probabilities(np.array([[0.5, 0.5], [0.2, 0.8]]))
    assert not looks_like_probabilities(np.array([[0.5, 0.5], [0.2, 0.2]]))
    # two rows of one class each sum to 1 over the batch too: still per row
    assert not looks_like_probabilities(np.array([[0.5], [0.5]]))


def test_to_probabilities_passes_probabilities_and_softmaxes_logits_per_image() -> None:
    p = to_probabilities(np.array([0.25, 0.75], np.float64))
    assert p.dtype == np.float32 and p.tolist() == [[0.25, 0.75]]
    logits = np.array([[[1.0, 2.0]], [[3.0, 3.0]]], np.float32)  # [N, 1, C] as some exports give
    got = to_probabilities(logits)
    assert got.shape == (2, 2)
    assert got.tolist() == [pytest.approx(ref_softmax([1.0, 2.0])), pytest.approx([0.5, 0.5])]


def test_top_k_per_row_with_names_and_ids() -> None:
    probs = np.array([[0.1, 0.6, 0.3], [0.5, 0.2, 0.3]], np.float64)
    names = {0: "cat", 1: "dog"}
    assert top_k(probs, names) == [
        [Classification("dog", 1, pytest.approx(0.6))],
        [Classification("cat", 0, pytest.approx(0.5))],
    ]
    two = top_k(probs, names, 2)
    assert [[(c.label, c.class_id) for c in row] for row in two] == [
        [("dog", 1), ("2", 2)],
        [("cat", 0), ("2", 2)],
    ]
    assert all(isinstance(c.class_id, int) and isinstance(c.confidence, float) for row in two for c in row)
    assert [len(r) for r in top_k(probs, names, 10)] == [3, 3] and [
        len(r) for r in top_k(probs, names, 0)
    ] == [1, 1]


def test_top_k_ties_go_to_the_lower_class_id() -> None:
    probs = np.zeros((1, 40), np.float32)
    probs[0, [7, 3, 30]] = 0.25
    assert [c.class_id for c in top_k(probs, {}, 3)[0]] == [3, 7, 30]


def test_a_classification_as_json() -> None:
    c = Classification("dog", 1, 0.123456789)
    assert json.dumps(c.to_json()) == '{"label": "dog", "class_id": 1, "confidence": 0.12346}'
