"""Detector, Classifier, crops and the cascade (inference.pipeline) on tiny real ONNX models, and
the task/format decision (inference.task) on model descriptions: what ``infer``, ``bench`` and
the agent loop rely on beyond the decoded boxes (timings, the prefetch buffer ring, names,
class filters, crops clipped to the image, full-size boxes)."""

from __future__ import annotations

import logging
import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from support.models import bright_scene, make_color_classifier, make_format_detector

from edge_agent.adapters.runtime.onnx_model import OnnxModel
from edge_agent.core.camera.source_spec import Frame
from edge_agent.errors import ModelError
from edge_agent.inference.pipeline import (
    Classifier,
    Detector,
    DetectorParams,
    classifier_preprocess_for,
    crop_boxes,
    infer_frame,
    run_cascade,
)
from edge_agent.inference.task import detector_format, model_task


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("pipeline")
    return {
        "det": make_format_detector(d / "det.onnx", "yolov5", imgsz_hw=(64, 64)),  # names bright, dim
        "cls": make_color_classifier(d / "cls.onnx", size=16),
        "cls1": make_color_classifier(d / "cls1.onnx", size=16, dynamic_batch=False),
        "det8": make_format_detector(d / "det8.onnx", "yolov8", imgsz_hw=(64, 64)),  # one class
    }


SCENE = bright_scene(64, 64, [(8, 8, 8), (40, 40, 8)])  # two squares, each one 8 px cell


# ---- Detector --------------------------------------------------------------------------------
def test_detect_reports_boxes_and_timings_in_milliseconds(models: dict[str, Path]) -> None:
    det = Detector(OnnxModel(models["det"]))
    assert math.isnan(det.last_max_score)  # nothing seen yet: not a 0 that would look like a broken model
    out = det.detect(SCENE)
    assert len(out.detections) >= 2 and out.raw is None
    assert det.last_max_score == pytest.approx(1.0, abs=0.01)  # white squares score 1
    assert set(out.timings_ms) == {"pre", "infer", "post"}
    for k, v in out.timings_ms.items():
        assert 1e-4 < v < 60_000, (k, v)  # milliseconds: more than 0.1 us, less than a minute
    raw = det.detect(SCENE, keep_raw=True).raw
    assert raw is not None and raw.shape == (1, 64, 7)


def test_the_class_filter_and_the_thresholds_reach_the_decoder(models: dict[str, Path]) -> None:
    m = OnnxModel(models["det"])
    assert set(Detector(m).detect(SCENE).detections.class_ids.tolist()) == {0}
    only_dim = Detector(m, DetectorParams(classes=[1], conf_threshold=0.25))
    assert len(only_dim.detect(SCENE).detections) == 0  # "dim" scores 1/2 x 1/2 of "bright"
    assert Detector(m, DetectorParams(conf_threshold=0.999)).detect(SCENE).detections.class_ids.tolist() == [
        0,
        0,
    ]
    assert len(Detector(m, DetectorParams(max_det=1)).detect(SCENE).detections) == 1


def test_prepare_reuses_a_ring_of_three_buffers(models: dict[str, Path]) -> None:
    det = Detector(OnnxModel(models["det"]))
    preps = [det.prepare(SCENE) for _ in range(4)]
    assert preps[0].blob.shape == (1, 3, 64, 64) and preps[0].blob.dtype == np.float32
    # one being inferred, one in the prefetch hand-off, one being filled: the 4th reuses the 1st
    assert np.shares_memory(preps[0].blob, preps[3].blob)
    assert not any(np.shares_memory(preps[i].blob, preps[j].blob) for i, j in [(0, 1), (0, 2), (1, 2)])
    assert all(0 <= p.pre_ms < 60_000 for p in preps)
    np.testing.assert_array_equal(preps[1].blob, preps[2].blob)
    out = det.detect_prepared(preps[3])
    assert out.timings_ms["pre"] == preps[3].pre_ms and out.raw is None


