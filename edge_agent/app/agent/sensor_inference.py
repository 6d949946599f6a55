"""The agent's sensor models: each ``[[sensor_models]]`` table windows the serial readings and runs
its model on a thread of its own, its results queued in the same durable outbox as every message.

The sensor thread only windows (cheap, pure: core/sensor/window.py) and hands each due window to a
bounded queue; a worker thread runs the model. A burst faster than the model fills the queue and
the oldest waiting window is dropped, counted as ``busy``: the reader never waits on a model (a
serial port not read overflows its driver buffer and garbles lines). Every due window is therefore
published, or counted dropped with its reason (``gap``, ``missing``, ``busy``, ``error``).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional

from edge_agent.adapters.host.probes import clock_synchronised
from edge_agent.core.config.schema import Config
from edge_agent.core.config.sensor_models import SensorModelConfig
from edge_agent.core.messages.builders import sensor_result_message, sensor_result_topic
from edge_agent.core.messages.log_throttle import DEVICE_EVERY, LogThrottle
from edge_agent.core.sensor.window import Window
from edge_agent.errors import EdgeAgentError
from edge_agent.inference.sensor_model import SensorModel, SensorOutcome

if TYPE_CHECKING:
    from edge_agent.adapters.sensor.serial_reader import SerialSensor

log = logging.getLogger(__name__)

Put = Callable[[str, Dict[str, Any]], object]


class SensorInference:
    """One sensor model in the running agent: :meth:`feed` (sensor thread) -> worker -> ``put``."""

    def __init__(self, cfg: Config, entry: SensorModelConfig, model: SensorModel, put: Put) -> None:
        self.cfg, self.entry, self.model = cfg, entry, model
        self.windower = model.windower()
        self.topic = sensor_result_topic(cfg.mqtt.topic_prefix, cfg.device.id, entry.name)
        self._put = put
        self._pending: queue.Queue[Optional[Window]] = queue.Queue(maxsize=entry.max_pending)
        self._lock = threading.Lock()
        self._thread: Optional[threading.Thread] = None
        self.sensor: Optional[SerialSensor] = None  # set when the camera is to be triggered
        self.dropped: Dict[str, int] = {}
        self.inferred = 0
        self.published = 0
        self.unchanged = 0  # publish = "change": windows whose state was the last one published
        self.infer_ms: List[float] = []
        self._last_state: object = object()
        self._errors = LogThrottle(DEVICE_EVERY)

    # ---- sensor thread ---------------------------------------------------------------------------
    def feed(self, reading: Dict[str, Any]) -> None:
        tf = self.model.spec.time_field
        t = reading.get(tf) if tf else None
        when = float(t) if isinstance(t, (int, float)) and not isinstance(t, bool) else time.monotonic()
        with self._lock:
            windows = self.windower.push(reading, when)
        for win in windows:
            while True:
                try:
                    self._pending.put_nowait(win)
                    break
                except queue.Full:
                    try:
                        self._pending.get_nowait()  # the oldest waiting window goes
                        self._count("busy")
                    except queue.Empty:
                        pass

    # ---- worker ----------------------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"sensor-model-{self.entry.name}", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        """Finish the windows already waiting, then stop."""
        if self._thread is None:
            return
        self._pending.put(None)
        self._thread.join(timeout_s)
        self._thread = None

    def _run(self) -> None:
        while True:
            win = self._pending.get()
            if win is None:
                return
            self.step(win)

    def step(self, win: Window) -> Optional[SensorOutcome]:
        """One window through the model and, as ``publish`` says, into the outbox."""
        try:
            outcome = self.model.infer(win)
        except EdgeAgentError as exc:
            self._count("error")
            line = self._errors.line("infer", f"sensor model {self.entry.name}: {exc}")
            if line is not None:
                log.error("%s", line)
            return None
        self.inferred += 1
        self.infer_ms = [*self.infer_ms[-255:], outcome.infer_ms]
        changed = outcome.state != self._last_state
        self._last_state = outcome.state
        wanted = outcome.task != "score" or bool(outcome.anomaly)
        if changed and wanted and self.entry.trigger_camera and self.sensor is not None:
            self.sensor.fire()
        if self.entry.publish == "change" and not changed:
            self.unchanged += 1
            return outcome
        body = sensor_result_message(
            outcome,
            model=self.entry.name,
            model_id=self.model.model.info.model_id,
            window=self.model.spec.window,
            filled=win.filled,
            dropped=self.dropped_total(),
            device_id=self.cfg.device.id,
            ts=time.time(),
            clock_synced=clock_synchronised(),
        )
        try:
            self._put(self.topic, body)
        except EdgeAgentError as exc:
            self._count("not_queued")
            line = self._errors.line("queue", f"sensor result not queued: {exc}")
            if line is not None:
                log.error("%s", line)
            return outcome
        self.published += 1
        return outcome

    def _count(self, reason: str) -> None:
        with self._lock:
            self.dropped[reason] = self.dropped.get(reason, 0) + 1

    def dropped_total(self) -> Dict[str, int]:
        with self._lock:  # both change on other threads: copied under the lock
            out = dict(self.windower.dropped)
            for k, v in self.dropped.items():
                out[k] = out.get(k, 0) + v
        return out

    def stats(self) -> Dict[str, Any]:
        ms = sorted(self.infer_ms)
        with self._lock:
            w = self.windower.stats()
        return {
            **w,
            "inferred": self.inferred,
            "published": self.published,
            "unchanged": self.unchanged,
            "dropped": self.dropped_total(),
            "pending": self._pending.qsize(),
            "infer_ms_p50": round(ms[len(ms) // 2], 3) if ms else None,
        }


def load_sensor_models(cfg: Config, put: Put) -> List[SensorInference]:
    """One :class:`SensorInference` per table (a model that cannot load: ModelError naming it)."""
    out = []
    for entry in cfg.sensor_models:
        model = SensorModel.load(entry.model, entry)
        log.info("sensor model %s: %s", entry.name, model.spec.describe())
        out.append(SensorInference(cfg, entry, model, put))
    return out
