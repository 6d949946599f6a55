"""The raw-output and classifier figures of ``validate`` on exact numbers (core/vision/accuracy.py)."""

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


# ---- mAP / AP against hand-computed values (COCO: pycocotools' 101-point interpolation) --------


def coco_ap(ranked_hits: list[bool], n_gt: int) -> float:
    """The COCO definition written out: at each recall point r = 0, 0.01, ..., 1 the best precision
    reached at a recall >= r (0 where the recall never gets there), averaged over the 101 points."""
    tp = fp = 0
    points: list[tuple[float, float]] = []
    for hit in ranked_hits:
        tp, fp = tp + hit, fp + (not hit)
        points.append((tp / n_gt, tp / (tp + fp)))
    total = 0.0
    for i in range(101):
        r = i / 100
        total += max((p for rc, p in points if rc >= r - 1e-12), default=0.0)
    return total / 101


def test_ap_five_predictions_by_hand() -> None:
    # TP FP TP FP TP, 4 GT: recall .25 .25 .5 .5 .75, precision 1 .5 .667 .5 .6 -> envelope 1 .667 .667 .6 .6
    # recall points 0-.25 (26) see 1, .26-.50 (25) see 2/3, .51-.75 (25) see .6, .76-1 (25) see nothing
    hits = [True, False, True, False, True]
    ap = average_precision(np.array(hits), np.array([0.9, 0.8, 0.7, 0.6, 0.5], np.float32), 4)
    assert ap == pytest.approx((26 * 1.0 + 25 * (2 / 3) + 25 * 0.6) / 101)
    assert ap == pytest.approx(coco_ap(hits, 4))


def test_ap_only_false_positives_is_zero_and_a_late_hit_counts_at_its_precision() -> None:
    assert average_precision(np.array([False, False]), np.array([0.9, 0.8], np.float32), 3) == 0.0
    # FP FP TP, 1 GT: every recall point sees precision 1/3
    ap = average_precision(np.array([False, False, True]), np.array([0.9, 0.8, 0.7], np.float32), 1)
    assert ap == pytest.approx(1 / 3)


def test_ap_ties_are_ranked_in_input_order_as_pycocotools_mergesort_does() -> None:
    # 20 predictions, two score levels interleaved; among the 0.5s the first five miss, the last five hit
    scores = np.array([0.9, 0.5] * 10, np.float32)
    hits = np.array([True, False] * 5 + [True, True] * 5)
    ranked = [True] * 10 + [False] * 5 + [True] * 5
    ap = average_precision(hits, scores, 15)
    assert ap == pytest.approx(coco_ap(ranked, 15))
    assert ap != pytest.approx(coco_ap([True] * 10 + [True] * 5 + [False] * 5, 15))  # the order matters


def test_a_duplicate_detection_is_a_false_positive() -> None:
    # A found, A found again (a duplicate the NMS let through), then B: T F T over 2 GT
    gts = [Boxes.make([[0, 0, 10, 10], [50, 0, 60, 10]], [0, 0])]
    preds = [Boxes.make([[0, 0, 10, 10], [0, 0, 10, 9.5], [50, 0, 60, 10]], [0, 0, 0], [0.9, 0.8, 0.7])]
    m = mean_average_precision(preds, gts, (0.5,))
    assert m["map50"] == pytest.approx(coco_ap([True, False, True], 2))
    assert m["map50"] == pytest.approx((51 * 1.0 + 50 * (2 / 3)) / 101)


def test_the_higher_score_takes_the_ground_truth_even_with_a_worse_box() -> None:
    gts = [Boxes.make([[0, 0, 10, 10]], [0])]
    preds = [Boxes.make([[0, 0, 10, 10], [0, 0, 10, 6]], [0, 0], [0.6, 0.9])]  # IoU 1.0 and 0.6
    m = mean_average_precision(preds, gts)
    # at 0.50-0.60 the 0.9 box matches (perfect AP); from 0.65 on it misses and the 0.6 box is the
    # hit, ranked second: AP = coco_ap([F, T])
    assert m["map50"] == pytest.approx(1.0)
    assert m["map50_95"] == pytest.approx((3 * 1.0 + 7 * coco_ap([False, True], 1)) / 10)