def test_an_output_the_decoder_cannot_read_is_a_model_error_naming_the_file(models: dict[str, Path]) -> None:
    det = Detector(OnnxModel(models["det"]))
    det.model.run_single = lambda blob: [np.zeros((1, 1, 64, 7), np.float32)]  # type: ignore[method-assign]
    with pytest.raises(
        ModelError, match=r"det\.onnx: detector output must be 3-D \[1, \., \.\], got shape \[1, 1, 64, 7\]$"
    ):
        det.detect(SCENE)


def test_class_ids_from_names_or_numbers_and_an_unknown_one_named(models: dict[str, Path]) -> None:
    det = Detector(OnnxModel(models["det"]))
    assert det.names == {0: "bright", 1: "dim"}
    assert det.class_ids(["dim", "0", "bright"]) == [1, 0, 0]
    with pytest.raises(
        ModelError, match=r"det\.onnx: unknown class 'cat' \(model classes: bright, dim\.\.\.\)$"
    ):
        det.class_ids(["cat"])
    with pytest.raises(ModelError, match="unknown class '7'"):
        det.class_ids(["7"])
    det.model.info.names = {i: f"n{i}" for i in range(25)}
    with pytest.raises(ModelError) as err:
        det.class_ids(["cat"])
    assert str(err.value).endswith(f"(model classes: {', '.join(f'n{i}' for i in range(20))}...)")


def test_a_detector_without_names_gets_class_n_and_a_wrong_count_is_warned(
    models: dict[str, Path], caplog: pytest.LogCaptureFixture
) -> None:
    m = OnnxModel(models["det8"])
    m.info.names = {}
    assert Detector(m).names == {0: "class0"}
    m.info.names = {0: "a", 1: "b"}
    with caplog.at_level(logging.WARNING):
        Detector(m)
    assert caplog.messages == [
        f"{m.path}: 2 class names but the output has 1 classes; unnamed ones are reported as their id"
    ]
    caplog.clear()
    m.info.names = {0: "a"}
    with caplog.at_level(logging.WARNING):
        Detector(m)
    assert caplog.text == ""


def test_a_model_whose_metadata_says_classify_is_refused_as_a_detector(models: dict[str, Path]) -> None:
    m = OnnxModel(models["det"])
    m.info.task = "classify"
    with pytest.raises(
        ModelError, match=r"det\.onnx: metadata says task 'classify', expected a 'detect' model$"
    ):
        Detector(m)


# ---- Classifier -------------------------------------------------------------------------------
def solid(bgr: tuple[int, int, int], size: int = 20) -> np.ndarray:
    return np.full((size, size, 3), bgr, np.uint8)


@pytest.mark.parametrize("name", ["cls", "cls1"])
def test_classify_batches_or_not_and_keeps_the_order(models: dict[str, Path], name: str) -> None:
    c = Classifier(OnnxModel(models[name]), top_k=2)
    got = c.classify([solid((50, 128, 255)), solid((255, 0, 128)), solid((0, 255, 128))])
    assert [[r.label for r in top] for top in got] == [["red", "green"], ["blue", "red"], ["green", "red"]]
    assert c.classify([]) == []
    assert len(Classifier(OnnxModel(models[name])).classify([solid((0, 0, 255))])[0]) == 1  # top 1 by default


def test_the_classifier_preprocess_option_is_used(models: dict[str, Path]) -> None:
    m = OnnxModel(models["cls"])
    c = Classifier(m, preprocess_option="raw,order=BGR")
    assert (c.choice.source, c.pp.color, c.pp.scale) == ("option", "BGR", 1.0)
    # fed in BGR order, a red image reaches the model's "blue" channel
    assert c.classify([solid((0, 0, 255))])[0][0].label == "blue"
    assert classifier_preprocess_for(m, "raw").scale == 1.0
    assert classifier_preprocess_for(m).scale == pytest.approx(1 / 255)


def test_a_classifier_without_names_gets_class_n_and_a_detector_is_refused(models: dict[str, Path]) -> None:
    m = OnnxModel(models["cls"])
    m.info.names = {}
    assert Classifier(m).classify([solid((0, 0, 255))])[0][0].label == "class0"
    det = OnnxModel(models["det"])
    with pytest.raises(
        ModelError, match=r"det\.onnx: output '\w+' has shape \[1, 64, 7\]; expected classifier scores"
    ):
        Classifier(det)


