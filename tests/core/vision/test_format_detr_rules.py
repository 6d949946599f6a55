"""RT-DETR's two layouts on plain arrays (no model): which metadata words pick the [1, K, 6] top-K
reading, what a forced name does with 6 columns, and the top-K decoder's threshold, class filter,
order and best score. Mutation testing (issue 36, core-format-parts) found these loose."""

from __future__ import annotations

import numpy as np
import pytest

from edge_agent.core.vision.format_detr import RTDETR_TOPK, RtDetr
from edge_agent.core.vision.formats import decode_output, resolve_format
from edge_agent.core.vision.preprocess import Letterbox
from edge_agent.core.vision.yolo import Detections

HW = (320, 480)  # input h x w
SAME = Letterbox(1.0, 1.0, 0, 0, 480, 320)


@pytest.mark.parametrize(
    "meta",
    [
        {"description": "Ultralytics rtdetr-l model"},
        {"description": "RT-DETR large, COCO"},
        {"model": "RTDETR-x"},
        {"head": "RTDETRDecoder"},
    ],
)
def test_any_one_rtdetr_sign_in_the_metadata_reads_six_columns_as_top_k(meta: dict[str, str]) -> None:
    r = resolve_format((1, 300, 6), 80, meta, HW)
    assert r.fmt is RTDETR_TOPK and not r.transposed
    assert r.num_classes == 80  # `inspect` shows it and the labels check uses it


def test_a_decoder_head_of_another_name_is_not_rtdetr() -> None:
    r = resolve_format((1, 300, 6), 80, {"head": "rtdetrdecoder-ish"}, HW)
    assert r.fmt is not RTDETR_TOPK


def test_forced_rtdetr_with_six_columns_is_top_k_unless_there_are_two_classes() -> None:
    """[1, Q, 6] of a 2-class model is the query layout (4 + 2 scores); any other count is top-K."""
    for nc in (1, 3, 80):
        assert resolve_format((1, 300, 6), nc, {}, HW, forced="rtdetr").fmt is RTDETR_TOPK
    two = resolve_format((1, 300, 6), 2, {}, HW, forced="rtdetr")
    assert type(two.fmt) is RtDetr and two.num_classes == 2


def _rows(*rows: list[float]) -> np.ndarray:
    return np.asarray(rows, np.float32).reshape(1, -1, 6)


def _decode(
    rows: np.ndarray, conf: float = 0.25, classes: list[int] | None = None
) -> tuple[Detections, float]:
    r = resolve_format((1, rows.shape[1], 6), 80, {"head": "RTDETRDecoder"}, HW)
    return decode_output(rows, r, SAME, conf_threshold=conf, classes=classes)


def test_top_k_rows_are_scaled_to_the_input_thresholded_strictly_and_best_first() -> None:
    rows = _rows(
        [0.5, 0.5, 0.25, 0.5, 0.4, 2],  # cx 240 cy 160 w 120 h 160
        [0.25, 0.25, 0.125, 0.25, 0.9, 7],  # cx 120 cy 80 w 60 h 80: best, comes first
        [0.5, 0.5, 0.1, 0.1, 0.25, 1],  # exactly the threshold: not kept (score > conf)
    )
    dets, best = _decode(rows)
    assert dets.class_ids.tolist() == [7, 2] and dets.class_ids.dtype == np.int64
    np.testing.assert_allclose(dets.scores, [0.9, 0.4], atol=1e-6)
    np.testing.assert_allclose(dets.boxes, [[90, 40, 150, 120], [180, 80, 300, 240]], atol=1e-3)
    assert best == pytest.approx(0.9)


def test_the_best_score_counts_rows_under_the_threshold_and_one_row_decodes() -> None:
    dets, best = _decode(_rows([0.5, 0.5, 0.2, 0.2, 0.1, 3]))
    assert len(dets.scores) == 0 and best == pytest.approx(0.1)
    dets, best = _decode(_rows([0.5, 0.5, 0.2, 0.2, 0.8, 3]))
    assert dets.class_ids.tolist() == [3] and best == pytest.approx(0.8)


def test_no_rows_at_all_is_no_detections_and_a_best_score_of_zero() -> None:
    dets, best = _decode(np.zeros((1, 0, 6), np.float32))
    assert len(dets.scores) == 0 and best == 0.0


def test_the_class_filter_keeps_only_listed_classes_above_the_threshold() -> None:
    rows = _rows(
        [0.5, 0.5, 0.2, 0.2, 0.9, 0],  # person: kept
        [0.2, 0.2, 0.1, 0.1, 0.8, 2],  # car: not listed
        [0.8, 0.8, 0.1, 0.1, 0.1, 0],  # person under the threshold
    )
    dets, _ = _decode(rows, classes=[0])
    assert dets.class_ids.tolist() == [0] and dets.scores.tolist() == pytest.approx([0.9])
    dets, _ = _decode(rows, classes=[2, 5])
    assert dets.class_ids.tolist() == [2]
