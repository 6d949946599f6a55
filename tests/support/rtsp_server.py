"""A real RTSP server for the camera tests: GStreamer's gst-rtsp-server, run by Debian's python3.

    /usr/bin/python3 tests/support/rtsp_server.py --port 8554 --fps 25 --codec h264|mjpeg [--protocols udp|tcp]

Serves ``rtsp://127.0.0.1:PORT/cam``. Every frame carries the wall-clock time (ms, mod 2**32)
it was made at as 32 black/white blocks (8 x 4 grid, MSB first, row-major), big enough to survive
H.264/JPEG compression, so a client can measure the true age of the frame it infers on
(:func:`support.rtsp.stamp_of`). Prints ``READY`` once listening. Needs python3-gi,
gir1.2-gst-rtsp-server-1.0, gstreamer1.0-plugins-ugly (x264enc) and -good (rtpjpegpay, jpegenc).
"""

from __future__ import annotations

import argparse
import sys
import time

import gi

gi.require_version("Gst", "1.0")
gi.require_version("GstRtspServer", "1.0")
gi.require_version("GstRtsp", "1.0")
from gi.repository import GLib, Gst, GstRtsp, GstRtspServer  # noqa: E402

W, H = 320, 240
COLS, ROWS = 8, 4


def frame_bytes(stamp_ms: int) -> bytes:
    """A W x H grey (GRAY8) image whose blocks spell ``stamp_ms`` in binary."""
    bw, bh = W // COLS, H // ROWS
    rows = []
    for r in range(ROWS):
        line = bytearray()
        for c in range(COLS):
            bit = (stamp_ms >> (31 - (r * COLS + c))) & 1
            line += bytes([235 if bit else 16]) * bw
        rows.append(bytes(line) * bh)
    return b"".join(rows)


class Factory(GstRtspServer.RTSPMediaFactory):  # type: ignore[misc]
    def __init__(self, fps: int, codec: str) -> None:
        super().__init__()
        self.fps = fps
        enc = (
            f"x264enc tune=zerolatency speed-preset=ultrafast key-int-max={fps} bitrate=800 "
            "! video/x-h264,profile=baseline ! rtph264pay name=pay0 pt=96 config-interval=1"
        )
        if codec == "mjpeg":
            enc = "jpegenc quality=85 ! rtpjpegpay name=pay0 pt=26"
        self.launch = (
            f"( appsrc name=src is-live=true format=time do-timestamp=true "
            f"caps=video/x-raw,format=GRAY8,width={W},height={H},framerate={fps}/1 "
            f"! videoconvert ! video/x-raw,format=I420 ! {enc} )"
        )
        self.set_shared(True)

    def do_create_element(self, url: object) -> Gst.Element:
        return Gst.parse_launch(self.launch)

    def do_configure(self, media: GstRtspServer.RTSPMedia) -> None:
        # the factory's default configure (not chained up to) is what copies its protocols
        media.set_protocols(self.get_protocols())
        src = media.get_element().get_child_by_name("src")
        period_ms = max(1, int(1000 / self.fps))

        def push() -> bool:
            buf = Gst.Buffer.new_wrapped(frame_bytes(int(time.time() * 1000) & 0xFFFFFFFF))
            return src.emit("push-buffer", buf) == Gst.FlowReturn.OK

        GLib.timeout_add(period_ms, push)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--fps", type=int, default=25)
    ap.add_argument("--codec", choices=("h264", "mjpeg"), default="h264")
    # "udp": RTP over UDP only, TCP SETUPs get 461 Unsupported Transport (VLC, many NVRs and cameras)
    ap.add_argument("--protocols", choices=("any", "udp", "tcp"), default="any")
    a = ap.parse_args()
    Gst.init(None)
    server = GstRtspServer.RTSPServer()
    server.set_address("127.0.0.1")
    server.set_service(str(a.port))
    factory = Factory(a.fps, a.codec)
    lower = GstRtsp.RTSPLowerTrans
    if a.protocols == "udp":
        factory.set_protocols(lower.UDP | lower.UDP_MCAST)
    elif a.protocols == "tcp":
        factory.set_protocols(lower.TCP)
    server.get_mount_points().add_factory("/cam", factory)
    if server.attach(None) == 0:
        print(f"cannot listen on 127.0.0.1:{a.port}", file=sys.stderr)
        return 1
    print("READY", flush=True)
    GLib.MainLoop().run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
