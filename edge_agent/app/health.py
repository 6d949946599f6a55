"""What the agent reports about itself: the status-file snapshot and the Prometheus gauges."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any, Optional

from edge_agent import __version__
from edge_agent.adapters.system import clock_synchronised

if TYPE_CHECKING:
    from edge_agent.adapters.camera import Camera
    from edge_agent.adapters.metrics_http import MetricsServer
    from edge_agent.adapters.outbox import Outbox
    from edge_agent.app.agent import Agent

log = logging.getLogger(__name__)


def build_status(
    agent: Agent, camera: Camera, outbox: Outbox, sync: Any, sensor: Any, final: bool
) -> dict[str, Any]:
    q = outbox.stats()
    models = agent.models
    return {
        "device_id": agent.cfg.device.id,
        "version": __version__,
        "state": "stopped" if final else "running",
        "uptime_s": round(time.monotonic() - agent.started_mono, 1),
        "ready_s": agent.ready_s,
        "fps": round(agent.fps(), 2),
        "frames": agent.frames,
        "results": agent.emitted,
        "errors": agent.errors,
        "reloads": agent.reloads,
        "reload_failures": agent.reload_failures,
        "latency_ms": agent.latency_ms(),
        "queue": q,
        "queue_depth": q.get("pending"),
        "broker": sync.state if sync is not None else "disabled",
        "last_sync": sync.last_sync if sync is not None else None,
        "camera": camera.stats(),
        "sensor": sensor.stats() if sensor is not None else None,
        "provider": models.provider if models else None,
        "models": models.describe() if models else None,
        "clock_synced": clock_synchronised(),
        "warnings": agent.warnings(),
        "model_update": agent.updates.status() if agent.updates is not None else None,
    }


def start_metrics(agent: Agent, camera: Camera, outbox: Outbox, sync: Any) -> Optional[MetricsServer]:
    port = agent.cfg.health.prometheus_port
    if port is None:
        return None
    from edge_agent.adapters.metrics_http import MetricsServer

    def collect() -> tuple[dict[str, float], dict[str, str]]:
        q = outbox.stats()
        cam = camera.stats()
        values = {
            "fps": agent.fps(),
            "frames_total": agent.frames,
            "results_total": agent.emitted,
            "errors_total": agent.errors,
            "queue_pending": q["pending"],
            "queue_bytes": q["bytes"],
            "queue_dropped_total": q["dropped"],
            "camera_reconnects_total": cam["reconnects"],
            "camera_dropped_frames_total": cam["dropped"],
            "broker_connected": 1.0 if sync is not None and sync.state == "connected" else 0.0,
        }
        values.update({f"latency_{k}_ms": v for k, v in agent.latency_ms().items()})
        return values, {"device": agent.cfg.device.id}

    try:
        server = MetricsServer(port, collect)
    except OSError as exc:  # port taken: health is optional, inference is not
        log.error("prometheus endpoint on 127.0.0.1:%d not started: %s", port, exc)
        agent.errors += 1
        return None
    server.start()
    return server
