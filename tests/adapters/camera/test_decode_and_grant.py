"""Reduced-scale JPEG decode end to end (results still in the camera's coordinates), and the V4L2
granted-settings report (pure: no camera here)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import cv2
import pytest
from support.models import bright_scene, make_bright_detector
from support.world import offline_config, run_agent

from edge_agent.app.agent.agent import Agent
from edge_agent.core.camera.source_spec import fourcc_text, grant_mismatches


def results_of(tmp_path: Path, cam: Path, tag: str) -> list[dict[str, Any]]:
    state = tmp_path / f"state-{tag}"
    state.mkdir()
    cfg = offline_config(
        state, cam, make_bright_detector(tmp_path / "det.onnx"), detector="conf_threshold = 0.9"
    )
    out: list[dict[str, Any]] = []
    assert run_agent(Agent(cfg, on_result=out.append)) == 0
    return out


def test_a_large_jpeg_is_decoded_small_and_boxes_come_back_full_size(tmp_path: Path) -> None:
    img = bright_scene(720, 1280, [(480, 240, 320)])
    jpg, png = tmp_path / "jpg", tmp_path / "png"
    jpg.mkdir()
    png.mkdir()
    cv2.imwrite(str(jpg / "0.jpg"), img, [cv2.IMWRITE_JPEG_QUALITY, 95])
    cv2.imwrite(str(png / "0.png"), img)  # PNG: no DCT scaling, decoded full size
    small, full = results_of(tmp_path, jpg, "jpg")[0], results_of(tmp_path, png, "png")[0]
    assert (small["width"], small["height"]) == (full["width"], full["height"]) == (1280, 720)
    boxes_small = sorted(tuple(round(v) for v in d["box"]) for d in small["detections"])
    boxes_full = sorted(tuple(round(v) for v in d["box"]) for d in full["detections"])
    assert boxes_full and len(boxes_small) == len(boxes_full)
    for a, b in zip(boxes_small, boxes_full):
        assert max(abs(x - y) for x, y in zip(a, b)) <= 2, (a, b)
    for x1, y1, x2, y2 in boxes_full:  # inside the square, in the camera's pixels
        assert x1 >= 470 and x2 <= 810 and y1 >= 230 and y2 <= 570


def test_fourcc_text() -> None:
    assert fourcc_text(float(cv2.VideoWriter.fourcc(*"MJPG"))) == "MJPG"
    assert fourcc_text(0.0) == ""


@pytest.mark.parametrize(
    ("granted", "expected"),
    [
        ({"fourcc": "MJPG", "width": 1280, "height": 720, "fps": 30.0}, ()),
        ({"fourcc": "MJPG", "width": 1280, "height": 720, "fps": 29.97}, ()),
        (
            {"fourcc": "YUYV", "width": 640, "height": 480, "fps": 5.0},
            ("fourcc MJPG -> YUYV", "width 1280 -> 640", "height 720 -> 480", "fps 30 -> 5.0"),
        ),
    ],
)
def test_grant_mismatches_names_what_the_driver_did_not_grant(
    granted: dict[str, object], expected: tuple[str, ...]
) -> None:
    asked = {"fourcc": "MJPG", "width": 1280, "height": 720, "fps": 30}
    assert grant_mismatches(asked, granted) == expected
    assert grant_mismatches({"fourcc": "MJPG", "width": None}, {"fourcc": "MJPG", "width": 9}) == ()


def test_a_folder_with_fps_is_replayed_at_that_rate(tmp_path: Path) -> None:
    """camera.fps on a folder: a stand-in for a live camera's rate (the motion benchmark uses it)."""
    from edge_agent.adapters.camera.backends import FolderSourceFactory

    for i in range(6):
        cv2.imwrite(str(tmp_path / f"{i}.png"), bright_scene(8, 8, []))
    src = FolderSourceFactory(str(tmp_path), fps=20.0)()
    t0 = time.monotonic()
    assert all(src.read() is not None for _ in range(6))
    assert time.monotonic() - t0 >= 5 / 20.0  # 6 frames at 20 fps span at least 5 intervals
