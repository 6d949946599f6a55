"""The parts the agent starts beside its loop: MQTT sync and the serial sensor.

Both are optional and neither may stop inference: a part that cannot start is logged, counted
through ``count_error`` and left out, and results keep queueing in the local outbox.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any, Callable, Optional

from edge_agent.adapters.host.probes import clock_synchronised
from edge_agent.adapters.outbox.outbox import Outbox
from edge_agent.core.config.schema import Config
from edge_agent.core.messages.builders import sensor_message, topics
from edge_agent.core.messages.log_throttle import DEVICE_EVERY, LogThrottle
from edge_agent.errors import EdgeAgentError

if TYPE_CHECKING:  # imported when started: paho and pyserial load only when used
    from edge_agent.adapters.mqtt.sync import MqttSync
    from edge_agent.adapters.sensor.serial_reader import SerialSensor

log = logging.getLogger("edge_agent.app.agent.agent")


def start_sync(
    cfg: Config, outbox: Outbox, status_fn: Callable[[], dict[str, Any]], count_error: Callable[[], None]
) -> Optional[MqttSync]:
    """The MQTT sync thread shipping the outbox, or None (MQTT off, or it cannot start)."""
    if not cfg.mqtt.enabled:
        return None
    from edge_agent.adapters.mqtt.sync import MqttSync

    sync = MqttSync(cfg.mqtt, cfg.device.id, outbox, status_fn=status_fn)
    try:
        sync.start()
    except EdgeAgentError as exc:
        # bad credentials/TLS files: results still queue locally; the operator fixes and reloads
        log.error("MQTT sync disabled: %s", exc)
        count_error()
        return None
    return sync


def start_sensor(cfg: Config, outbox: Outbox, count_error: Callable[[], None]) -> Optional[SerialSensor]:
    """The serial sensor, publishing its readings when ``[sensor] publish``; None without one."""
    scfg = cfg.sensor
    if scfg is None:
        return None
    from edge_agent.adapters.sensor.serial_reader import SerialSensor

    on_reading = None
    if scfg.publish:
        topic = topics(cfg.mqtt.topic_prefix, cfg.device.id).sensors
        not_queued = LogThrottle(DEVICE_EVERY)

        def on_reading(reading: dict[str, Any]) -> None:
            # readings on their own topic, through the same durable outbox (sensor thread)
            body = sensor_message(
                reading, device_id=cfg.device.id, ts=time.time(), clock_synced=clock_synchronised()
            )
            try:
                outbox.put(topic, body)
            except EdgeAgentError as exc:
                count_error()
                line = not_queued.line("reading", f"sensor reading not queued: {exc}")  # per reading
                if line is not None:
                    log.error("%s", line)

    sensor = SerialSensor(scfg, on_reading=on_reading)
    sensor.start()
    return sensor
