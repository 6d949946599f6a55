"""The parts the agent starts beside its loop: MQTT sync and the serial sensor.

Both are optional and neither may stop inference: a part that cannot start is logged, counted
through ``count_error`` and left out, and results keep queueing in the local outbox.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence

from edge_agent.adapters.host.probes import clock_synchronised
from edge_agent.adapters.outbox.outbox import Outbox
from edge_agent.core.config.schema import Config
from edge_agent.core.messages.builders import sensor_message, topics
from edge_agent.core.messages.log_throttle import DEVICE_EVERY, LogThrottle
from edge_agent.errors import EdgeAgentError

if TYPE_CHECKING:  # imported when started: paho and pyserial load only when used
    from edge_agent.adapters.mqtt.sync import MqttSync
    from edge_agent.adapters.sensor.serial_reader import SerialSensor
    from edge_agent.app.agent.sensor_inference import SensorInference

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


def start_sensor(
    cfg: Config, outbox: Outbox, count_error: Callable[[], None], models: Sequence[SensorInference] = ()
) -> Optional[SerialSensor]:
    """The serial sensor, publishing its readings when ``[sensor] publish`` and feeding each
    sensor model's windows; None without one."""
    scfg = cfg.sensor
    if scfg is None:
        return None
    from edge_agent.adapters.sensor.serial_reader import SerialSensor

    publish = None
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

        publish = on_reading
    feeds = [m.feed for m in models]

    def each_reading(reading: dict[str, Any]) -> None:
        if publish is not None:
            publish(reading)
        for feed in feeds:
            feed(reading)

    sensor = SerialSensor(scfg, on_reading=each_reading if publish is not None or feeds else None)
    if models:
        sensor.stats_extra = lambda: {"models": {m.entry.name: m.stats() for m in models}}
    for m in models:
        m.sensor = sensor
        m.start()
    sensor.start()
    return sensor


def start_sensor_models(cfg: Config, outbox: Outbox) -> list[SensorInference]:
    """One per ``[[sensor_models]]`` table, loaded (a model that cannot load: ModelError, as for
    the detector) but not started: :func:`start_sensor` starts them with the reader."""
    if not cfg.sensor_models:
        return []
    from edge_agent.app.agent.sensor_inference import load_sensor_models

    return load_sensor_models(cfg, outbox.put)
