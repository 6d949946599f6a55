"""``edge-agent config example|check``: a commented config file, and validation of one."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from edge_agent.app.configfile import add_config_arg
from edge_agent.core.defaults import CONF_THRESHOLD, IOU_THRESHOLD, MAX_DET

EXAMPLE = (
    """\
# edge-agent configuration (TOML). Unknown keys are errors, so a typo can't be silently ignored.
# Check a file with:  edge-agent config check /etc/edge-agent/config.toml

[device]
id = "pi-entrance-01"               # MQTT client id and topic segment: letters, digits, . _ -
state_dir = "/var/lib/edge-agent"   # queue, TensorRT engine cache (systemd StateDirectory=)

[camera]
# 0 or "/dev/video0" (USB/V4L2, MJPG), "rtsp://user:pw@host/stream" (TCP),
# "http://cam/stream" (multipart MJPEG: ESP32-CAM, mjpg-streamer; see docs/cameras.md),
# a GStreamer pipeline ending in appsink, e.g. Pi CSI:
#   "libcamerasrc ! video/x-raw,width=1280,height=720 ! videoconvert ! appsink"
# a video file, or a folder of images replayed in name order
source = 0
loop = false              # replay files/folders forever
width = 1280
height = 720
fps = 15                  # V4L2: asked of the driver (the log says what it granted); folders: replay rate
# credentials_file = "/run/credentials/edge-agent.service/camera"   # http MJPEG basic auth: "user:password"
interval_s = 0.0          # 0 = as fast as inference goes; else seconds between inferences
stall_timeout_s = 10.0    # no new frame for this long -> reconnect (capped backoff)
reconnect_max_s = 30.0
max_pixels = 40000000     # folder images larger than this (read from the header) are skipped, never decoded

[detector]
model = "/var/lib/edge-agent/models/detector.int8.onnx"
# labels = "/etc/edge-agent/labels.txt"   # one name per line, overrides the model's names
conf_threshold = @CONF@
iou_threshold = @IOU@
max_det = @MAX_DET@
classes = []              # keep only these class names (empty = all)
# provider = "xnnpack"    # override the per-board choice: cpu, xnnpack, cuda, tensorrt
# threads = 4

# Optional: classify the crops of some detector classes
# [classifier]
# model = "/var/lib/edge-agent/models/classifier.int8.onnx"
# classes = ["person"]    # detector classes whose crops are classified (empty = all)
# crop_padding = 0.1
# top_k = 1

# Optional: a serial sensor (pyserial URL or device)
# [sensor]
# port = "/dev/ttyUSB0"
# baudrate = 9600
# protocol = "jsonl"      # jsonl | kv (key=value) | csv (with csv_fields) | regex (named groups)
# csv_fields = ["temp", "hum"]
# regex = 'T=(?P<temp>[-0-9.]+)'
# trigger = "pir >= 1"    # capture + infer when this becomes true (besides interval_s)
# attach_to_results = true
# publish = false

[mqtt]
enabled = true
host = "broker.example.internal"
port = 8883
topic_prefix = "edge"     # edge/<device>/detections|status|sensors; no + # or control characters, no leading $ or /$ (docs/messages.md)
# username = "pi-entrance-01"
# password_file = "mqtt-password"  # the password goes in /etc/edge-agent/mqtt-password (root, 0600); the unit hands it over (LoadCredential=)
# tls_ca = "/etc/edge-agent/ca.pem"
# tls_cert = "/etc/edge-agent/client.pem"
# tls_key = "/etc/edge-agent/client.key"
inflight = 100            # un-acknowledged QoS 1 messages in flight
newest_first = false
rate_limit_per_s = 0      # 0 = unlimited
status_interval_s = 60
batch_threshold = 0       # batched zlib sync while >= N results wait (1 = always, 0 = never)

[queue]
path = "/var/lib/edge-agent/outbox.db"
max_messages = 1000000
max_bytes = 536870912     # 512 MiB
max_age_days = 90
policy = "drop_oldest"    # or reject_new (both also on a full disk: docs/queue.md)
flush_interval_s = 0.2    # group commit: a crash loses at most this window, seen as a seq gap
flush_batch = 100
reserve_bytes = 1048576   # disk headroom released on a full disk so deletes still work (0 or >= 1 MiB)

