"""The raw-output and classifier figures of ``validate`` on exact numbers (core/metrics.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from edge_agent.core.metrics import Boxes, classifier_agreement, raw_difference, top1_accuracy


def test_raw_difference_is_absolute_and_relative_to_the_reference_s_largest_value() -> None:
    assert raw_difference(np.array([[-4.0, 1.0]]), np.array([[-1.0, 1.5]])) == (3.0, 0.75)
    assert raw_difference(np.array([0, 200], np.uint8), np.array([255, 100], np.uint8)) == (255.0, 255 / 200)
    assert raw_difference(np.zeros(3), np.zeros(3)) == (0.0, 0.0)
    d, rel = raw_difference(np.zeros(3), np.array([0.0, 0.5, 0.0]))
    assert d == 0.5 and math.isinf(rel)
    assert raw_difference(np.zeros((0, 4)), np.zeros((0, 4))) == (0.0, 0.0)


def test_classifier_agreement_on_fewer_than_five_classes_and_ties() -> None:
    r = np.array([[0.5, 0.3, 0.2], [0.1, 0.1, 0.8]], np.float64)
    c = np.array([[0.3, 0.5, 0.2], [0.1, 0.1, 0.8]], np.float64)
    a = classifier_agreement(r, c)
    assert a.top1_agreement == 0.5 and a.top5_overlap == 1.0  # k = 3: the same three classes
    assert a.max_abs_prob_delta == pytest.approx(0.2)
    r7 = np.array([[0.3, 0.2, 0.15, 0.1, 0.1, 0.1, 0.05]])
    c7 = np.array([[0.05, 0.2, 0.15, 0.1, 0.1, 0.1, 0.3]])  # top-5 shares 4 of 5 (ties by index)
    b = classifier_agreement(r7, c7)
    assert b.top1_agreement == 0.0 and b.top5_overlap == pytest.approx(0.8)
    tie = classifier_agreement(np.array([[0.5, 0.5]]), np.array([[0.5, 0.5]]))
    assert tie.top1_agreement == 1.0 and tie.max_abs_prob_delta == 0.0


def test_top1_accuracy() -> None:
    p = np.array([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4]])
    assert top1_accuracy(p, [0, 1, 1]) == pytest.approx(2 / 3)
    assert math.isnan(top1_accuracy(np.zeros((0, 2)), []))


def test_boxes_make_shapes_and_types() -> None:
    b = Boxes.make([1, 2, 3, 4, 5, 6, 7, 8], [[3], [4]])
    assert b.xyxy.shape == (2, 4) and b.xyxy.dtype == np.float32
    assert b.class_ids.tolist() == [3, 4] and b.class_ids.dtype == np.int64
    assert b.scores.tolist() == [1.0, 1.0] and b.scores.dtype == np.float32 and len(b) == 2
    s = Boxes.make([[0, 0, 1, 1]], [0], [[0.25]])
    assert s.scores.tolist() == [0.25] and s.scores.dtype == np.float32
    e = Boxes.make(np.zeros((0, 4)), np.zeros(0))
    assert e.xyxy.shape == (0, 4) and e.scores.shape == (0,) and len(e) == 0
