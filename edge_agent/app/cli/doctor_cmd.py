"""``edge-agent doctor``: is this board ready to run the agent? Each line says what to fix.

It checks what the config names, for real: every model is loaded and run once, the camera is
opened and one frame grabbed, the serial port opened, the broker connected (TLS and credentials
as the service uses them). It has no side effects: it creates no directory and writes no file,
and the broker probe uses a client id of its own. Exit status 1 when any check FAILs.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional

from edge_agent.app.cli.configfile import add_config_arg

if TYPE_CHECKING:
    from edge_agent.app.cli.configfile import Subparsers
    from edge_agent.core.camera.source_spec import Frame
    from edge_agent.core.config.schema import Config, SensorConfig

Add = Callable[..., None]
OK, WARN, FAIL = "ok", "warn", "FAIL"


def register(sub: Subparsers) -> None:
    p = sub.add_parser(
        "doctor", help="check board, runtime, devices, storage, broker and clock", description=__doc__
    )
    add_config_arg(p)
    p.add_argument("--root", default="/", help=argparse.SUPPRESS)  # fake /proc,/dev trees in tests
    p.add_argument("--json", action="store_true", help="print the checks as JSON")
    p.set_defaults(func=run)


def checks(
    cfg: Config, root: str, probe: bool = True, config_dir: Optional[Path] = None
) -> list[dict[str, str]]:
    """Every check, in order; ``probe`` False skips what touches devices, models and the network.
    ``config_dir``: where a relative ``[mqtt] password_file`` is found outside the unit."""
    import onnxruntime as ort

    from edge_agent import __version__
    from edge_agent.adapters.host.probes import (
        clock_synchronised,
        cpu_features,
        free_disk_bytes,
        list_devices,
    )
    from edge_agent.adapters.runtime.board import detect_board
    from edge_agent.core.runtime.providers import plan_providers
    from edge_agent.errors import EdgeAgentError

    out: list[dict[str, str]] = []

    def add(name: str, status: str, detail: str, fix: str = "") -> None:
        out.append({"check": name, "status": status, "detail": detail, "fix": fix})

    board = detect_board(root)
    add("edge-agent", OK, f"{__version__} on Python {platform.python_version()} ({platform.machine()})")
    add(
        "board",
        OK,
        f"{board.model} [{board.kind}], {board.physical_cores} physical cores"
        + (f", L4T {board.l4t_release}" if board.l4t_release else ""),
    )
    cpu = cpu_features(root)
    add(
        "cpu",
        OK if cpu.dot_product else WARN,
        f"{cpu.model}; {cpu.summary}",
        ""
        if cpu.dot_product
        else "no int8 dot-product instructions: expect smaller INT8 speed-ups (Pi 4/Jetson Nano)",
    )
    avail = ort.get_available_providers()
    try:
        plan = plan_providers(
            board.kind,
            avail,
            board.physical_cores,
            cfg.detector.provider,
            cfg.detector.threads,
            cfg.device.state_dir,
            ort.__version__,
        )
        add(
            "onnxruntime",
            OK,
            f"{ort.__version__}; available {', '.join(avail)}; will use "
            f"{' > '.join(plan.names)} ({plan.reason})",
        )
    except EdgeAgentError as exc:  # a bad provider override is reported, not raised
        add(
            "onnxruntime",
            FAIL,
            f"{ort.__version__}; {exc}",
            "fix [detector] provider or install the right onnxruntime",
        )
    target = _models(cfg, add) if probe else None
    devs = list_devices(root)
    add(
        "video devices",
        OK,
        ", ".join(devs["cameras"]) or "no /dev/video* devices (fine for a file, folder or network camera)",
    )
    if probe:
        _camera(cfg, add, target)
    if cfg.sensor is not None:
        _serial(cfg.sensor, add) if probe else None
    else:
        ports = ", ".join(devs["serial"])
        add(
            "serial",
            OK,
            f"no [sensor] configured (ports here: {ports})" if ports else "no [sensor] configured",
        )
    _state_dir(cfg.device.state_dir, add)
    _updates(cfg, add)
    free = free_disk_bytes(cfg.queue.path)
    if free is None:
        add("disk", WARN, f"cannot stat the filesystem of {cfg.queue.path}")
    else:
        low = free < 2 * cfg.queue.max_bytes
        add(
            "disk",
            WARN if low else OK,
            f"{free / 1e9:.1f} GB free for {cfg.queue.path}",
            f"less than twice [queue] max_bytes ({cfg.queue.max_bytes / 1e6:.0f} MB): lower it or free space"
            if low
            else "",
        )
    if cfg.mqtt.enabled and probe:
        _broker(cfg, add, config_dir)
    elif not cfg.mqtt.enabled:
        add("broker", OK, "MQTT disabled: results stay in the local queue")
    synced = clock_synchronised(root)
    add(
        "clock",
        OK if synced else WARN,
        {True: "synchronised", False: "NOT synchronised", None: "unknown"}[synced],
        "" if synced else "results carry clock_synced=false; enable systemd-timesyncd/chrony or add an RTC",
    )
    return out


def _models(cfg: Config, add: Add) -> Optional[tuple[int, int]]:
    """Load every configured model with the service's providers and run one inference on it; the
    detector's input (h, w), None when the models did not load."""
    from edge_agent.app.agent.modelset import ModelSet
    from edge_agent.errors import EdgeAgentError

    try:
        models = ModelSet.from_config(cfg)  # loading includes the warm-up inference
    except EdgeAgentError as exc:
        add("models", FAIL, str(exc), "fix [detector] model / [classifier] model")
        return None
    for role, info in models.describe().items():
        add(f"{role}", OK, f"{info['id']} ({info['quantization']}) loaded and ran on {models.provider}")
    return models.detector.decode_target


