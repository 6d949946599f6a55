"""Gathering the agent's figures into the one status snapshot (core.status) and serving it.

The agent's single status timer calls :func:`snapshot` every few seconds and hands the same dict
to the status file, the MQTT retained status and (through ``agent.last_status``) Prometheus.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from edge_agent import __version__
from edge_agent.adapters.host import sdnotify
from edge_agent.adapters.host.probes import clock_synchronised
from edge_agent.adapters.host.statusfile import write_status
from edge_agent.adapters.outbox.reserve import free_bytes
from edge_agent.core.config.schema import Config
from edge_agent.core.messages.status import build_status, prometheus_values
from edge_agent.errors import EdgeAgentError

if TYPE_CHECKING:
    from edge_agent.adapters.camera.capture import Camera
    from edge_agent.adapters.host.metrics_http import MetricsServer
    from edge_agent.adapters.mqtt.sync import MqttSync
    from edge_agent.adapters.outbox.outbox import Outbox
    from edge_agent.adapters.sensor.serial_reader import SerialSensor
    from edge_agent.app.agent.agent import Agent

log = logging.getLogger(__name__)


def snapshot(
    agent: Agent,
    camera: Optional[Camera],
    outbox: Outbox,
    sync: Optional[MqttSync],
    sensor: Optional[SerialSensor],
    state: str = "running",
    cameras: Optional[Mapping[str, Mapping[str, Any]]] = None,
) -> dict[str, Any]:
    models = agent.models
    return build_status(
        device_id=agent.cfg.device.id,
        version=__version__,
        state=state,
        ts=time.time(),
        started_at=agent.started_wall,
        uptime_s=time.monotonic() - agent.started_mono,
        ready_s=agent.ready_s,
        pid=os.getpid(),
        counters={
            "frames": agent.frames,
            "results": agent.emitted,
            "errors": agent.errors,
            "reloads": agent.reloads,
            "reload_failures": agent.reload_failures,
        },
        fps=agent.fps(),
        latency_ms=agent.latency_ms(),
        queue=with_disk_free(outbox.stats()),
        broker=sync.stats() if sync is not None else None,
        camera=camera.stats() if camera is not None else None,
        sensor=sensor.stats() if sensor is not None else None,
        provider=models.provider if models else None,
        models=models.describe() if models else None,
        clock_synced=clock_synchronised(),
        warnings=agent.warnings(),
        model_update=agent.updates.status() if agent.updates is not None else None,
        cameras=cameras,
    )


def with_disk_free(queue: dict[str, Any]) -> dict[str, Any]:
    """The queue figures and the free bytes of its filesystem (``disk_free_bytes``): the collector's
    history and its disk alert see a disk fill before the queue's full-disk mode."""
    path = queue.get("path")
    if isinstance(path, str) and path:
        queue["disk_free_bytes"] = free_bytes(Path(path).parent)
    return queue


class StatusOutputs:
    """Where each snapshot goes: systemd's STATUS line, the status file (a failure logged once per
    streak: it is rewritten every 2 s and must not flood the journal), and the retained MQTT
    status at most every ``mqtt.status_interval_s``."""

    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self._file_failing = False  # within a streak of failed writes: only its first is a warning
        self._last_mqtt = -1e9

    def send(self, status: dict[str, Any], sync: Optional[MqttSync], final: bool) -> None:
        cams = status.get("cameras")
        camera = (
            f"cameras {sum(c['state'] == 'streaming' for c in cams.values())}/{len(cams)} streaming"
            if cams is not None
            else f"camera {(status['camera'] or {}).get('state')}"
        )
        sdnotify.status(
            f"{status['fps']} fps, queue {status['queue']['pending']}, broker {status['broker']['state']}, {camera}"
        )
        try:
            write_status(self.cfg.health.status_file, status)
            self._file_failing = False
        except (OSError, EdgeAgentError) as exc:
            level = logging.DEBUG if self._file_failing else logging.WARNING
            self._file_failing = True
            log.log(level, "status file %s not written: %s", self.cfg.health.status_file, exc)
        now = time.monotonic()
        due = not final and now - self._last_mqtt >= self.cfg.mqtt.status_interval_s
        if sync is not None and due and sync.publish_status(status):
            self._last_mqtt = now


def start_metrics(agent: Agent) -> Optional[MetricsServer]:
    """Prometheus on ``prometheus_bind`` (loopback unless set): the latest snapshot, flattened (no
    second set of figures); off the loopback only with the bearer token of ``prometheus_token_file``."""
    h = agent.cfg.health
    port = h.prometheus_port
    if port is None:
        return None
    from edge_agent.adapters.host.metrics_http import MetricsServer

    def collect() -> tuple[dict[str, float], dict[str, str]]:
        return prometheus_values(agent.current_status(fresh=True)), {"device": agent.cfg.device.id}

    try:
        token = None
        if h.prometheus_token_file:
            token = Path(h.prometheus_token_file).read_text(encoding="utf-8").strip()
            if not token:
                raise OSError(f"prometheus_token_file {h.prometheus_token_file} is empty")
        server = MetricsServer(port, collect, h.prometheus_bind, token)
    except (OSError, UnicodeDecodeError) as exc:  # port taken: health is optional, inference is not
        log.error("prometheus endpoint on %s:%d not started: %s", h.prometheus_bind, port, exc)
        agent.errors += 1
        return None
    server.start()
    return server
