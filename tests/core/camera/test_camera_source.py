from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edge_agent.core.camera.source_spec import (
    NETWORK_SCHEMES,
    Frame,
    SourceKind,
    classify_source,
    csi_pipeline_jetson,
    csi_pipeline_pi,
    device_index,
    fourcc_text,
    grant_mismatches,
    redact_source,
)

DOCS = Path(__file__).resolve().parents[3] / "docs"


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
    with pytest.raises(TypeError, match=r"^camera source must be an int or a str, not a bool$"):
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


def test_without_is_dir_a_path_is_a_video_file_unless_it_ends_in_a_slash() -> None:
    assert classify_source("/data/clip.mp4") is SourceKind.VIDEO_FILE
    assert classify_source("frames") is SourceKind.VIDEO_FILE
    assert classify_source("frames/") is SourceKind.IMAGE_FOLDER


@pytest.mark.parametrize("name", ["http", "rtsp", "udp", "tcp.mp4", "rtsp.d"])
def test_a_file_named_like_a_scheme_is_not_a_stream(name: str) -> None:
    assert classify_source(name) is SourceKind.VIDEO_FILE
    assert classify_source(name, is_dir=True) is SourceKind.IMAGE_FOLDER


def test_the_scheme_is_what_comes_before_the_first_separator() -> None:
    # a relay URL carrying another URL in its query is still the relay's scheme
    assert classify_source("http://relay/play?src=rtsp://cam/1") is SourceKind.NETWORK
    assert classify_source("clip-from-http://x.mp4") is SourceKind.VIDEO_FILE
    assert classify_source("file:///data/clip.mp4") is SourceKind.VIDEO_FILE  # not a network scheme
    assert classify_source("  rtsp://cam/1  ") is SourceKind.NETWORK  # stray spaces from a config


@settings(deadline=None)  # mutmut's stats run traces every call: slow on a busy machine
@given(
    st.sampled_from(sorted(NETWORK_SCHEMES)).map(
        lambda s: "".join(c.upper() if i % 2 else c for i, c in enumerate(s))
    ),
    st.text(alphabet=st.characters(blacklist_characters="!", blacklist_categories=("Cs",)), max_size=40),
)
def test_every_network_scheme_in_any_case_is_a_stream(scheme: str, rest: str) -> None:
    assert classify_source(f"{scheme}://{rest}") is SourceKind.NETWORK


@settings(deadline=None)  # mutmut's stats run traces every call: slow on a busy machine
@given(st.text(max_size=60), st.booleans())
def test_any_source_text_gets_a_kind_and_a_redacted_name_without_raising(text: str, is_dir: bool) -> None:
    assert isinstance(classify_source(text, is_dir=is_dir), SourceKind)
    assert isinstance(redact_source(text), str)


_CRED = st.text(
    alphabet=st.characters(blacklist_characters="/?#@", blacklist_categories=("Cs",)), min_size=1, max_size=20
)


@settings(deadline=None)  # mutmut's stats run traces every call: slow on a busy machine
@given(
    st.sampled_from(["rtsp", "rtsps", "http", "https"]),
    _CRED,
    _CRED,
    st.sampled_from(["cam", "10.0.0.5:554", "[fe80::1]:8554", "cam:554x", "[fe80::1", "CAM.local", ""]),
    st.sampled_from(["", "/s1", "/live/ch0?subtype=1", "/snap@2x.jpg", "#f"]),
)
def test_credentials_never_reach_the_log_and_the_rest_stays_as_written(
    scheme: str, user: str, password: str, host: str, path: str
) -> None:
    """Any user and password, even around a port that does not parse: the name the camera is logged
    under is the URL without them (it raised for ``cam:554x`` and the agent died on start)."""
    assert redact_source(f"{scheme}://{user}:{password}@{host}{path}") == f"{scheme}://***@{host}{path}"
    assert redact_source(f"{scheme}://{user}@{host}{path}") == f"{scheme}://***@{host}{path}"


@pytest.mark.parametrize(
    "source",
    [
        "http://cam/snap@2x.jpg",  # an "@" in the path is not a credential
        "rtsp://cam/stream?owner=a@b.example",
        "rtsp://cam:554/s1",
        "user@host.mp4",  # no scheme: a file name
        "http://cam/u@x/snap.jpg",  # "@" past the first "/" is the path's
        "file:///data/clip@2x.mp4",  # an empty authority
        "videotestsrc ! appsink",
    ],
)
def test_sources_without_credentials_are_logged_as_written(source: str) -> None:
    assert redact_source(source) == source


