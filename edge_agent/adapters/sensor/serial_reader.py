"""Serial sensor reader: a thread over pyserial that parses lines, keeps the latest readings and fires
the trigger.

``serial.serial_for_url`` instead of ``serial.Serial`` so ``loop://`` (and ``socket://`` for a
sensor behind ser2net) work with no code change. A USB-serial adapter that is unplugged raises
SerialException/OSError: the reader closes the port and reopens it with capped exponential backoff,
so plugging it back in resumes without restarting the agent.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, Literal, Optional, Protocol

import serial

from edge_agent.core.config.schema import SensorConfig
from edge_agent.core.messages.log_throttle import DEVICE_EVERY, LogThrottle
from edge_agent.core.queue.backoff import backoff_delay
from edge_agent.core.sensor.parse import EdgeTrigger, Reading, make_parser, parse_trigger
from edge_agent.errors import SensorError

log = logging.getLogger(__name__)

SensorState = Literal["starting", "reading", "reconnecting", "stopped"]


# the longest line a sensor may send: excess bytes up to the next newline are discarded and the
# line counted as garbage. readline() is always given this bound: unbounded, pyserial kept 8 MB of
# newline-less noise in memory (16 MB RSS growth measured, issue 11)
MAX_LINE_BYTES = 4096


class SerialLike(Protocol):
    def readline(self, size: int = -1, /) -> bytes: ...

    def close(self) -> None: ...


SerialFactory = Callable[[str, int, float], SerialLike]


def open_serial(port: str, baudrate: int, timeout_s: float) -> SerialLike:
    """The real factory: ``serial.serial_for_url(port, baudrate, timeout=...)``."""
    ser: SerialLike = serial.serial_for_url(port, baudrate, timeout=timeout_s)
    return ser


class SerialSensor:
    """Reads ``cfg.port`` line by line in a thread.

    ``on_reading(reading)`` is called (in the reader thread) for every parsed line, e.g. to publish
    it; ``on_trigger(reading)`` when the trigger expression becomes true. The loop can instead
    wait on :meth:`wait_trigger`. Callbacks must be quick; an exception in one is logged and
    counted, never kills the reader.
    """

    def __init__(
        self,
        cfg: SensorConfig,
        *,
        on_reading: Optional[Callable[[Reading], None]] = None,
        on_trigger: Optional[Callable[[Reading], None]] = None,
        serial_factory: SerialFactory = open_serial,
        read_timeout_s: float = 0.5,
        reconnect_min_s: float = 0.5,
        reconnect_max_s: float = 30.0,
    ) -> None:
        self.cfg = cfg
        self._parse = make_parser(cfg)  # ConfigError now, not in the thread
        trig = parse_trigger(cfg.trigger)
        self._edge = EdgeTrigger(trig) if trig is not None else None
        self.on_reading = on_reading
        self.on_trigger = on_trigger
        self._factory = serial_factory
        self.read_timeout_s = read_timeout_s
        self.reconnect_min_s = reconnect_min_s
        self.reconnect_max_s = reconnect_max_s
        self.triggered = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: Optional[threading.Thread] = None
        self._latest: dict[str, Any] = {}
        self._latest_mono: Optional[float] = None
        self._state: SensorState = "starting"
        self.lines = 0
        self.readings = 0
        self.garbage = 0
        self._refusals = LogThrottle(DEVICE_EVERY)  # garbage lines: the first, then every 250th
        self.triggers = 0
        self.reconnects = 0
        self.open_failures = 0
        self.callback_errors = 0
        self.last_error: Optional[str] = None
        # more figures for stats() (the agent's sensor models: {"models": {name: figures}})
        self.stats_extra: Optional[Callable[[], dict[str, Any]]] = None

    @property
    def state(self) -> SensorState:
        return self._state

    def start(self) -> None:
        if self._thread is not None:
            raise SensorError("sensor already started")
        self._thread = threading.Thread(target=self._run, name="sensor", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
        self._state = "stopped"

    def latest(self) -> dict[str, Any]:
        """The newest value of every key seen so far (merged across lines)."""
        with self._lock:
            return dict(self._latest)

    def latest_age_s(self) -> Optional[float]:
        with self._lock:
            return None if self._latest_mono is None else time.monotonic() - self._latest_mono

    def wait_trigger(self, timeout_s: Optional[float]) -> bool:
        """Block until the trigger fires (True, and re-arm) or the timeout passes (False)."""
        if self.triggered.wait(timeout_s):
            self.triggered.clear()
            return True
        return False

    def fire(self) -> None:
        """A trigger from elsewhere (a sensor model's window): what a trigger expression does."""
        self.triggers += 1
        self.triggered.set()

    def stats(self) -> dict[str, Any]:
        return {
            "port": self.cfg.port,
            "state": self._state,
            "lines": self.lines,
            "readings": self.readings,
            "garbage": self.garbage,
            "triggers": self.triggers,
            "reconnects": self.reconnects,
            "open_failures": self.open_failures,
            "callback_errors": self.callback_errors,
            "last_error": self.last_error,
            **(self.stats_extra() if self.stats_extra is not None else {}),
        }

    def __enter__(self) -> SerialSensor:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- reader thread ------------------------------------------------------------------------
    def feed_line(self, raw: bytes) -> Optional[Reading]:
        """Handle one raw line (what the thread does per line; public so the loop can replay logs)."""
        line = raw.decode("utf-8", errors="replace").strip()
        if not line:
            return None
        self.lines += 1
        try:
            reading = self._parse(line)
        except SensorError as exc:
            self.garbage += 1
            self.last_error = str(exc)
            # the first (a wrong protocol setting is obvious), then every 250th with the count: a
            # line per garbage line (a wrong baud rate: hundreds a second) filled the journal
            text = self._refusals.line(self.cfg.port, f"sensor {self.cfg.port}: {exc}")
            if text is not None:
                log.warning("%s", text)
            return None
        self.readings += 1
        with self._lock:
            self._latest.update(reading)
            self._latest_mono = time.monotonic()
        self._call(self.on_reading, reading)
        if self._edge is not None and self._edge.update(reading):
            self.triggers += 1
            log.info("sensor trigger %r fired: %s", self._edge.trigger.expression, reading)
            self.triggered.set()
            self._call(self.on_trigger, reading)
        return reading

    def _call(self, cb: Optional[Callable[[Reading], None]], reading: Reading) -> None:
        if cb is None:
            return
        try:
            cb(reading)
        except Exception as exc:  # a user callback must not kill the reader: logged with traceback + counted
            self.callback_errors += 1
            log.exception("sensor callback %r failed: %s", cb, exc)

    def _run(self) -> None:
        attempts = 0
        while not self._stop.is_set():
            if attempts:
                delay = backoff_delay(attempts, self.reconnect_min_s, self.reconnect_max_s)
                if self._stop.wait(delay):
                    break
            try:
                port = self._factory(self.cfg.port, self.cfg.baudrate, self.read_timeout_s)
            except Exception as exc:  # noqa: BLE001 -- SerialException, OSError, ValueError or a driver's own: retried
                attempts += 1
                self.open_failures += 1
                self.last_error = f"cannot open {self.cfg.port}: {exc}"
                self._state = "reconnecting"
                log.warning("sensor %s: %s (retry %d)", self.cfg.port, self.last_error, attempts)
                continue
            if attempts:
                log.info("sensor %s: reopened after %d attempts", self.cfg.port, attempts)
            attempts = 0
            self._state = "reading"
            try:
                self._read_lines(port)
            except (serial.SerialException, OSError) as exc:
                self.reconnects += 1
                self.last_error = f"{self.cfg.port} lost: {exc}"
                self._state = "reconnecting"
                log.warning("sensor %s; reconnecting", self.last_error)
                attempts = 1
            except Exception as exc:  # noqa: BLE001 -- anything else (a driver's own error type, a bug)
                # would end this thread with the state left at "reading": readings and triggers would
                # stop for good while the loop goes on. Treated as a lost port: reopened after a backoff.
                self.reconnects += 1
                self.last_error = f"{self.cfg.port}: unexpected {type(exc).__name__}: {exc}"
                self._state = "reconnecting"
                log.error("sensor %s; reconnecting", self.last_error)
                attempts = 1
            finally:
                try:
                    port.close()
                except (serial.SerialException, OSError) as exc:
                    log.debug("sensor %s: close failed: %s", self.cfg.port, exc)
        self._state = "stopped"

    def _read_lines(self, port: SerialLike) -> None:
        buf = b""
        skipping = False  # inside an over-long line: drop bytes until its newline
        while not self._stop.is_set():
            chunk = port.readline(MAX_LINE_BYTES + 1 - len(buf))
            if not chunk:
                continue  # timeout: lets us notice stop()
            if skipping:
                skipping = not chunk.endswith(b"\n")
                continue
            buf += chunk
            if buf.endswith(b"\n"):
                line, buf = buf, b""
                self.feed_line(line)
            elif len(buf) > MAX_LINE_BYTES:  # no newline in 4 KiB: wrong baud rate or binary noise
                self.garbage += 1
                self.last_error = f"line longer than {MAX_LINE_BYTES} bytes: discarded up to its newline"
                log.log(
                    logging.WARNING if self.garbage <= 5 else logging.DEBUG,
                    "sensor %s: %s",
                    self.cfg.port,
                    self.last_error,
                )
                buf, skipping = b"", True