[output]
mode = "event"            # event: when the set of detections changes (+ heartbeat); every_frame; objects
heartbeat_s = 60
snapshot = false          # attach a JPEG (base64) to each result
snapshot_max_bytes = 65536

[motion]
enabled = false           # true: run the detector only on motion (docs/cameras.md)
threshold = 25            # grey-level change (0-255) that counts a pixel as changed
min_area = 0.002          # largest changed region, as a fraction of the frame
max_idle_s = 60           # the detector still runs this often on a still scene (heartbeat)
frames_after = 5          # ... and on this many frames after motion stops
lightning_threshold = 0.8 # more of the frame changing at once (lights on, IR switch): relearn the scene
# masks = [[[0.0, 0.0], [0.3, 0.0], [0.3, 0.2]]]   # ignored polygons, x/y as fractions of the frame

[health]
status_file = "/run/edge-agent/status.json"   # read by `edge-agent status`
# prometheus_port = 9108                      # metrics on 127.0.0.1

[model_update]            # docs/model-updates.md
# trusted_keys = ["base64 public key from `edge-agent model keygen`"]  # MQTT delivery needs one; then only signed packages
# groups = ["shop-floor"]  # also take packages pushed to edge/groups/<group>/model
ring_frames = 0           # recent frames kept for the update gate; 0 = off (privacy)
# ring_interval_s = 60
# ring_max_age_h = 72
min_recall = 0.9          # the gate: recall of the current model's detections
trial_s = 600             # after a switch: rollback on a detection-rate collapse in this window
collapse_ratio = 0.2

# objects mode (docs/objects.md): [output] mode = "objects" sends tracked objects, zone and line
# events and counts every [output] counts_interval_s (default 300) instead of per-frame results
# [tracker]               # a ByteTrack-class tracker; the defaults suit most scenes
# lost_frames = 30        # frames a lost object is kept to be re-found
# [[lines]]
# name = "gate"
# points = [[0.5, 0.0], [0.5, 1.0]]   # x/y as fractions of the frame
# in_side = "right"                   # the side of points[0] -> points[1] (as seen) that is "in"
# [[zones]]
# name = "waiting"
# polygon = [[0.1, 0.5], [0.5, 0.5], [0.5, 0.9], [0.1, 0.9]]
# min_dwell_s = 5
""".replace("@CONF@", str(CONF_THRESHOLD))
    .replace("@IOU@", str(IOU_THRESHOLD))
    .replace("@MAX_DET@", str(MAX_DET))
)


def register(sub: Any) -> None:
    p = sub.add_parser("config", help="print an example config or check one", description=__doc__)
    s = p.add_subparsers(dest="config_command", metavar="ACTION", required=True)
    s.add_parser("example", help="print a commented example config").set_defaults(func=example)
    c = s.add_parser("check", help="validate a config file (unknown keys and bad values are errors)")
    c.add_argument(
        "file",
        nargs="?",
        help="config TOML (default: --config, $EDGE_AGENT_CONFIG, else /etc/edge-agent/config.toml)",
    )
    add_config_arg(c)
    c.set_defaults(func=check)


def example(args: argparse.Namespace) -> int:
    sys.stdout.write(EXAMPLE)
    return 0


def check(args: argparse.Namespace) -> int:
    from edge_agent.app.configfile import config_path, load_config
    from edge_agent.core.config import require_detector
    from edge_agent.core.model_package import update_warnings

    path = config_path(args.file or args.config)
    cfg = load_config(path)
    require_detector(cfg, str(path))
    warnings = []
    for name, model in (
        ("detector.model", cfg.detector.model),
        ("classifier.model", cfg.classifier.model if cfg.classifier else ""),
    ):
        if model and not Path(model).is_file():
            warnings.append(f"{path}: {name} = {model!r}: file not found (yet)")
    warnings += [f"{path}: {w}" for w in update_warnings(cfg)]
    for w in warnings:
        sys.stderr.write(f"warning: {w}\n")
    sys.stdout.write(
        f"{path}: OK (device {cfg.device.id}, camera {cfg.camera.source!r}, mqtt "
        f"{cfg.mqtt.host}:{cfg.mqtt.port if cfg.mqtt.enabled else 'disabled'})\n"
    )
    return 0