def test_a_used_ground_truth_leaves_the_next_best_to_the_next_prediction() -> None:
    gts = [Boxes.make([[0, 0, 10, 10], [2, 0, 12, 10]], [0, 0])]
    preds = [Boxes.make([[1, 0, 11, 10], [1, 0, 11, 10]], [0, 0], [0.9, 0.8])]  # both overlap both
    assert mean_average_precision(preds, gts, (0.5,))["map50"] == pytest.approx(1.0)


def test_matching_is_per_image_and_ground_truth_is_counted_over_all_images() -> None:
    gts = [Boxes.make([[0, 0, 10, 10]], [0]), Boxes.make([[50, 50, 60, 60]], [0])]
    preds = [
        Boxes.make([[50, 50, 60, 60]], [0], [0.95]),  # image 1: where image 2's GT is: a FP
        Boxes.make([[50, 50, 60, 60]], [0], [0.9]),
    ]
    m = mean_average_precision(preds, gts, (0.5,))
    assert m["map50"] == pytest.approx(coco_ap([False, True], 2))  # ranked over both images
    # a prediction in an image without any ground truth of its class is a false positive too
    gts2 = [Boxes.make([[0, 0, 10, 10]], [0]), Boxes.make(np.zeros((0, 4)), [])]
    preds2 = [Boxes.make([[0, 0, 10, 10]], [0], [0.5]), Boxes.make([[0, 0, 5, 5]], [0], [0.9])]
    assert mean_average_precision(preds2, gts2, (0.5,))["map50"] == pytest.approx(coco_ap([False, True], 1))


def test_tied_predictions_are_matched_in_input_order() -> None:
    # 20 predictions in one image, 0.9 / 0.5 interleaved; five GTs; the 0.9s miss, the first five
    # 0.5s hit, the last five miss: ranked F x 10, T x 5, F x 5
    far = [[200 + 20 * i, 200, 210 + 20 * i, 210] for i in range(15)]
    on = [[20 * i, 0, 20 * i + 10, 10] for i in range(5)]
    boxes = []
    it_far, it_on = iter(far), iter(on)
    for i in range(20):
        boxes.append(next(it_on) if i % 2 and i < 10 else next(it_far))
    preds = [Boxes.make(boxes, [0] * 20, [0.9, 0.5] * 10)]
    gts = [Boxes.make(on, [0] * 5)]
    expected = coco_ap([False] * 10 + [True] * 5 + [False] * 5, 5)
    assert (
        mean_average_precision(preds, gts, (0.5,))["map50"] == pytest.approx(expected) == pytest.approx(1 / 3)
    )


def test_map_of_nothing_and_of_no_predictions() -> None:
    empty = mean_average_precision([], [])
    assert set(empty) == {"map50", "map50_95", "classes"} and empty["classes"] == 0
    assert math.isnan(empty["map50"]) and math.isnan(empty["map50_95"])
    no_gt = mean_average_precision(
        [Boxes.make([[0, 0, 1, 1]], [0], [0.9])], [Boxes.make(np.zeros((0, 4)), [])]
    )
    assert no_gt["classes"] == 0 and math.isnan(no_gt["map50"])
    gts = [Boxes.make([[0, 0, 10, 10]], [3])]
    assert mean_average_precision([], gts) == {"map50": 0.0, "map50_95": 0.0, "classes": 1}


