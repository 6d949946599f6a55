"""COCO-style mAP, detection matching and classifier agreement against hand-computed cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from edge_agent.core.vision.accuracy import (
    Boxes,
    average_precision,
    classifier_agreement,
    detection_agreement,
    greedy_match,
    mean_average_precision,
    raw_difference,
    top1_accuracy,
)

pytestmark = pytest.mark.arm_smoke


def test_ap_tp_fp_tp_is_101_point_interpolated() -> None:
    # scores 0.9 TP, 0.8 FP, 0.7 TP with 2 GT: recall .5 .5 1, precision 1 .5 .667 -> envelope 1 .667 .667
    # recall points 0.00..0.50 (51 of them) see precision 1, 0.51..1.00 (50) see 2/3
    ap = average_precision(np.array([True, False, True]), np.array([0.9, 0.8, 0.7], np.float32), 2)
    assert ap == pytest.approx((51 * 1.0 + 50 * (2 / 3)) / 101)


def test_ap_sorts_by_score_and_handles_edges() -> None:
    shuffled = average_precision(np.array([True, True, False]), np.array([0.7, 0.9, 0.8], np.float32), 2)
    assert shuffled == pytest.approx((51 * 1.0 + 50 * (2 / 3)) / 101)
    assert average_precision(np.array([True, True]), np.array([0.9, 0.8], np.float32), 2) == pytest.approx(
        1.0
    )
    assert average_precision(np.zeros(0, bool), np.zeros(0, np.float32), 3) == 0.0
    assert math.isnan(average_precision(np.array([False]), np.array([0.5], np.float32), 0))
    # one of two GT found, perfectly ranked: recall points up to 0.5 -> 51/101
    assert average_precision(np.array([True]), np.array([0.9], np.float32), 2) == pytest.approx(51 / 101)


def test_map50_95_counts_only_thresholds_the_iou_clears() -> None:
    gt = [Boxes.make([[0, 0, 10, 10]], [0])]
    pred = [Boxes.make([[0, 0, 10, 7.5]], [0], [0.9])]  # IoU 0.75: TP at 0.50..0.75 (6 of 10)
    m = mean_average_precision(pred, gt)
    assert m["map50"] == pytest.approx(1.0)
    assert m["map50_95"] == pytest.approx(0.6)
    assert m["classes"] == 1


def test_map_ignores_classes_without_ground_truth_and_penalises_wrong_class() -> None:
    gts = [Boxes.make([[0, 0, 10, 10], [20, 20, 30, 30]], [0, 1])]
    preds = [Boxes.make([[0, 0, 10, 10], [20, 20, 30, 30], [50, 50, 60, 60]], [0, 0, 2], [0.9, 0.8, 0.7])]
    m = mean_average_precision(preds, gts)
    # class 0: TP then FP -> AP 1; class 1: nothing found -> 0; class 2 has no GT -> left out
    assert m["classes"] == 2
    assert m["map50"] == pytest.approx(0.5)


def test_map_one_prediction_cannot_match_two_ground_truths() -> None:
    gts = [Boxes.make([[0, 0, 10, 10], [1, 0, 11, 10]], [0, 0])]
    preds = [Boxes.make([[0, 0, 10, 10]], [0], [0.9])]
    assert mean_average_precision(preds, gts)["map50"] == pytest.approx(51 / 101)


def test_greedy_match_by_confidence_same_class_only() -> None:
    ref = Boxes.make([[0, 0, 10, 10], [1, 1, 11, 11], [50, 50, 60, 60]], [0, 0, 1], [0.6, 0.9, 0.8])
    cand = Boxes.make([[1, 1, 11, 11], [50, 50, 60, 60]], [0, 2], [0.7, 0.8])
    pairs = greedy_match(ref, cand)
    # the 0.9 reference takes the only class-0 candidate; the class-1 ref has no class-1 candidate
    assert pairs == [(1, 0, pytest.approx(1.0))]
    st = detection_agreement([ref], [cand])
    assert (st.ref_count, st.cand_count, st.matched) == (3, 2, 1)
    assert st.recall == pytest.approx(1 / 3)
    assert st.mean_abs_conf_delta == pytest.approx(0.2)


def test_greedy_match_respects_iou_threshold() -> None:
    ref = Boxes.make([[0, 0, 10, 10]], [0], [0.9])
    cand = Boxes.make([[5, 0, 15, 10]], [0], [0.9])  # IoU 1/3
    assert greedy_match(ref, cand, 0.5) == []
    assert len(greedy_match(ref, cand, 0.3)) == 1


def test_classifier_agreement_and_accuracy() -> None:
    ref = np.array([[0.7, 0.2, 0.1], [0.1, 0.8, 0.1]], np.float32)
    cand = np.array([[0.6, 0.3, 0.1], [0.5, 0.4, 0.1]], np.float32)
    ag = classifier_agreement(ref, cand)
    assert ag.top1_agreement == pytest.approx(0.5)
    assert ag.top5_overlap == pytest.approx(1.0)  # 3 classes: top-k is all of them
    assert ag.max_abs_prob_delta == pytest.approx(0.4)
    assert top1_accuracy(ref, [0, 1]) == 1.0
    assert top1_accuracy(cand, [0, 1]) == 0.5


def test_raw_difference_is_relative_to_output_scale() -> None:
    a = np.array([0.0, 100.0, -50.0])
    b = np.array([1e-3, 99.0, -50.0])
    assert raw_difference(a, b) == (pytest.approx(1.0), pytest.approx(0.01))
    assert raw_difference(np.zeros(3), np.zeros(3)) == (0.0, 0.0)


def test_detector_raw_diffs_ignore_boxes_of_empty_anchors() -> None:
    from edge_agent.inference.compare import detector_raw_diffs

    ref = np.zeros((1, 6, 10), np.float32)  # 4 box rows + 2 classes, 10 anchors
    ref[0, :4, 0] = [10, 10, 4, 4]
    ref[0, 4, 0] = 0.9  # only anchor 0 is confident
    cand = ref.copy()
    cand[0, :4, 0] += 2.0  # confident box moved 2 px
    cand[0, :4, 2] += 300.0  # an empty anchor's box moved a lot: nobody sees it
    cand[0, 5, 1] = 0.2
    score, box = detector_raw_diffs(ref, cand, 0.25)
    assert score == pytest.approx(0.2) and box == pytest.approx(2.0)
    # channels-last layout gives the same answer
    s2, b2 = detector_raw_diffs(ref.transpose(0, 2, 1), cand.transpose(0, 2, 1), 0.25)
    assert (s2, b2) == (pytest.approx(0.2), pytest.approx(2.0))