def test_user_only_and_password_only_credentials_are_redacted() -> None:
    assert redact_source("rtsp://admin@10.0.0.5/s1") == "rtsp://***@10.0.0.5/s1"
    assert redact_source("rtsp://:s3cret@10.0.0.5/s1") == "rtsp://***@10.0.0.5/s1"
    assert redact_source("rtsp://u:p@ss@cam/s1") == "rtsp://***@cam/s1"  # an "@" inside the password
    assert redact_source("rtsp://u:p@/s1") == "rtsp://***@/s1"  # no host: none invented
    # a URL in the query does not hide the credentials before it
    assert redact_source("rtsp://u:p@cam/s1?next=http://other/") == "rtsp://***@cam/s1?next=http://other/"


def test_the_pipelines_are_the_documented_ones() -> None:
    pi = (
        "libcamerasrc ! video/x-raw,width=1280,height=720,framerate=30/1 ! videoconvert "
        "! video/x-raw,format=BGR ! appsink drop=true max-buffers=1"
    )
    assert csi_pipeline_pi() == pi
    # docs/cameras.md shows the Pi pipeline at 15 fps: what the helper writes
    assert csi_pipeline_pi(fps=15) in (DOCS / "cameras.md").read_text()
    assert csi_pipeline_pi(640, 480, 15.9) == pi.replace("1280", "640").replace("720", "480").replace(
        "30/1", "15/1"
    )
    assert csi_pipeline_jetson() == (
        "nvarguscamerasrc sensor-id=0 ! video/x-raw(memory:NVMM),width=1280,height=720,framerate=30/1 "
        "! nvvidconv ! video/x-raw,format=BGRx ! videoconvert ! video/x-raw,format=BGR "
        "! appsink drop=true max-buffers=1"
    )
    assert "sensor-id=1 !" in csi_pipeline_jetson(sensor_id=1)
    assert "width=1920,height=1080,framerate=60/1 " in csi_pipeline_jetson(1920, 1080, 60)


def _frame(h: int, w: int, full: object = None) -> Frame:
    return Frame(np.zeros((h, w, 3), np.uint8), 0.0, 0.0, 1, "t", full_size=full)  # type: ignore[arg-type]


def test_full_scale_maps_a_reduced_decode_back_per_axis() -> None:
    assert _frame(240, 320).full_scale() == (1.0, 1.0)
    assert _frame(240, 320, (1280, 720)).full_scale() == (4.0, 3.0)  # (w, h), not (h, w)
    assert _frame(100, 200, (200, 100)).full_scale() == (1.0, 1.0)


@pytest.mark.parametrize(
    ("code", "text"),
    [
        (float(ord("M") | ord("J") << 8 | ord("P") << 16 | ord("G") << 24), "MJPG"),
        (float(ord("Y") | ord("U") << 8 | ord("Y") << 16 | ord("V") << 24), "YUYV"),
        (float(ord("H") | ord("2") << 8 | ord("6") << 16 | ord("4") << 24) + 0.4, "H264"),
        (0.0, ""),
        (-1.0, ""),  # a backend without the property: not "\xff\xff\xff\xff"
        (float("nan"), ""),
        (float(2**32), ""),
        (float(2**32 + (ord("M") | ord("J") << 8 | ord("P") << 16 | ord("G") << 24)), ""),  # not 32-bit
        (float(0x01020304), ""),  # control characters
        (float(ord("M") | 0xE9 << 8 | ord("P") << 16 | ord("G") << 24), ""),  # not ASCII
    ],
)
def test_fourcc_text(code: float, text: str) -> None:
    assert fourcc_text(code) == text


def test_grant_mismatches_names_each_key_the_driver_changed() -> None:
    asked = {"fourcc": "MJPG", "width": 1280, "height": 720, "fps": 30}
    assert grant_mismatches(asked, {"fourcc": "MJPG", "width": 1280, "height": 720, "fps": 30.5}) == ()
    assert grant_mismatches(asked, {"fourcc": "MJPG", "width": 1280, "height": 720, "fps": 29.5}) == ()
    assert grant_mismatches(asked, {"fourcc": "MJPG", "width": 1280, "height": 720, "fps": 30.51}) == (
        "fps 30 -> 30.51",
    )
    assert grant_mismatches(asked, {"fourcc": "YUYV", "width": 1280, "height": 600, "fps": 30}) == (
        "fourcc MJPG -> YUYV",
        "height 720 -> 600",
    )
    # a property the driver does not report is named with None; an unset ask is never a mismatch
    assert grant_mismatches({"width": 640, "fps": 15}, {}) == ("width 640 -> None", "fps 15 -> None")
    assert grant_mismatches({"width": None, "fps": None}, {"width": 9, "fps": 1.0}) == ()
    assert grant_mismatches({"fps": 15}, {"fps": "15"}) == ("fps 15 -> 15",)  # not a number: not granted
    # an unset or granted key does not end the check of the keys after it
    assert grant_mismatches({"width": None, "height": 720}, {"height": 480}) == ("height 720 -> 480",)
    assert grant_mismatches({"fps": 30, "width": 1280}, {"fps": 30.0, "width": 640}) == ("width 1280 -> 640",)
