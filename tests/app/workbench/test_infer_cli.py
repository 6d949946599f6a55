"""``edge-agent infer`` end to end through the real CLI entry point (a subprocess: exit codes, stderr)."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest
from support import cli
from support.models import bright_scene


@pytest.fixture
def scene_dir(tmp_path: Path) -> Path:
    d = tmp_path / "imgs"
    d.mkdir()
    # 128x256 (h x w) image, one red 32px square at x=160,y=64 -> 4x down + 16 px pad = cell (5, 4) of 64x64
    cv2.imwrite(str(d / "a.png"), bright_scene(128, 256, [(160, 64, 32)], color=(0, 0, 255)))
    cv2.imwrite(str(d / "b.jpg"), bright_scene(100, 100, []))
    return d


def test_json_contract_one_line_per_image(bright_detector: Path, scene_dir: Path) -> None:
    r = cli("infer", str(scene_dir), "--model", str(bright_detector), "--json", "--conf", "0.6", quiet=False)
    assert r.returncode == 0, r.stderr
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    assert [Path(x["image"]).name for x in lines] == ["a.png", "b.jpg"]
    a, b = lines
    assert (a["width"], a["height"]) == (256, 128)
    assert set(a["timings_ms"]) == {"pre", "infer", "post"}
    assert b["detections"] == []
    assert a["detections"], a
    for d in a["detections"]:
        assert set(d) == {"label", "class_id", "confidence", "box"} and d["label"] == "bright"
        x1, y1, x2, y2 = d["box"]
        # the one fully red cell maps back exactly onto the square (160..192, 64..96)
        assert [x1, y1, x2, y2] == pytest.approx([160, 64, 192, 96], abs=0.5)


def test_cascade_classifies_crops(
    bright_detector: Path, color_classifier: Path, scene_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "annotated"
    r = cli(
        "infer",
        str(scene_dir / "a.png"),
        "--model",
        str(bright_detector),
        "--classifier",
        str(color_classifier),
        "--json",
        "--conf",
        "0.6",
        "--save",
        str(out),
        quiet=False,
    )
    assert r.returncode == 0, r.stderr
    det = json.loads(r.stdout)["detections"]
    assert det and all(d["classification"]["label"] == "red" for d in det)
    saved = cv2.imread(str(out / "a.jpg"))
    assert saved is not None and saved.shape == (128, 256, 3)
    original = cv2.imread(str(scene_dir / "a.png"))
    assert np.abs(saved.astype(int) - original.astype(int)).sum() > 0  # boxes were drawn


def test_table_output(bright_detector: Path, scene_dir: Path) -> None:
    r = cli("infer", str(scene_dir / "a.png"), "--model", str(bright_detector), "--conf", "0.6", quiet=False)
    assert r.returncode == 0
    assert "a.png  256x128" in r.stdout and "bright" in r.stdout


def test_bad_images_are_reported_and_the_rest_processed(bright_detector: Path, scene_dir: Path) -> None:
    (scene_dir / "c_empty.jpg").write_bytes(b"")
    (scene_dir / "d_corrupt.jpg").write_bytes(b"\xff\xd8\xff\xe0 not really a jpeg")
    (scene_dir / "e_text.png").write_text("hello")
    r = cli(
        "infer",
        str(scene_dir),
        str(scene_dir / "missing.jpg"),
        "--model",
        str(bright_detector),
        "--json",
        quiet=False,
    )
    assert r.returncode == 1
    assert len(r.stdout.splitlines()) == 2  # a.png and b.jpg still processed
    errs = r.stderr.strip().splitlines()
    assert len([e for e in errs if "error:" in e]) == 4
    assert any("c_empty.jpg: empty file" in e for e in errs)
    assert any("d_corrupt.jpg: not a decodable image" in e for e in errs)
    assert any("missing.jpg: no such file" in e for e in errs)
    assert "Traceback" not in r.stderr


def test_bad_models_one_line_no_traceback(tmp_path: Path, scene_dir: Path, color_classifier: Path) -> None:
    trunc = tmp_path / "trunc.onnx"
    trunc.write_bytes(color_classifier.read_bytes()[:50])
    for model, expected in (
        (tmp_path / "nope.onnx", "model file not found"),
        (trunc, "truncated"),
        (color_classifier, "is not a detector output"),
    ):
        r = cli("infer", str(scene_dir), "--model", str(model), quiet=False)
        assert r.returncode == 1
        assert expected in r.stderr and str(model) in r.stderr
        assert "Traceback" not in r.stderr


def test_transposed_detector_output_is_decoded_too(tmp_path: Path, scene_dir: Path) -> None:
    from support.models import make_bright_detector

    m = make_bright_detector(tmp_path / "t.onnx", transposed=True)
    r = cli("infer", str(scene_dir / "a.png"), "--model", str(m), "--json", "--conf", "0.6", quiet=False)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["detections"]
