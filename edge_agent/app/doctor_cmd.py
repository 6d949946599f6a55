"""``edge-agent doctor``: is this board ready to run the agent? Each line says what to fix."""

from __future__ import annotations

import argparse
import json
import platform
import sys
from typing import Any

OK, WARN, FAIL = "ok", "warn", "FAIL"


def register(sub: Any) -> None:
    p = sub.add_parser(
        "doctor", help="check board, runtime, devices, storage, broker and clock", description=__doc__
    )
    p.add_argument("--config", "-c", help="config file to check against (default: built-in defaults)")
    p.add_argument("--root", default="/", help=argparse.SUPPRESS)  # fake /proc,/dev trees in tests
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


def checks(cfg: Any, root: str) -> list[dict[str, str]]:
    import onnxruntime as ort

    from edge_agent import __version__
    from edge_agent.adapters.board import detect_board
    from edge_agent.adapters.system import (
        clock_synchronised,
        cpu_features,
        dir_writable,
        free_disk_bytes,
        list_devices,
        tcp_reachable,
    )
    from edge_agent.core.providers import plan_providers
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
    devs = list_devices(root)
    cam = cfg.camera.source
    add(
        "cameras",
        OK if devs["cameras"] else WARN,
        ", ".join(devs["cameras"]) or "no /dev/video* devices",
        ""
        if devs["cameras"]
        else f"camera source is {cam!r}; plug a USB camera or set [camera] source to a file/URL",
    )
    if cfg.sensor is not None:
        ok = cfg.sensor.port in devs["serial"] or "://" in cfg.sensor.port
        add(
            "serial",
            OK if ok else FAIL,
            f"sensor port {cfg.sensor.port}; present: {', '.join(devs['serial']) or 'none'}",
            "" if ok else "check the cable and that the service user is in the dialout group",
        )
    else:
        add("serial", OK, ", ".join(devs["serial"]) or "no serial ports (none configured)")
    ok_dir, msg = dir_writable(cfg.device.state_dir)
    add(
        "state dir",
        OK if ok_dir else FAIL,
        msg,
        "" if ok_dir else "create it or set [device] state_dir (StateDirectory= in the unit)",
    )
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
    if cfg.mqtt.enabled:
        ok_net, msg = tcp_reachable(cfg.mqtt.host, cfg.mqtt.port)
        add(
            "broker",
            OK if ok_net else WARN,
            msg,
            ""
            if ok_net
            else "results queue locally until the broker is reachable; check [mqtt] host/port and the network",
        )
    else:
        add("broker", OK, "MQTT disabled: results stay in the local queue")
    synced = clock_synchronised(root)
    add(
        "clock",
        OK if synced else WARN,
        {True: "synchronised", False: "NOT synchronised", None: "unknown"}[synced],
        "" if synced else "results carry clock_synced=false; enable systemd-timesyncd/chrony or add an RTC",
    )
    return out


def run(args: argparse.Namespace) -> int:
    from edge_agent.app.configfile import load_config
    from edge_agent.core.config import Config

    cfg = load_config(args.config) if args.config else Config()
    results = checks(cfg, args.root)
    if args.json:
        sys.stdout.write(json.dumps(results, indent=2) + "\n")
    else:
        for r in results:
            sys.stdout.write(f"[{r['status']:>4}] {r['check']:<12} {r['detail']}\n")
            if r["fix"]:
                sys.stdout.write(f"{'':7}{'':13}-> {r['fix']}\n")
    return 1 if any(r["status"] == FAIL for r in results) else 0
