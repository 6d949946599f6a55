"""The one status snapshot (pure): built here only, then written as the status file, published
retained on MQTT, flattened into Prometheus gauges and shown by ``edge-agent status``.

Before this module the status was assembled in four places and published by two timers, so the
retained MQTT message alternated between two shapes (issue 11). ``edge_agent/schemas/status.json``
is its JSON Schema; docs/messages.md documents every field.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from edge_agent.core.messages.builders import SCHEMA_VERSION

STATES = ("running", "stopped", "offline", "draining")  # draining: `edge-agent queue drain`


def build_status(
    *,
    device_id: str,
    version: str,
    state: str,
    ts: float,
    started_at: float,
    uptime_s: float,
    ready_s: Optional[float],
    pid: int,
    counters: Mapping[str, int],
    fps: float,
    latency_ms: Mapping[str, float],
    queue: Mapping[str, Any],
    broker: Optional[Mapping[str, Any]],
    camera: Optional[Mapping[str, Any]],
    sensor: Optional[Mapping[str, Any]],
    provider: Optional[str],
    models: Optional[Mapping[str, Any]],
    clock_synced: Optional[bool],
    warnings: Sequence[str] = (),
    model_update: Optional[Mapping[str, Any]] = None,
    cameras: Optional[Mapping[str, Mapping[str, Any]]] = None,
) -> dict[str, Any]:
    """The snapshot. ``counters``: frames, results, errors, reloads, reload_failures.

    Parts of a stopped agent are reported stopped: a camera that was streaming when the agent
    stopped is not streaming any more, whatever its last stats said.
    """
    if state not in STATES:
        raise ValueError(f"status state {state!r} not one of {STATES}")
    cam = dict(camera) if camera is not None else None
    sen = dict(sensor) if sensor is not None else None
    brk = dict(broker) if broker is not None else {"state": "disabled"}
    cams = {str(k): dict(v) for k, v in cameras.items()} if cameras is not None else None
    if state not in ("running", "draining"):
        for part in (cam, sen, *(cams or {}).values()):
            if part is not None:
                part["state"] = "stopped"
    return {
        "schema": SCHEMA_VERSION,
        "device_id": device_id,
        "version": version,
        "state": state,
        "ts": round(float(ts), 3),
        "started_at": round(float(started_at), 3),
        "uptime_s": round(float(uptime_s), 1),
        "ready_s": None if ready_s is None else round(float(ready_s), 3),
        "pid": int(pid),
        "frames": int(counters.get("frames", 0)),
        "results": int(counters.get("results", 0)),
        "errors": int(counters.get("errors", 0)),
        "reloads": int(counters.get("reloads", 0)),
        "reload_failures": int(counters.get("reload_failures", 0)),
        "fps": round(float(fps), 2),
        "latency_ms": {k: round(float(v), 2) for k, v in sorted(latency_ms.items())},
        "queue": dict(queue),
        "broker": brk,
        "camera": cam,
        "sensor": sen,
        "provider": provider,
        "models": dict(models) if models is not None else None,
        "clock_synced": clock_synced,
        # conditions an operator should look at (e.g. a detector that never scores)
        "warnings": list(warnings),
        # the over-the-air model update block ([model_update] enabled), else None
        "model_update": dict(model_update) if model_update is not None else None,
        # [[cameras]] only: each camera's pipeline figures (the single [camera]: absent, as before)
        **({"cameras": cams} if cams is not None else {}),
    }


def prometheus_values(snapshot: Mapping[str, Any]) -> dict[str, float]:
    """Every number and boolean of the snapshot as a gauge named by its path (``queue_pending``,
    ``broker_acked``, ``latency_ms_total``...); the broker state becomes ``broker_connected``."""
    out: dict[str, float] = {}

    def walk(prefix: str, value: object) -> None:
        if isinstance(value, bool):
            out[prefix] = 1.0 if value else 0.0
        elif isinstance(value, (int, float)):
            if not (isinstance(value, float) and math.isnan(value)):
                out[prefix] = float(value)
        elif isinstance(value, Mapping):
            for k, v in value.items():
                name = "".join(c if c.isalnum() or c == "_" else "_" for c in str(k))
                walk(f"{prefix}_{name}" if prefix else name, v)

    skip = ("schema", "pid", "ts", "started_at", "cameras")
    walk("", {k: v for k, v in snapshot.items() if k not in skip})
    for cam, figures in (snapshot.get("cameras") or {}).items():  # one labelled series per camera
        label = str(cam).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        for key, value in figures.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            if not (isinstance(value, float) and math.isnan(value)):
                out[f'camera_{key}{{camera="{label}"}}'] = float(value)
        out[f'camera_up{{camera="{label}"}}'] = 1.0 if figures.get("state") == "streaming" else 0.0
    broker = snapshot.get("broker") or {}
    out["broker_connected"] = 1.0 if broker.get("state") == "connected" else 0.0
    out["up"] = 1.0 if snapshot.get("state") == "running" else 0.0
    return out
