"""Video frames resized to the model's letterbox right after decode (core/camera/decode_size.py),
against the real RTSP server (gst-rtsp-server, H.264 and MJPEG over RTP): the frames that reach the
loop are the letterbox size with ``full_size`` the camera's, off when the camera is less than 2x the
model input, and the demo detector gives the same boxes in the camera's pixels either way; a video
file (OpenCV, the same backend) likewise."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Optional

import cv2
import numpy as np
import pytest
from support.rtsp import RtspServer, require_rtsp_server

from edge_agent.adapters.camera.capture import Camera
from edge_agent.adapters.runtime.onnx_model import OnnxModel
from edge_agent.core.camera.source_spec import Frame
from edge_agent.core.config.schema import CameraConfig
from edge_agent.core.vision.results import Detection
from edge_agent.inference.pipeline import Detector, infer_frame

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[3]
SAMPLE = REPO / "models" / "samples" / "sample_0.jpg"  # 320x240 demo scene: shapes the demo detector knows
SIZE = (1280, 960)  # 4x the sample: 8x the demo detector's 160x120 letterbox


@pytest.fixture(scope="module")
def scene_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RtspServer]:
    require_rtsp_server()
    img = cv2.resize(cv2.imread(str(SAMPLE)), SIZE, interpolation=cv2.INTER_CUBIC)
    raw = tmp_path_factory.mktemp("rtsp") / "scene.bgr"
    raw.write_bytes(np.ascontiguousarray(img).tobytes())
    srv = RtspServer(fps=10, codec="h264", size=SIZE, image=raw)
    srv.start()
    yield srv
    srv.stop()


def frames(url: str, target: Optional[tuple[int, int]], n: int = 3) -> list[Frame]:
    cam = Camera(CameraConfig(source=url, stall_timeout_s=10.0))
    cam.decode_target = target
    got: list[Frame] = []
    try:
        cam.start()
        deadline = time.monotonic() + 30
        while len(got) < n and time.monotonic() < deadline:
            f = cam.read(0.5)
            if f is not None:
                got.append(f)
    finally:
        cam.stop()
    assert len(got) == n, cam.stats()
    return got


def iou(a: tuple[float, ...], b: tuple[float, ...]) -> float:
    w = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    h = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = w * h
    return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)


def test_h264_frames_arrive_at_the_letterbox_size_with_the_camera_size_kept(scene_server: RtspServer) -> None:
    full = frames(scene_server.url, None, 1)[0]
    assert full.image.shape == (960, 1280, 3) and full.full_size is None
    small = frames(scene_server.url, (640, 640), 2)
    for f in small:
        assert f.image.shape == (480, 640, 3)  # 4:3 kept, exactly the 640x480 the letterbox holds
        assert f.full_size == SIZE and f.full_scale() == (2.0, 2.0)
    # the same picture, only smaller: the resize is the letterbox's own (INTER_LINEAR)
    ref = cv2.resize(full.image, (640, 480), interpolation=cv2.INTER_LINEAR)
    diff = np.abs(ref[32:].astype(np.int16) - small[-1].image[32:].astype(np.int16))  # not the flicker corner
    assert float(diff.mean()) < 3.0, float(diff.mean())


def test_off_when_the_camera_is_not_twice_the_model_input(scene_server: RtspServer) -> None:
    # a 1024 model's letterbox of 1280x960 is 1024x768: more than half the frame, so frames stay whole
    f = frames(scene_server.url, (1024, 1024), 1)[0]
    assert f.image.shape == (960, 1280, 3) and f.full_size is None


def test_the_demo_detector_gives_the_same_boxes_from_full_and_reduced_frames(
    scene_server: RtspServer,
) -> None:
    det = Detector(OnnxModel(REPO / "models" / "demo-detector.onnx"))
    h, w = det.input_hw
    full = frames(scene_server.url, None, 1)[0]
    small = frames(scene_server.url, (h, w), 1)[0]
    assert small.image.shape[:2] == (120, 160) and small.full_size == SIZE
    a, _ = infer_frame(full, det)
    b, _ = infer_frame(small, det)
    assert len(a) >= 2, a  # the scene's shapes are found at all
    assert sorted(d.label for d in a) == sorted(d.label for d in b)

    def best(d: Detection, others: list[Detection]) -> float:
        return max(iou(d.box, o.box) for o in others if o.label == d.label)

    # boxes in the camera's 1280x960 pixels both ways: the reduced frame's are scaled back
    assert all(best(d, b) > 0.9 for d in a), (a, b)  # measured: 1.0, 1.0, 1.0 (3 shapes)
    assert max(max(d.box[2] for d in b), max(d.box[3] for d in b)) > 320  # not left in 160x120 units


def test_mjpeg_over_rtsp_is_resized_too(tmp_path: Path) -> None:
    require_rtsp_server()
    srv = RtspServer(fps=10, codec="mjpeg", size=(1920, 1080))
    srv.start()
    try:
        f = frames(srv.url, (640, 640), 1)[0]
    finally:
        srv.stop()
    assert f.image.shape == (360, 640, 3) and f.full_size == (1920, 1080)


def test_a_video_file_is_resized_too_and_a_small_one_is_not(tmp_path: Path) -> None:
    def clip(size: tuple[int, int]) -> Path:
        path = tmp_path / f"clip-{size[0]}.avi"
        out = cv2.VideoWriter(str(path), cv2.VideoWriter.fourcc(*"MJPG"), 10, size)
        img = cv2.resize(cv2.imread(str(SAMPLE)), size)
        for _ in range(3):
            out.write(img)
        out.release()
        return path

    def first(path: Path, target: tuple[int, int]) -> Frame:
        cam = Camera(CameraConfig(source=str(path)))
        cam.decode_target = target
        with cam:
            f = cam.read(10.0)
        assert f is not None, cam.stats()
        return f

    big = first(clip((1280, 720)), (320, 320))
    assert big.image.shape == (180, 320, 3) and big.full_size == (1280, 720)
    small = first(clip((480, 270)), (320, 320))  # 320x180 is more than half of 480x270: whole
    assert small.image.shape == (270, 480, 3) and small.full_size is None
