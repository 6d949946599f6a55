from __future__ import annotations

import pytest

from edge_agent.core.camera_source import (
    SourceKind,
    classify_source,
    csi_pipeline_jetson,
    csi_pipeline_pi,
    device_index,
    redact_source,
)


@pytest.mark.parametrize(
    ("source", "is_dir", "kind"),
    [
        (0, False, SourceKind.DEVICE_INDEX),
        (2, False, SourceKind.DEVICE_INDEX),
        ("1", False, SourceKind.DEVICE_INDEX),
        ("/dev/video0", False, SourceKind.V4L2_DEVICE),
        ("/dev/v4l/by-id/usb-046d_C920-video-index0", False, SourceKind.V4L2_DEVICE),
        ("rtsp://user:pw@10.0.0.5:554/stream1", False, SourceKind.NETWORK),
        ("RTSP://cam/stream", False, SourceKind.NETWORK),
        ("http://10.0.0.5/mjpg/video.mjpg", False, SourceKind.NETWORK),
        ("https://cam.local/live", False, SourceKind.NETWORK),
        (csi_pipeline_pi(), False, SourceKind.GSTREAMER),
        (csi_pipeline_jetson(), False, SourceKind.GSTREAMER),
        ("videotestsrc ! videoconvert ! appsink", False, SourceKind.GSTREAMER),
        ("/data/clip.mp4", False, SourceKind.VIDEO_FILE),
        ("clip.avi", False, SourceKind.VIDEO_FILE),
        ("/data/frames", True, SourceKind.IMAGE_FOLDER),
        ("/data/frames/", False, SourceKind.IMAGE_FOLDER),
        ("relative.d", True, SourceKind.IMAGE_FOLDER),
    ],
)
def test_classify_source(source: int | str, is_dir: bool, kind: SourceKind) -> None:
    assert classify_source(source, is_dir=is_dir) is kind


def test_finite_kinds() -> None:
    assert {k for k in SourceKind if k.finite} == {SourceKind.VIDEO_FILE, SourceKind.IMAGE_FOLDER}


def test_bool_is_not_a_device_index() -> None:
    with pytest.raises(TypeError):
        classify_source(True)


def test_device_index_and_redaction() -> None:
    assert device_index("3") == 3 and device_index(1) == 1 and device_index("/dev/video4") == 4
    assert redact_source("rtsp://admin:s3cret@10.0.0.5:554/s1") == "rtsp://***@10.0.0.5:554/s1"
    assert "s3cret" not in redact_source("http://admin:s3cret@cam/x.mjpg?a=1")
    assert redact_source("rtsp://10.0.0.5/s1") == "rtsp://10.0.0.5/s1"
    assert redact_source(0) == "0"


def test_csi_pipelines_end_in_appsink() -> None:
    pi = csi_pipeline_pi(640, 480, 15)
    assert pi.startswith("libcamerasrc") and "width=640,height=480,framerate=15/1" in pi
    jet = csi_pipeline_jetson(sensor_id=1)
    assert jet.startswith("nvarguscamerasrc sensor-id=1") and jet.rstrip().split("!")[-1].strip().startswith(
        "appsink"
    )
