"""The format registry's rules on plain arrays (no model): which shape is which format at each
boundary, the metadata words that decide, the decoders' scores/classes/filters/dtypes, and what
``finish`` keeps. Mutation testing found these loose; each case is a model a user could have."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edge_agent.core.vision.formats import (
    FORMATS,
    REGISTRY,
    Candidates,
    Resolved,
    anchor_count,
    decode_output,
    finish,
    resolve_format,
    understood,
)
from edge_agent.core.vision.preprocess import Letterbox
from edge_agent.errors import ModelError

SAME = Letterbox(1.0, 1.0, 0, 0, 640, 640)  # model input == image


def fmt_of(shape: tuple[int, ...], names: int = 0, meta: dict[str, str] | None = None,
           hw: tuple[int, int] = (640, 640), forced: str | None = None) -> tuple[str, bool, int | None]:  # fmt: skip
    r = resolve_format(shape, names, meta or {}, hw, forced)
    return (r.fmt.name, r.transposed, r.num_classes)


# ---- which format -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("shape", "names", "hw", "want"),
    [
        # YOLOv8/11 as exported, and already transposed
        ((1, 84, 8400), 80, (640, 640), ("yolov8", True, 80)),
        ((1, 8400, 84), 0, (640, 640), ("yolov8", False, 80)),
        # the anchor count decides even when 4+nc outnumbers the anchors (an 8x8 input: 3 cells)
        ((1, 3, 5), 0, (8, 8), ("yolov8", False, 1)),
        ((1, 5, 3), 0, (8, 8), ("yolov8", True, 1)),
        # a dynamic anchor axis: the known axis is 4+nc, from 5 (one class) up
        ((1, 5, -1), 0, (640, 640), ("yolov8", True, 1)),
        ((1, -1, 5), 0, (640, 640), ("yolov8", False, 1)),
        ((1, 0, 84), 0, (0, 0), ("yolov8", False, 80)),  # 0 = unknown, as -1
        # YOLOv5: 3 anchors per cell (64x64: 84 cells), and by the class count
        ((1, 252, 7), 0, (64, 64), ("yolov5", False, 2)),
        ((1, 252, 6), 2, (64, 64), ("yolov8", False, 2)),  # 3x cells but 4+nc wide: YOLOv8
        ((1, 7, 7), 2, (0, 0), ("yolov5", False, 2)),
        ((1, 6, 7), 2, (0, 0), ("yolov8", True, 2)),  # 4+nc rows: a transposed YOLOv8
        # RT-DETR by shape: at most a quarter of the cells as rows, more rows than columns
        ((1, 2100, 84), 0, (640, 640), ("rtdetr", False, 80)),
        ((1, 2101, 84), 0, (640, 640), ("yolov8", False, 80)),
        ((1, 84, 84), 0, (640, 640), ("yolov8", False, 80)),  # square: not RT-DETR without names
        ((1, 300, 84), 80, (640, 640), ("rtdetr", False, 80)),
        # end2end [K, 6]: fewer rows than cells, or dynamic K unless 1-2 classes make it ambiguous
        ((1, 300, 6), 0, (640, 640), ("end2end", False, None)),
        ((1, 300, 6), 3, (640, 640), ("end2end", False, 3)),
        ((1, -1, 6), 0, (640, 640), ("end2end", False, None)),
        ((1, -1, 6), 3, (640, 640), ("end2end", False, 3)),
        ((1, -1, 6), 1, (640, 640), ("yolov5", False, 1)),
        ((1, -1, 6), 2, (640, 640), ("yolov8", False, 2)),
        ((1, 8400, 6), 2, (640, 640), ("yolov8", False, 2)),
    ],
)
def test_the_format_table(
    shape: tuple[int, ...], names: int, hw: tuple[int, int], want: tuple[str, bool, int | None]
) -> None:
    assert fmt_of(shape, names, hw=hw) == want


@pytest.mark.parametrize("key", ["description", "model", "name"])
@pytest.mark.parametrize("word", ["rtdetr", "RT-DETR", "Rt-Detr"])
def test_rtdetr_named_in_any_metadata_field_is_read_as_rtdetr(key: str, word: str) -> None:
    # a dynamic query count: nothing in the shape says RT-DETR, only the metadata
    assert fmt_of((1, -1, 84), meta={key: f"Ultralytics {word}-l model"}) == ("rtdetr", False, 80)
    assert fmt_of((1, -1, 84), meta={key: "Ultralytics YOLOv8n"}) == ("yolov8", False, 80)


@pytest.mark.parametrize(
    "meta",
    [
        {"end2end": "True"},
        {"end2end": " true "},
        {"end2end": "1"},
        {"end2end": "YES"},
        {"description": "YOLOv10n"},
        {"model": "yolov10s.pt"},
        {"name": "YOLOv10"},
    ],
)
def test_end2end_flag_or_yolov10_in_the_metadata_decides(meta: dict[str, str]) -> None:
    # 8400 rows of 6 with 2 names is a 2-class YOLOv8 by shape; the metadata says otherwise
    assert fmt_of((1, 8400, 6), 2, meta) == ("end2end", False, 2)


@pytest.mark.parametrize(
    "meta", [{"end2end": "false"}, {"end2end": "0"}, {"end2end": ""}, {"other": "yolov10"}]
)
def test_anything_else_is_not_the_end2end_flag(meta: dict[str, str]) -> None:
    assert fmt_of((1, 8400, 6), 2, meta) == ("yolov8", False, 2)


def test_forced_formats_need_only_what_their_decoder_needs() -> None:
    assert fmt_of((1, 84, 3), forced="yolov8") == ("yolov8", True, 80)
    assert fmt_of((1, 5, 3), forced="yolov8") == ("yolov8", True, 1)
    with pytest.raises(ModelError, match=r"^output shape \[1, 4, 3\] is not yolov8 "):
        fmt_of((1, 4, 3), forced="yolov8")
    assert fmt_of((1, 8400, 84), forced="rtdetr") == ("rtdetr", False, 80)
    assert fmt_of((1, 8400, 85), forced="yolov5") == ("yolov5", False, 80)
    assert fmt_of((1, 8400, 6), 80, forced="end2end") == ("end2end", False, 80)


@pytest.mark.parametrize("shape", [(1, 3, 84), (1, 1, 84), (1, 4, 4), (2, 84, 8400), (84, 8400)])
def test_shapes_no_format_reads_are_one_line_naming_shape_and_class_count(shape: tuple[int, ...]) -> None:
    with pytest.raises(ModelError) as err:
        fmt_of(shape)
    msg = str(err.value)
    assert msg.startswith(f"output shape {list(shape)} ") and "\n" not in msg
    assert understood() in msg
    assert "class names" not in msg


def test_the_refusal_names_the_class_count_when_there_is_one() -> None:
    with pytest.raises(ModelError, match=r"^output shape \[1, 3, 83\] with 80 class names is not a detector"):
        fmt_of((1, 3, 83), 80)


def test_understood_lists_every_format_once_in_registry_order() -> None:
    text = understood()
    assert text.startswith(f"rtdetr {FORMATS['rtdetr'].shape}; end2end ")
    assert f"; yolov5 {FORMATS['yolov5'].shape}; yolov8 " in text and text.endswith(FORMATS["yolov8"].shape)
    assert [text.count(f"{f.name} {f.shape}") for f in REGISTRY] == [1, 1, 1, 1]


@settings(max_examples=300, deadline=None)
@given(
    dims=st.lists(st.one_of(st.none(), st.integers(-1, 9000), st.text(max_size=3)), min_size=1, max_size=4),
    names=st.integers(0, 2000),
    hw=st.tuples(st.integers(0, 2000), st.integers(0, 2000)),
    forced=st.sampled_from([None, *FORMATS]),
)
def test_any_shape_resolves_or_is_refused_in_one_line(
    dims: list[object], names: int, hw: tuple[int, int], forced: str | None
) -> None:
    # ONNX reports dynamic axes as None, -1, 0 or a name: never a TypeError, never a wrong width
    try:
        r = resolve_format(tuple(dims), names, {}, hw, forced)
    except ModelError as exc:
        assert "\n" not in str(exc)
    else:
        assert r.num_classes is None or r.num_classes >= 1


def test_the_anchor_count_rounds_each_stride_up() -> None:
    assert anchor_count((640, 640)) == 8400
    for hw in [(49, 97), (641, 479), (1, 1)]:
        assert anchor_count(hw) == sum(math.ceil(hw[0] / s) * math.ceil(hw[1] / s) for s in (8, 16, 32))


# ---- decoding -----------------------------------------------------------------------------------
def yolov8_rows(scores: list[list[float]], boxes: list[list[float]] | None = None) -> np.ndarray:
    """[1, 4+nc, N] from per-row class scores; box i is 10 px wide at x = 20*i."""
    n = len(scores)
    b = boxes or [[20 * i + 5, 50, 10, 10] for i in range(n)]
    rows = np.concatenate([np.asarray(b, np.float32), np.asarray(scores, np.float32)], axis=1)
    return rows.T[None]


def test_yolov8_picks_the_best_class_per_row_above_the_threshold() -> None:
    out = yolov8_rows([[0.1, 0.9, 0.2], [0.3, 0.2, 0.1], [0.25, 0.0, 0.0], [0.0, 0.0, 0.26]])
    r = resolve_format(out.shape, 3, {}, (640, 640))
    dets, best = decode_output(out, r, SAME, 0.25)
    assert best == pytest.approx(0.9)
    assert dets.class_ids.tolist() == [1, 0, 2]  # 0.25 is not above 0.25
    np.testing.assert_allclose(dets.scores, [0.9, 0.3, 0.26], rtol=1e-6)
    np.testing.assert_allclose(dets.boxes[0], [0, 45, 10, 55])  # cx 5 w 10 -> 0..10
    assert dets.boxes.dtype == np.float32 and dets.scores.dtype == np.float32
    assert dets.class_ids.dtype == np.int64


@pytest.mark.parametrize("fmt", ["yolov8", "yolov5", "rtdetr", "end2end"])
def test_the_class_filter_keeps_only_the_listed_classes(fmt: str) -> None:
    # three rows, classes 0, 1, 2, all well above the threshold, far apart
    xs = [100.0, 300.0, 500.0]
    if fmt == "yolov8":
        out = yolov8_rows([[0.9, 0, 0], [0, 0.8, 0], [0, 0, 0.7]], [[x, 50, 20, 20] for x in xs])
    elif fmt == "yolov5":
        out = np.asarray([[x, 50, 20, 20, 1.0, *(s if c == i else 0 for c in range(3))]
                          for i, (x, s) in enumerate(zip(xs, [0.9, 0.8, 0.7]))], np.float32)[None]  # fmt: skip
    elif fmt == "rtdetr":
        out = np.asarray([[x / 640, 50 / 640, 20 / 640, 20 / 640, *(s if c == i else 0 for c in range(3))]
                          for i, (x, s) in enumerate(zip(xs, [0.9, 0.8, 0.7]))], np.float32)[None]  # fmt: skip
    else:
        out = np.asarray([[x - 10, 40, x + 10, 60, s, i] for i, (x, s) in enumerate(zip(xs, [0.9, 0.8, 0.7]))],
                         np.float32)[None]  # fmt: skip
    r = resolve_format(out.shape, 3, {}, (640, 640), fmt)
    dets, best = decode_output(out, r, SAME, 0.25, classes=[2, 0])
    assert dets.class_ids.tolist() == [0, 2]
    np.testing.assert_allclose(dets.scores, [0.9, 0.7], rtol=1e-6)
    np.testing.assert_allclose(dets.boxes[:, 0], [90, 490], atol=1e-3)
    assert best == pytest.approx(0.9)  # the watch sees every row, filtered or not
    assert dets.class_ids.dtype == np.int64 and dets.scores.dtype == np.float32
    assert decode_output(out, r, SAME, 0.25, classes=[])[0].class_ids.tolist() == []
    # a listed class below the threshold stays out
    assert decode_output(out, r, SAME, 0.75, classes=[2, 0])[0].class_ids.tolist() == [0]


def test_yolov5_score_is_objectness_times_class_score() -> None:
    out = np.asarray(
        [[100, 50, 20, 20, 0.5, 0.9, 0.1, 0.2], [300, 50, 20, 20, 0.9, 0.1, 0.2, 0.3]], np.float32
    )[None]
    r = resolve_format(out.shape, 3, {}, (640, 640))
    assert r.fmt.name == "yolov5"
    dets, best = decode_output(out, r, SAME, 0.25)
    np.testing.assert_allclose(dets.scores, [0.45, 0.27], rtol=1e-6)
    assert dets.class_ids.tolist() == [0, 2]
    assert best == pytest.approx(0.45)


@pytest.mark.parametrize("fmt", ["yolov8", "yolov5", "rtdetr", "end2end"])
def test_no_rows_and_rows_below_the_threshold_give_typed_empty_candidates(fmt: str) -> None:
    width = {"yolov8": 7, "yolov5": 8, "rtdetr": 7, "end2end": 6}[fmt]
    r = resolve_format((1, 300, width), 3, {}, (640, 640), fmt)
    for rows, best in [
        (np.zeros((1, 0, width), np.float32), 0.0),
        (np.full((1, 4, width), 0.1, np.float32), None),
    ]:
        c = r.candidates(rows, 0.5, None)
        assert c.boxes.shape == (0, 4) and c.boxes.dtype == np.float32
        assert c.scores.shape == (0,) and c.scores.dtype == np.float32
        assert c.class_ids.shape == (0,) and c.class_ids.dtype == np.int64
        if best is not None:
            assert c.max_score == best  # exactly 0.0: no row, no score
        else:
            assert 0.0 < c.max_score <= 0.1 + 1e-6
    assert Candidates.none(0.3).max_score == 0.3


@pytest.mark.parametrize("fmt", ["yolov8", "yolov5", "rtdetr", "end2end"])
def test_a_single_row_is_a_detection(fmt: str) -> None:
    row = {
        "yolov8": [320, 320, 40, 40, 0.0, 0.8, 0.0],
        "yolov5": [320, 320, 40, 40, 1.0, 0.0, 0.8, 0.0],
        "rtdetr": [0.5, 0.5, 40 / 640, 40 / 640, 0.0, 0.8, 0.0],
        "end2end": [300, 300, 340, 340, 0.8, 1],
    }[fmt]
    out = np.asarray([row], np.float32)[None]
    r = resolve_format(out.shape, 3, {}, (640, 640), fmt)
    dets, best = decode_output(out, r, SAME, 0.25)
    assert dets.class_ids.tolist() == [1] and best == pytest.approx(0.8)
    np.testing.assert_allclose(dets.boxes[0], [300, 300, 340, 340], atol=1e-3)


def test_rows_of_any_float_dtype_are_read_as_float32() -> None:
    r = resolve_format((1, 7, 300), 3, {}, (640, 640))
    for dtype in (np.float16, np.float64, np.float32):
        out = np.zeros((1, 7, 300), dtype)
        rows = r.rows(out)
        assert rows.dtype == np.float32 and rows.shape == (300, 7)


@pytest.mark.parametrize("shape", [(7, 300, 1, 1), (300,), (1, 1, 7, 300)])
def test_an_output_of_the_wrong_rank_is_a_clear_error(shape: tuple[int, ...]) -> None:
    r = resolve_format((1, 7, 300), 3, {}, (640, 640))
    want = f"detector output must be 3-D [1, ., .], got shape {list(shape)}"
    with pytest.raises(ValueError, match=f"^{re.escape(want)}$"):
        r.rows(np.zeros(shape, np.float32))


@pytest.mark.parametrize("name", ["yolov8", "yolov5", "rtdetr", "end2end"])
def test_a_resolved_format_without_a_class_count_reads_it_from_the_row_width(name: str) -> None:
    # Resolved is public: built without num_classes, the row width gives the classes
    width = {"yolov8": 7, "yolov5": 8, "rtdetr": 7, "end2end": 6}[name]
    known = resolve_format((1, 300, width), 3, {}, (640, 640), name)
    unknown = Resolved(known.fmt, known.transposed, None, known.input_hw)
    rng = np.random.default_rng(1)
    out = rng.uniform(0, 1, (1, 300, width)).astype(np.float32)
    if name == "end2end":
        out[..., 5] = rng.integers(0, 3, 300)
        out[..., 0:4] = np.concatenate(
            [np.minimum(out[..., 0:2], out[..., 2:4]), np.maximum(out[..., 0:2], out[..., 2:4])], -1
        )  # corners
    a, b = known.candidates(out, 0.3, None), unknown.candidates(out, 0.3, None)
    assert a.class_ids.tolist() == b.class_ids.tolist() and a.max_score == b.max_score
    assert known.fmt.classes_in(width) == {"yolov8": 3, "yolov5": 3, "rtdetr": 3, "end2end": 0}[name]


# ---- end2end and the NMS-free order ------------------------------------------------------------
def e2e(rows: list[list[float]]) -> tuple[np.ndarray, Resolved]:
    out = np.asarray(rows, np.float32)[None]
    return out, resolve_format(out.shape, 3, {"end2end": "1"}, (64, 128))


def test_end2end_boxes_in_0_to_1_are_scaled_by_the_input_and_pixels_are_not() -> None:
    out, r = e2e([[0.0, 0.0, 1.0, 1.0, 0.9, 0], [0.25, 0.5, 0.5, 1.0, 0.8, 1]])
    lb = Letterbox(1.0, 1.0, 0, 0, 128, 64)
    dets, _ = decode_output(out, r, lb, 0.25)
    np.testing.assert_allclose(dets.boxes, [[0, 0, 128, 64], [32, 32, 64, 64]], atol=1e-4)
    # a box past 1 is in pixels, even a small one near the corner
    out, r = e2e([[0.0, 0.0, 2.0, 2.0, 0.9, 0]])
    np.testing.assert_allclose(decode_output(out, r, lb, 0.25)[0].boxes, [[0, 0, 2, 2]])
    # the decision looks only at rows above the threshold
    out, r = e2e([[0.0, 0.0, 1.0, 1.0, 0.9, 0], [10, 10, 50, 50, 0.1, 0]])
    np.testing.assert_allclose(decode_output(out, r, lb, 0.25)[0].boxes, [[0, 0, 128, 64]])


def test_end2end_class_ids_are_rounded_integers_and_the_best_score_is_reported() -> None:
    out, r = e2e([[1, 1, 20, 20, 0.3, 1.9999], [30, 1, 50, 20, 0.6, 0.0001], [1, 30, 20, 50, 0.95, 2.0]])
    dets, best = decode_output(out, r, Letterbox(1.0, 1.0, 0, 0, 128, 64), 0.5)
    assert best == pytest.approx(0.95)
    assert dets.class_ids.tolist() == [2, 0] and dets.class_ids.dtype == np.int64
    assert dets.scores.dtype == np.float32


def test_nms_free_ties_keep_the_models_order() -> None:
    # 200 rows, three score levels: among equal scores the model's own order is kept
    rng = np.random.default_rng(0)
    scores = rng.integers(1, 4, 200).astype(np.float32) / 4
    rows = [[i % 60, i // 60 * 10, i % 60 + 1, i // 60 * 10 + 1, s, 0] for i, s in enumerate(scores)]
    out, r = e2e(rows)
    c = r.candidates(out, 0.1, None)
    order = np.argsort(-scores, kind="stable")
    np.testing.assert_array_equal(c.scores, scores[order])
    np.testing.assert_array_equal(c.boxes[:, 0], np.asarray([row[0] for row in rows], np.float32)[order])


# ---- finish: the candidate cap and the padding ------------------------------------------------
def cands(scores: list[float], boxes: list[list[float]] | None = None) -> Candidates:
    n = len(scores)
    b = boxes or [[100 * i, 0, 100 * i + 50, 50] for i in range(n)]
    return Candidates(
        np.asarray(b, np.float32), np.asarray(scores, np.float32), np.zeros(n, np.int64), max(scores)
    )


def test_the_candidate_cap_keeps_the_best_scores() -> None:
    c = cands([0.3, 0.9, 0.5, 0.8, 0.7])
    dets = finish(c, FORMATS["yolov8"], Letterbox(1.0, 1.0, 0, 0, 1000, 1000), max_candidates=3)
    np.testing.assert_allclose(dets.scores, [0.9, 0.8, 0.7])
    np.testing.assert_allclose(dets.boxes[:, 0], [100, 300, 400])
    assert dets.scores.dtype == np.float32


@pytest.mark.parametrize("fmt", ["yolov8", "end2end"])
def test_boxes_wholly_in_the_padding_are_dropped_and_the_others_kept(fmt: str) -> None:
    # a 200x100 image letterboxed into 200x200: 50 px of padding above and below
    lb = Letterbox(1.0, 1.0, 0, 50, 200, 100)
    c = cands(
        [0.9, 0.8, 0.7, 0.6],
        [[10, 0, 40, 40], [10, 120, 40, 140], [10, 160, 40, 190], [150, 100, 160, 149]],  # pad, in, pad, in
    )
    dets = finish(c, FORMATS[fmt], lb)
    np.testing.assert_allclose(dets.boxes, [[10, 70, 40, 90], [150, 50, 160, 99]])
    np.testing.assert_allclose(dets.scores, [0.8, 0.6])
    # and a portrait image: padding left and right
    lb = Letterbox(1.0, 1.0, 50, 0, 100, 200)
    c = cands([0.9, 0.8, 0.7], [[0, 10, 40, 40], [60, 10, 90, 40], [160, 10, 190, 40]])
    dets = finish(c, FORMATS[fmt], lb)
    np.testing.assert_allclose(dets.boxes, [[10, 10, 40, 40]])