def _camera(cfg: Config, add: Add, target: Optional[tuple[int, int]] = None) -> None:
    """Open the configured source (any kind) and wait for one frame, decoded as the agent would for
    the detector's input ``target`` (h, w)."""
    from edge_agent.adapters.camera.capture import Camera
    from edge_agent.errors import EdgeAgentError

    cam = Camera(cfg.camera, max_reconnects=0)
    cam.decode_target = target
    try:
        cam.start()
        frame = cam.read(timeout_s=10.0)
    except EdgeAgentError as exc:
        add("camera", FAIL, str(exc), _camera_fix(cam.kind.value, str(exc)))
        return
    finally:
        cam.stop()
    if frame is None:
        why = cam.last_error or "no frame within 10 s"
        add("camera", FAIL, f"{cam.name}: {why}", _camera_fix(cam.kind.value, why))
    else:
        add("camera", OK, f"{cam.name}: {_frame_line(cfg, cam.kind.value, frame)}")


def _frame_line(cfg: Config, kind: str, frame: Frame) -> str:
    """The "got a WxH frame" line, and when it was decoded/resized smaller for the model, to what and how to
    capture smaller (a V4L2/CSI camera with no [camera] width/height: docs/cameras.md)."""
    h, w = frame.image.shape[:2]
    if frame.full_size is None:
        return f"got a {w}x{h} frame"
    fw, fh = frame.full_size
    line = f"got a {fw}x{fh} frame, decoded to {w}x{h} for the model's input"
    if kind in ("device_index", "v4l2_device") and not (cfg.camera.width or cfg.camera.height):
        line += (
            f"; [camera] width = {w}, height = {h} would let the driver capture smaller, if that mode "
            "keeps the field of view (docs/cameras.md)"
        )
    return line


def _broker(cfg: Config, add: Add, config_dir: Optional[Path]) -> None:
    """CONNACK with the service's settings: refused (bad password, ACL, TLS files) FAILs, since
    waiting never fixes it; unreachable only warns (an offline device queues locally)."""
    from edge_agent.adapters.mqtt.probe import probe_broker

    mqtt = cfg.mqtt
    pw = mqtt.password_file
    if pw and not Path(pw).is_absolute() and not os.environ.get("CREDENTIALS_DIRECTORY") and config_dir:
        # outside the unit: the credential's source, next to the config (LoadCredential=
        # mqtt-password:/etc/edge-agent/mqtt-password), is what the service will be handed
        mqtt = mqtt.model_copy(update={"password_file": str(config_dir / pw)})
    outcome, msg = probe_broker(mqtt, cfg.device.id)
    if outcome == "ok":
        add("broker", OK, msg)
    elif outcome == "refused":
        add(
            "broker",
            FAIL,
            msg,
            "fix [mqtt] username / the password in /etc/edge-agent/mqtt-password (README: MQTT password), "
            "or the TLS files",
        )
    else:
        add("broker", WARN, msg, "results queue locally until the broker answers; check [mqtt] host/port")