# ---- crops, the cascade and full-size boxes ---------------------------------------------------
def test_crops_grow_by_the_padding_and_stay_inside_the_image() -> None:
    img = np.arange(100 * 200 * 3, dtype=np.uint32).astype(np.uint8).reshape(100, 200, 3)
    boxes = np.asarray(
        [[50, 20, 70, 60], [-30, -10, 10, 10], [190, 90, 260, 130], [199.5, 99.5, 199.5, 99.5]], np.float32
    )
    crops = crop_boxes(img, boxes, 0.1)
    assert [c.shape[:2] for c in crops] == [(48, 24), (12, 14), (14, 17), (1, 1)]
    np.testing.assert_array_equal(crops[0], img[16:64, 48:72])  # 20 +- 2 x 40 +- 4, floor/ceil
    np.testing.assert_array_equal(crops[3], img[99:100, 199:200])  # a degenerate box: one pixel
    assert crop_boxes(img, boxes[:1], 0.0)[0].shape[:2] == (40, 20)
    # a box right of / below the image still gives its nearest pixel; a zero-size box one pixel
    far = np.asarray([[250, 20, 260, 30], [50, 150, 60, 160], [50, 50, 50, 50]], np.float32)
    crops = crop_boxes(img, far, 0.1)
    np.testing.assert_array_equal(crops[0], img[19:31, 199:200])
    np.testing.assert_array_equal(crops[1], img[99:100, 49:61])
    np.testing.assert_array_equal(crops[2], img[50:51, 50:51])


def test_the_cascade_classifies_only_the_chosen_classes(models: dict[str, Path]) -> None:
    det = Detector(OnnxModel(models["det"]))
    cls = Classifier(OnnxModel(models["cls"]))
    red = bright_scene(64, 64, [(8, 8, 8), (40, 40, 8)], color=(0, 0, 255))
    dets, timings = run_cascade(red, det, cls)
    assert len(dets) >= 2 and all(
        d.classification is not None and d.classification.label == "red" for d in dets
    )
    assert 1e-3 < timings["classify"] < 60_000 and {"pre", "infer", "post"} <= set(timings)
    plain, _ = run_cascade(red, det)
    assert [(d.label, d.class_id, d.confidence, d.box) for d in dets] == [
        (d.label, d.class_id, d.confidence, d.box) for d in plain
    ]
    dets, timings = run_cascade(red, det, cls, classify_classes=[1])  # "dim" only: none of them
    assert all(d.classification is None for d in dets) and "classify" in timings
    dets, timings = run_cascade(red, det)
    assert all(d.classification is None for d in dets) and "classify" not in timings
    prepared = det.prepare(red)
    assert run_cascade(np.zeros_like(red), det, cls, prepared=prepared)[0][0].box == dets[0].box


def test_infer_frame_gives_boxes_in_the_size_the_camera_sent(models: dict[str, Path]) -> None:
    det = Detector(OnnxModel(models["det"]))
    frame = Frame(SCENE, 0.0, 0.0, 1, "cam", full_size=(256, 128))  # decoded at 1/4 x 1/2
    small, _ = run_cascade(SCENE, det)
    full, timings = infer_frame(frame, det)
    assert len(full) == len(small) and {"pre", "infer", "post"} <= set(timings)
    for s, f in zip(small, full):
        assert f.box == pytest.approx((s.box[0] * 4, s.box[1] * 2, s.box[2] * 4, s.box[3] * 2))
    # the classifier, its classes, the crop padding and a prepared input all reach the cascade
    cls = Classifier(OnnxModel(models["cls"]))
    red = bright_scene(64, 64, [(8, 8, 8), (40, 40, 8)], color=(0, 0, 255))
    black = Frame(np.zeros_like(red), 0.0, 0.0, 2, "cam")
    got, timings = infer_frame(black, det, cls, classify_classes=[0], padding=0.5, prepared=det.prepare(red))
    assert len(got) == 2 and all(d.classification is not None for d in got) and "classify" in timings
    # with padding 0.5 the crops reach the black border: red's probability drops
    tight, _ = infer_frame(Frame(red, 0.0, 0.0, 3, "cam"), det, cls, padding=0.0)
    wide, _ = infer_frame(Frame(red, 0.0, 0.0, 3, "cam"), det, cls, padding=1.0)
    assert wide[0].classification.confidence < tight[0].classification.confidence  # type: ignore[union-attr]
    none, _ = infer_frame(Frame(red, 0.0, 0.0, 3, "cam"), det, cls, classify_classes=[1])
    assert all(d.classification is None for d in none)


