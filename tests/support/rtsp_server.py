"""A real RTSP server for the camera tests: GStreamer's gst-rtsp-server, run by Debian's python3.

    /usr/bin/python3 tests/support/rtsp_server.py --port 8554 --fps 25 --codec h264|mjpeg [--protocols udp|tcp]
        [--size WxH] [--image RAW_BGR_FILE]

Serves ``rtsp://127.0.0.1:PORT/cam`` at ``--size`` (default 320x240). Every frame carries the
wall-clock time (ms, mod 2**32) it was made at as 32 black/white blocks (8 x 4 grid, MSB first,
row-major), big enough to survive H.264/JPEG compression, so a client can measure the true age of
the frame it infers on (:func:`support.rtsp.stamp_of`). With ``--image`` (raw BGR bytes of
W x H x 3 per picture, written by the test with cv2: this python has no cv2) the frames are
those pictures in turn instead, a 16x16 corner block changing per frame (so a one-picture stream
is not frozen), and no stamp. Prints ``READY`` once listening. Needs python3-gi,
gir1.2-gst-rtsp-server-1.0, gstreamer1.0-plugins-ugly (x264enc) and -good (rtpjpegpay, jpegenc).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from typing import Optional

import gi

gi.require_version("Gst", "1.0")
gi.require_version("GstRtspServer", "1.0")
gi.require_version("GstRtsp", "1.0")
from gi.repository import GLib, Gst, GstRtsp, GstRtspServer  # noqa: E402

W, H = 320, 240
COLS, ROWS = 8, 4


def frame_bytes(stamp_ms: int, w: int = W, h: int = H) -> bytes:
    """A w x h grey (GRAY8) image whose blocks spell ``stamp_ms`` in binary."""
    bw, bh = w // COLS, h // ROWS
    rows = []
    for r in range(ROWS):
        line = bytearray()
        for c in range(COLS):
            bit = (stamp_ms >> (31 - (r * COLS + c))) & 1
            line += bytes([235 if bit else 16]) * bw
        line += bytes([16]) * (w - len(line))
        rows.append(bytes(line) * bh)
    return b"".join(rows) + bytes([16]) * (w * (h - bh * ROWS))


def picture_frames(raw: bytes, w: int, h: int) -> Iterator[bytes]:
    """The pictures in ``raw`` (one or more BGR w x h frames, back to back) in turn, over and over,
    the top-left 16x16 block a different grey each time."""
    size = w * h * 3
    pictures = [bytearray(raw[i : i + size]) for i in range(0, len(raw), size)]
    n = 0
    while True:
        img = pictures[n % len(pictures)]
        n += 1
        level = bytes([(n * 37) % 256]) * (16 * 3)
        for y in range(16):
            img[y * w * 3 : y * w * 3 + 48] = level
        yield bytes(img)


class Factory(GstRtspServer.RTSPMediaFactory):  # type: ignore[misc]
    def __init__(self, fps: int, codec: str, size: tuple[int, int], image: Optional[bytes]) -> None:
        super().__init__()
        self.fps = fps
        self.w, self.h = size
        self.image = image
        fmt = "BGR" if image is not None else "GRAY8"
        enc = (
            f"x264enc tune=zerolatency speed-preset=ultrafast key-int-max={fps} bitrate=800 "
            "! video/x-h264,profile=baseline ! rtph264pay name=pay0 pt=96 config-interval=1"
        )
        if codec == "mjpeg":
            enc = "jpegenc quality=85 ! rtpjpegpay name=pay0 pt=26"
        self.launch = (
            f"( appsrc name=src is-live=true format=time do-timestamp=true "
            f"caps=video/x-raw,format={fmt},width={self.w},height={self.h},framerate={fps}/1 "
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

        pictures = picture_frames(self.image, self.w, self.h) if self.image is not None else None

        def push() -> bool:
            if pictures is not None:
                data = next(pictures)
            else:
                data = frame_bytes(int(time.time() * 1000) & 0xFFFFFFFF, self.w, self.h)
            buf = Gst.Buffer.new_wrapped(data)
            return src.emit("push-buffer", buf) == Gst.FlowReturn.OK

        GLib.timeout_add(period_ms, push)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--fps", type=int, default=25)
    ap.add_argument("--codec", choices=("h264", "mjpeg"), default="h264")
    # "udp": RTP over UDP only, TCP SETUPs get 461 Unsupported Transport (VLC, many NVRs and cameras)
    ap.add_argument("--protocols", choices=("any", "udp", "tcp"), default="any")
    ap.add_argument("--size", default=f"{W}x{H}", help="WxH of the frames (default %(default)s)")
    ap.add_argument(
        "--image", help="raw BGR pictures (WxHx3 bytes each) to serve in turn instead of the stamp"
    )
    a = ap.parse_args()
    w, _, h = a.size.partition("x")
    size = (int(w), int(h))
    image = None
    if a.image:
        with open(a.image, "rb") as f:
            image = f.read()
        if not image or len(image) % (size[0] * size[1] * 3):
            print(
                f"--image {a.image}: {len(image)} bytes, not a multiple of {size[0] * size[1] * 3}",
                file=sys.stderr,
            )
            return 1
    Gst.init(None)
    server = GstRtspServer.RTSPServer()
    server.set_address("127.0.0.1")
    server.set_service(str(a.port))
    factory = Factory(a.fps, a.codec, size, image)
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