def test_map50_is_read_at_0_5_wherever_it_sits_in_the_thresholds() -> None:
    gts = [Boxes.make([[0, 0, 10, 10]], [0])]
    preds = [Boxes.make([[0, 0, 10, 4]], [0], [0.9])]  # IoU 0.4: a hit at 0.3 only
    m = mean_average_precision(preds, gts, (0.3, 0.5, 0.7))
    assert m["map50"] == 0.0 and m["map50_95"] == pytest.approx(1 / 3)
    # without 0.5 among them, "map50" is the first threshold's
    assert mean_average_precision(preds, gts, (0.3, 0.7))["map50"] == pytest.approx(1.0)
    assert mean_average_precision(preds, gts, (0.7, 0.3))["map50"] == 0.0


def test_greedy_match_takes_an_iou_exactly_at_the_threshold_and_agreement_passes_it_on() -> None:
    ref = Boxes.make([[0, 0, 10, 10]], [0], [0.9])
    half = Boxes.make([[0, 0, 10, 5]], [0], [0.7])  # IoU exactly 0.5
    assert greedy_match(ref, half, 0.5) == [(0, 0, 0.5)]
    third = Boxes.make([[5, 0, 15, 10]], [0], [0.9])  # IoU 1/3
    st = detection_agreement([ref], [third], iou_threshold=0.3)
    assert st.matched == 1 and st.mean_iou == pytest.approx(1 / 3)
    assert detection_agreement([ref], [third]).matched == 0  # the default is 0.5


def test_greedy_match_takes_tied_references_in_input_order() -> None:
    # 20 references, 0.9 / 0.5 interleaved; the only candidate overlaps references 5 and 7 (both
    # 0.5), 7 better: 5 comes first among the tied, so 5 takes it
    refs = [[100 * i, 500, 100 * i + 10, 510] for i in range(20)]
    refs[5], refs[7] = [0, 0, 10, 10], [0, 0, 10, 9]
    ref = Boxes.make(refs, [0] * 20, [0.9, 0.5] * 10)
    cand = Boxes.make([[0, 0, 10, 9]], [0], [0.8])
    assert [p[:2] for p in greedy_match(ref, cand)] == [(5, 0)]


def test_boxes_from_float_class_ids_are_integers() -> None:
    # YOLO label files are read as numbers: "0 0.5 0.5 0.2 0.1" gives a class id 0.0
    b = Boxes.make([[0, 0, 1, 1], [1, 1, 2, 2]], [0.0, 2.0])
    assert b.class_ids.dtype == np.int64 and b.class_ids.tolist() == [0, 2]


def test_classifier_ties_rank_the_lower_class_first_like_argmax() -> None:
    flat = np.full((1, 20), 0.05, np.float32)  # a saturated model: every class alike
    peaked = np.full((1, 20), 0.0375, np.float32)
    peaked[0, 0], peaked[0, 1:5] = 0.2, 0.1  # classes 0-4 on top
    interleaved = np.array([[0.06, 0.04] * 10], np.float32)  # tied top: 0, 2, 4, ..., 18
    evens = np.full((1, 20), 0.02, np.float32)
    evens[0, [0, 2, 4, 6, 8]] = 0.16  # classes 0, 2, 4, 6, 8 on top
    a = classifier_agreement(flat, peaked)
    assert a.top1_agreement == 1.0 and a.top5_overlap == 1.0
    b = classifier_agreement(interleaved, evens)
    assert b.top1_agreement == 1.0 and b.top5_overlap == 1.0  # the tied 0.06s: the five lowest
    assert classifier_agreement(interleaved, peaked).top5_overlap == pytest.approx(3 / 5)  # 0, 2, 4


def test_raw_difference_of_int8_outputs_and_of_probabilities() -> None:
    # an INT8 model's raw output: |-128| must not wrap around to -128
    assert raw_difference(np.array([-128, 5], np.int8), np.array([-128, 6], np.int8)) == (1.0, 1 / 128)
    assert raw_difference(np.array([0.5, 0.25]), np.array([0.4, 0.25])) == (
        pytest.approx(0.1),
        pytest.approx(0.2),
    )
