"""``edge-agent infer`` in process (``cli.main`` with capsys, so mutation testing credits it): the
options a user sets reach the detector and the image reader, and every bad input is one line.
tests/app/workbench/test_infer_cli.py runs the same command as a subprocess, as a user does."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest

from edge_agent.app.cli.main import main

REPO = Path(__file__).resolve().parents[3]
SAMPLES = REPO / "models" / "samples"


def infer(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[dict[str, object]], str]:
    rc = main(["infer", "--json", *args])
    out, err = capsys.readouterr()
    return rc, [json.loads(line) for line in out.splitlines()], err


def test_the_thresholds_classes_and_max_det_reach_the_detector(capsys: pytest.CaptureFixture[str]) -> None:
    rc, loose, _ = infer(capsys, str(SAMPLES), "--conf", "0.05")
    assert rc == 0 and len(loose) == 6
    dets = [d for r in loose for d in r["detections"]]  # type: ignore[attr-defined]
    assert len({d["label"] for d in dets}) == 3 and min(d["confidence"] for d in dets) < 0.5
    rc, strict, _ = infer(capsys, str(SAMPLES), "--conf", "0.5", "--classes", "circle", "--max-det", "1")
    assert rc == 0
    for r in strict:
        assert len(r["detections"]) <= 1  # type: ignore[arg-type]
        for d in r["detections"]:  # type: ignore[attr-defined]
            assert d["label"] == "circle" and d["confidence"] > 0.5
    assert any(r["detections"] for r in strict)


def test_max_pixels_refuses_larger_images_one_line_each(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    small, big = tmp_path / "a-small.png", tmp_path / "b-big.png"
    cv2.imwrite(str(small), np.zeros((10, 10, 3), np.uint8))
    cv2.imwrite(str(big), np.zeros((10, 11, 3), np.uint8))
    rc, results, err = infer(capsys, str(tmp_path), "--max-pixels", "100")
    assert rc == 1 and [r["image"] for r in results] == [str(small)]
    assert err.splitlines() == [
        f"edge-agent infer: error: {big}: 11x10 pixels (0.00011 MP) exceeds the limit of 0.0001 MP "
        "(max_pixels); not decoded"
    ]


@pytest.mark.parametrize("value", ["0", "-5", "x"])
def test_a_max_pixels_that_is_no_bound_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], value: str
) -> None:
    with pytest.raises(SystemExit) as e:
        main(["infer", "--max-pixels", value, str(SAMPLES)])
    assert e.value.code == 2
    assert "--max-pixels" in capsys.readouterr().err


def test_no_images_and_a_save_target_that_is_a_file_are_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "empty").mkdir()
    rc, _, err = infer(capsys, str(tmp_path / "empty"))
    assert rc == 1 and err == f"edge-agent infer: error: no images found in {tmp_path / 'empty'}\n"
    (tmp_path / "afile").write_text("x")
    rc, _, err = infer(capsys, str(SAMPLES / "sample_0.jpg"), "--save", str(tmp_path / "afile"))
    assert rc == 1 and err.startswith(f"edge-agent infer: error: --save {tmp_path / 'afile'}: is a file")
    rc, results, _ = infer(capsys, str(SAMPLES / "sample_0.jpg"), "--save", str(tmp_path / "out"))
    assert (
        rc == 0 and len(results) == 1 and [p.name for p in (tmp_path / "out").iterdir()] == ["sample_0.jpg"]
    )


def test_track_refuses_a_video_whose_frames_exceed_max_pixels(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "clip.avi"
    w = cv2.VideoWriter(str(path), cv2.VideoWriter.fourcc(*"MJPG"), 10.0, (64, 48))
    assert w.isOpened()
    for _ in range(3):
        w.write(np.zeros((48, 64, 3), np.uint8))
    w.release()
    rc = main(["infer", "--track", "--json", str(path), "--max-pixels", str(64 * 48 - 1)])
    out, err = capsys.readouterr()
    assert rc == 1 and json.loads(out.splitlines()[-1])["summary"]["frames"] == 0
    assert err.startswith(f"edge-agent infer: error: {path}: frames of 64x48 pixels (")
    assert err.endswith("(max_pixels); not decoded\n") and len(err.splitlines()) == 1
    rc = main(["infer", "--track", "--json", str(path), "--max-pixels", str(64 * 48)])
    out, _ = capsys.readouterr()
    assert rc == 0 and json.loads(out.splitlines()[-1])["summary"]["frames"] == 3


def test_mot_writes_the_detections_that_track_reads(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """`track` took MOTChallenge input nothing produced: `infer --mot FILE` writes it."""
    from edge_agent.core.objects.mot import parse_detections

    mot = tmp_path / "det.txt"
    rc, results, _ = infer(capsys, str(SAMPLES), "--mot", str(mot))
    assert rc == 0
    frames = parse_detections(mot.read_text().splitlines(), str(mot))
    assert [len(frames.get(i + 1, [])) for i in range(len(results))] == [
        len(r["detections"]) for r in results
    ]
    first = next(r for r in results if r["detections"])
    d = first["detections"][0]
    x1, y1, x2, y2, conf, cls = frames[results.index(first) + 1][0]
    assert [x1, y1, x2, y2] == pytest.approx(d["box"], abs=0.02) and conf == pytest.approx(
        d["confidence"], abs=1e-4
    )
    assert cls == d["class_id"]
    assert main(["track", "-d", str(mot), "-o", str(tmp_path / "tracks.txt")]) == 0
    assert (tmp_path / "tracks.txt").read_text().startswith("1,1,")
    rc, _, err = infer(capsys, str(SAMPLES), "--mot", str(mot), "--track")
    assert rc == 1 and "--mot" in err
