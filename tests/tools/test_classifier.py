"""quantize + validate for classifiers: the classifier's own preprocessing, class-per-folder accuracy."""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest
from support.toolchain import toy_classifier_model, write_colour_folders

from edge_agent.app.cli.main import main
from edge_agent.tools.graph import postprocess_tail


@pytest.fixture(scope="module")
def cls_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("cls")
    onnx.save(toy_classifier_model(), str(d / "cls.onnx"))
    write_colour_folders(d / "calib", 4, seed=1)
    write_colour_folders(d / "val", 6, seed=2)
    return d


def test_classifier_tail_is_the_softmax() -> None:
    assert [n.op_type for n in postprocess_tail(toy_classifier_model().graph)] == ["Softmax"]


def test_quantize_and_validate_a_classifier(cls_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = cls_dir / "cls.int8.onnx"
    rc = main(
        [
            "quantize",
            str(cls_dir / "cls.onnx"),
            "--calib",
            str(cls_dir / "calib"),
            "-o",
            str(out),
            "--val",
            str(cls_dir / "val"),
        ]
    )
    cap = capsys.readouterr()
    assert rc == 0, cap.out + cap.err
    assert "validate classifier" in cap.out and "top1_accuracy_drop" in cap.out
    meta = {p.key: p.value for p in onnx.load(str(out)).metadata_props}
    q = json.loads(meta["quantization"])
    assert q["task"] == "classify" and q["samples"] == 12 and q["excluded_nodes"] == 1
    assert (
        main(["validate", str(cls_dir / "cls.onnx"), str(out), "--images", str(cls_dir / "val"), "--json"])
        == 0
    )
    rep = json.loads(capsys.readouterr().out)
    m = rep["metrics"]
    assert m["top1_accuracy_reference"] == 1.0 and m["top1_accuracy_candidate"] == 1.0
    assert m["top1_agreement"] == 1.0 and m["top5_overlap"] == 1.0
    assert 0 < m["max_abs_prob_delta"] < 0.1


def test_classifier_accuracy_drop_fails(
    cls_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a "candidate" that swaps red and blue: agreement and accuracy collapse
    bad = toy_classifier_model()
    w = next(i for i in bad.graph.initializer if i.name == "wg")
    arr = onnx.numpy_helper.to_array(w)[[2, 1, 0]]
    w.CopyFrom(onnx.numpy_helper.from_array(arr, "wg"))
    path = tmp_path / "swapped.onnx"
    onnx.save(bad, str(path))
    assert (
        main(["validate", str(cls_dir / "cls.onnx"), str(path), "--images", str(cls_dir / "val"), "--json"])
        == 1
    )
    rep = json.loads(capsys.readouterr().out)
    assert rep["metrics"]["top1_accuracy_candidate"] == pytest.approx(1 / 3)
    assert {c["name"] for c in rep["checks"] if not c["passed"]} == {"top1_agreement", "top1_accuracy_drop"}


def test_flat_folder_has_no_accuracy(cls_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    flat = cls_dir / "val" / "red"
    assert (
        main(["validate", str(cls_dir / "cls.onnx"), str(cls_dir / "cls.onnx"), "--images", str(flat)]) == 0
    )
    assert "accuracy not measured" in capsys.readouterr().out