def _camera_fix(kind: str, why: str) -> str:
    """The fix for what went wrong, not "plug it in" for a server that only speaks UDP."""
    if "Unsupported Transport" in why:
        return 'set [camera] rtsp_transport = "udp" (or "auto")'
    if "max_pixels" in why:
        return "lower the camera's resolution or raise [camera] max_pixels"
    if kind == "network":
        return "check [camera] source (URL, user, path), the network and that the camera is on"
    return "fix [camera] source or plug the camera in"


def _serial(s: SensorConfig, add: Add) -> None:
    from edge_agent.adapters.sensor.serial_reader import open_serial

    try:
        open_serial(s.port, s.baudrate, 1.0).close()
    except (OSError, ValueError) as exc:  # pyserial's SerialException is an OSError
        add(
            "serial",
            FAIL,
            f"sensor port {s.port}: {exc}",
            "check the cable and that the service user is in the dialout group",
        )
        return
    add("serial", OK, f"sensor port {s.port} opens at {s.baudrate} baud")


def _updates(cfg: Config, add: Add) -> None:
    from edge_agent.core.updates.package import update_warnings

    warnings = update_warnings(cfg)
    if warnings:
        add("model updates", WARN, warnings[0], "add a public key to [model_update] trusted_keys")
    elif not cfg.model_update.enabled:
        add("model updates", OK, "disabled")
    else:
        n = len(cfg.model_update.trusted_keys)
        add("model updates", OK, f"only packages signed by one of {n} trusted key(s)")


def _state_dir(path: str, add: Add) -> None:
    """Writable or creatable, judged without creating anything."""
    p = Path(path)
    probe = p
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if p.is_dir() and os.access(p, os.W_OK | os.X_OK):
        add("state dir", OK, f"{p} is writable")
    elif not p.exists() and os.access(probe, os.W_OK | os.X_OK):
        add("state dir", OK, f"{p} does not exist yet; the agent will create it under {probe}")
    elif not p.exists():
        add(
            "state dir",
            WARN,
            f"{p} does not exist and {probe} is not writable by this user",
            "the unit's StateDirectory= creates it for the service; else create it or set [device] state_dir",
        )
    else:
        add(
            "state dir",
            FAIL,
            f"{p} is not a writable directory",
            "fix its owner/mode or set [device] state_dir",
        )


def run(args: argparse.Namespace) -> int:
    from edge_agent.app.cli.configfile import config_path, load_config
    from edge_agent.core.config.schema import Config
    from edge_agent.errors import EdgeAgentError

    path = config_path(args.config)
    pre: list[dict[str, str]] = []
    try:
        cfg = load_config(path)
        pre.append({"check": "config", "status": OK, "detail": str(path), "fix": ""})
        probe = True
    except EdgeAgentError as exc:
        # the board checks still help; what the config would name cannot be checked
        pre.append(
            {"check": "config", "status": FAIL, "detail": str(exc), "fix": "see 'edge-agent config example'"}
        )
        cfg, probe = Config(), False
    results = pre + checks(cfg, args.root, probe, Path(path).parent)
    if args.json:
        sys.stdout.write(json.dumps(results, indent=2) + "\n")
    else:
        for r in results:
            sys.stdout.write(f"[{r['status']:>4}] {r['check']:<13} {r['detail']}\n")
            if r["fix"]:
                sys.stdout.write(f"{'':7}{'':14}-> {r['fix']}\n")
    return 1 if any(r["status"] == FAIL for r in results) else 0