# ---- the task and format decision ---------------------------------------------------------------
def desc(outputs: list[tuple[str, list[object]]], task: str | None = None, names: int = 0) -> SimpleNamespace:
    return SimpleNamespace(
        path="m.onnx",
        input_hw=lambda: (640, 640),
        info=SimpleNamespace(
            outputs=[SimpleNamespace(name=n, shape=s) for n, s in outputs],
            names={i: str(i) for i in range(names)},
            metadata={},
            task=task,
        ),
    )


@pytest.mark.parametrize(
    ("outputs", "task", "want"),
    [
        ([("out", [1, 1000])], None, "classify"),
        ([("out", [1, 84, 8400])], "classify", "classify"),  # the metadata wins
        ([("out", [1, 84, 8400])], None, "detect"),
        ([("out", [1, 84, 8400])], "detect", "detect"),
    ],
)
def test_model_task_from_metadata_and_output_shape(outputs: list[tuple[str, list[object]]], task: str | None,
                                                   want: str) -> None:  # fmt: skip
    assert model_task(desc(outputs, task)) == want


@pytest.mark.parametrize(
    ("shape", "task"), [([1, 3, 8], None), ([1, 1000], "segment"), ([1, 84, 8400], "pose")]
)
def test_model_task_refuses_anything_else_in_one_line(shape: list[object], task: str | None) -> None:
    with pytest.raises(ModelError) as err:
        model_task(desc([("out", shape)], task))
    msg = str(err.value)
    assert msg.startswith(
        f"m.onnx: output shape {shape} (task {task!r}) is neither a classifier [N, classes] nor"
    )
    assert "yolov8 [1, 4+nc, N]" in msg and "\n" not in msg


def test_separate_detr_outputs_are_named_not_guessed() -> None:
    two = [("boxes", [1, 300, 4]), ("scores", [1, 300, 80])]
    with pytest.raises(ModelError) as err:
        detector_format(desc(two))
    assert str(err.value) == (
        "m.onnx: outputs boxes [1, 300, 4] + scores [1, 300, 80] look like separate DETR boxes + scores, "
        "which this agent does not read; export one output [1, Q, 4+nc] (Ultralytics RT-DETR export) or "
        "set output_format"
    )
    # scores first works the same; a third output is not looked at
    with pytest.raises(ModelError, match="look like separate DETR"):
        detector_format(desc([("scores", [1, 300, 3]), ("boxes", [1, 300, 4]), ("x", [1, 2])]))
    # a forced format gets its own message, not the DETR hint
    with pytest.raises(
        ModelError, match=r"^m\.onnx: output 'boxes': output shape \[1, 300, 4\] is not rtdetr"
    ):
        detector_format(desc(two), "rtdetr")


@pytest.mark.parametrize(
    "outputs",
    [
        [("a", [1, 300, 3]), ("b", [1, 300, 5])],  # no 4-wide output
        [("a", [1, 300, 4]), ("b", [300, 80])],  # not both 3-D
        [("a", [1, 300, 3])],
    ],
)
def test_other_unreadable_outputs_name_the_output_and_the_task(
    outputs: list[tuple[str, list[object]]],
) -> None:
    with pytest.raises(ModelError) as err:
        detector_format(desc(outputs, task="detect"))
    msg = str(err.value)
    assert msg.startswith(f"m.onnx: output 'a': output shape {outputs[0][1]} ") and msg.endswith(
        " (task in metadata: detect)"
    )
    assert "DETR" not in msg.split("understands:")[0]
    with pytest.raises(ModelError) as err:
        detector_format(desc(outputs))
    assert str(err.value).endswith(" (YOLOv8/YOLO11)")  # no task: nothing after the format list
