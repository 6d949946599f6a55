"""Hand-made bugs in what the capture source asks a V4L2 driver, GStreamer and FFmpeg for, how it
reports the grant, and the RTSP transport probe (2026-12-01, issue 19): a setting dropped or
swapped, a unit wrong, a scheme left out, the grant read from the config, a check limited to the
open, a login sent before it is asked for, a session left open, a fallback lost."""

from pathlib import Path


def _have(tests: str) -> str:
    """Only the test paths present (the "before" run has not got the files written for these bugs)."""
    return " ".join(t for t in tests.split() if Path(t.split("::")[0]).exists())


CS = "edge_agent/adapters/camera/backends.py"
CR = "edge_agent/adapters/camera/rtsp.py"
T = _have(
    "tests/adapters/camera/test_capture_backends.py tests/adapters/camera/test_folder_source.py tests/adapters/camera/test_camera.py "
    "tests/adapters/camera/test_rtsp_probe.py tests/adapters/camera/test_rtsp_transport.py tests/adapters/camera/test_decode_and_grant.py"
)
BUGS = [
    # V4L2: four buffers (frames seconds old at low fps), no MJPG (YUYV at a fraction of the fps)
    ("cs1", CS, "cap.set(cv2.CAP_PROP_BUFFERSIZE, 1)", "cap.set(cv2.CAP_PROP_BUFFERSIZE, 4)", T),
    (
        "cs2",
        CS,
        '                cap.set(cv2.CAP_PROP_FOURCC, cv2.VideoWriter.fourcc(*"MJPG"))\n',
        "",
        T,
    ),
    (
        "cs3",
        CS,
        "cap.set(cv2.CAP_PROP_FRAME_HEIGHT, cfg.height)",
        "cap.set(cv2.CAP_PROP_FRAME_HEIGHT, cfg.width)",
        T,
    ),
    ("cs4", CS, "                if cfg.fps:\n", "                if cfg.fps and cfg.width:\n", T),
    # the grant: a mismatch only at INFO; the rate reported is the one asked
    (
        "cs5",
        CS,
        'log.warning("%s (asked: %s)", line, ", ".join(missing))',
        'log.info("%s (asked: %s)", line, ", ".join(missing))',
        T,
    ),
    ("cs6", CS, '"fps": round(float(cap.get(cv2.CAP_PROP_FPS)), 2),', '"fps": cfg.fps,', T),
    # the device opened with any backend (a GStreamer build takes /dev/video0 and ignores the sets)
    ("cs7", CS, "cap = cv2.VideoCapture(target, cv2.CAP_V4L2)", "cap = cv2.VideoCapture(target)", T),
    # FFmpeg: the stall timeout in seconds where milliseconds are meant; default decoder threads
    ("cs8", CS, "ms = int(timeout_s * 1000)", "ms = int(timeout_s)", T),
    ("cs9", CS, "                cv2.CAP_PROP_N_THREADS,\n                1,\n", "", T),
    # rtsps:// opened without the configured transport
    ("cs10", CS, 'startswith(("rtsp://", "rtsps://"))', 'startswith("rtsp://")', T),
    # the pixel cap checked at open only: a bigger frame mid-stream goes through
    (
        "cs11",
        CS,
        'problem = pixel_problem((frame.shape[1], frame.shape[0]), self.max_pixels, "camera.max_pixels")',
        'problem = pixel_problem((frame.shape[1], frame.shape[0]), DEFAULT_MAX_PIXELS, "camera.max_pixels")',
        T,
    ),
    # the probe: Basic sent unasked; Digest answered for the DESCRIBE's URI on SETUP; no TEARDOWN;
    # the SDP body not read (Content-Length ignored); no bound on a reply head
    ("cr1", CR, "if user is None or not challenge:", "if user is None:", T),
    ("cr2", CR, '{**transport, **auth("SETUP", track)}', '{**transport, **auth("SETUP", bare)}', T),
    ("cr3", CR, "if status == 200 and session:", "if status == 200 and not session:", T),
    ("cr4", CR, 'raw = headers.get("content-length", "0")', 'raw = "0"', T),
    ("cr5", CR, "if not chunk or len(data) > MAX_REPLY:", "if not chunk:", T),
    # auto: no UDP fallback after a 461
    (
        "cr6",
        CR,
        '    if transport == "tcp":\n        raise TransportRefused(',
        '    if transport != "udp":\n        raise TransportRefused(',
        T,
    ),
]
