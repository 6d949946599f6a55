"""SerialSensor's figures and states as the loop and `status` read them (issue 36: made for the
mutation run's survivors): what each failure leaves in stats(), the trigger Event, the reopen
backoff's inputs, and the line bound. Stand-in ports (scripted bytes), no pty: fast and exact."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest
import serial
from support import wait_until

from edge_agent.adapters.sensor.serial_reader import MAX_LINE_BYTES, SerialLike, SerialSensor, open_serial
from edge_agent.core.config.schema import SensorConfig
from edge_agent.errors import SensorError

KV = SensorConfig(port="loop://", protocol="kv")


class Port:
    """Serves ``chunks`` one per readline (recording each size asked), then raises ``then`` (or
    times out, b"", forever); ``close`` may fail."""

    def __init__(self, chunks: list[bytes], then: BaseException | None = None, close_fails: bool = False):
        self.chunks = list(chunks)
        self.then = then
        self.sizes: list[int] = []
        self.closed = threading.Event()
        self.close_fails = close_fails
        self.drained = threading.Event()

    def readline(self, size: int = -1, /) -> bytes:
        self.sizes.append(size)
        if self.chunks:
            return self.chunks.pop(0)
        self.drained.set()
        if self.then is not None:
            exc, self.then = self.then, None
            raise exc
        threading.Event().wait(0.005)
        return b""

    def close(self) -> None:
        self.closed.set()
        if self.close_fails:
            raise OSError(5, "Input/output error")


def sensor(factory: Any, **kw: Any) -> SerialSensor:
    return SerialSensor(
        KV, serial_factory=factory, read_timeout_s=0.05, reconnect_min_s=0.01, reconnect_max_s=0.02, **kw
    )


def test_the_stats_carry_every_figure_and_the_extra_ones() -> None:
    s = SerialSensor(KV)
    s.feed_line(b"a=1\n")
    s.feed_line(b"\xff\xfe\n")
    s.fire()
    s.stats_extra = lambda: {"models": {"m": {"windows": 3}}}
    assert s.stats() == {
        "port": "loop://",
        "state": "starting",
        "lines": 2,
        "readings": 1,
        "garbage": 1,
        "triggers": 1,
        "reconnects": 0,
        "open_failures": 0,
        "callback_errors": 0,
        "last_error": s.last_error,
        "models": {"m": {"windows": 3}},
    }
    assert s.last_error is not None and s.last_error != ""


def test_a_garbage_line_is_logged_naming_the_port(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "edge_agent.adapters.sensor.serial_reader")
    s = SerialSensor(KV)
    assert s.feed_line(b"no equals sign here\n") is None
    assert [r.getMessage() for r in caplog.records] == [f"sensor loop://: {s.last_error}"]


def test_fire_sets_the_event_the_loop_waits_on_once() -> None:
    s = SerialSensor(KV)
    assert s.wait_trigger(0) is False
    s.fire()
    assert s.triggers == 1 and s.triggered.is_set()
    assert s.wait_trigger(None) is True and not s.triggered.is_set()


def test_a_trigger_calls_on_trigger_once_per_edge_and_a_failing_one_is_counted() -> None:
    seen: list[Any] = []

    def on_trigger(r: Any) -> None:
        seen.append(r)
        raise RuntimeError("camera busy")

    s = SerialSensor(SensorConfig(port="loop://", protocol="kv", trigger="pir >= 1"), on_trigger=on_trigger)
    s.feed_line(b"pir=1\n")
    s.feed_line(b"pir=1\n")
    assert seen == [{"pir": 1}] and s.triggers == 1 and s.callback_errors == 1


def test_no_trigger_expression_never_fires() -> None:
    s = SerialSensor(KV)
    s.feed_line(b"pir=1\n")
    assert s.triggers == 0 and not s.triggered.is_set()


def test_the_age_of_the_latest_reading() -> None:
    s = SerialSensor(KV)
    assert s.latest_age_s() is None
    s.feed_line(b"a=1\n")
    age = s.latest_age_s()
    assert age is not None and 0 <= age < 60
    got = s.latest()
    got["a"] = 99  # a copy: the caller cannot change the reader's state
    assert s.latest() == {"a": 1}


def test_starting_twice_is_refused_and_the_context_manager_stops() -> None:
    port = Port([])
    with sensor(lambda *a: port) as s:
        wait_until(lambda: s.state == "reading", what="port open", timeout=5)
        with pytest.raises(SensorError, match=r"^sensor already started$"):
            s.start()
    assert s.state == "stopped" and port.closed.is_set()


def test_the_factory_gets_the_port_the_baudrate_and_the_read_timeout() -> None:
    calls: list[tuple[str, int, float]] = []
    port = Port([])

    def factory(url: str, baud: int, timeout: float) -> SerialLike:
        calls.append((url, baud, timeout))
        return port

    s = SerialSensor(
        SensorConfig(port="loop://", protocol="kv", baudrate=19200),
        serial_factory=factory,
        read_timeout_s=0.07,
    )
    s.start()
    try:
        wait_until(lambda: s.state == "reading", what="port open", timeout=5)
    finally:
        s.stop()
    assert calls == [("loop://", 19200, 0.07)]


def test_the_real_factory_opens_a_url_with_its_timeout() -> None:
    port = open_serial("loop://", 9600, 0.25)
    try:
        assert isinstance(port, serial.SerialBase)
        assert (port.baudrate, port.timeout) == (9600, 0.25)
    finally:
        port.close()


def test_a_port_that_cannot_open_is_retried_and_counted(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "edge_agent.adapters.sensor.serial_reader")
    attempts: list[int] = []
    port = Port([b"a=1\n"])

    def factory(*a: Any) -> SerialLike:
        attempts.append(1)
        if len(attempts) <= 2:
            raise serial.SerialException("could not open port /dev/ttyUSB9")
        return port

    s = sensor(factory)
    s.start()
    try:
        wait_until(lambda: s.latest() == {"a": 1}, what="opened on the third try", timeout=5)
        assert s.state == "reading" and s.open_failures == 2 and s.reconnects == 0
        assert s.last_error == "cannot open loop://: could not open port /dev/ttyUSB9"
    finally:
        s.stop()
    messages = [r.getMessage() for r in caplog.records]
    assert f"sensor loop://: {s.last_error} (retry 1)" in messages
    assert f"sensor loop://: {s.last_error} (retry 2)" in messages
    assert "sensor loop://: reopened after 2 attempts" in messages


def test_a_lost_port_is_counted_closed_and_reopened_even_if_close_fails() -> None:
    first = Port([b"a=1\n"], then=serial.SerialException("device disconnected"), close_fails=True)
    second = Port([b"a=2\n"])
    ports = [first, second]
    s = sensor(lambda *a: ports.pop(0))
    s.start()
    try:
        wait_until(lambda: s.latest() == {"a": 2}, what="readings from the reopened port", timeout=5)
        assert first.closed.is_set() and s.reconnects == 1 and s.open_failures == 0
        assert s.last_error == "loop:// lost: device disconnected"
        assert s.state == "reading"
    finally:
        s.stop()
    assert s.state == "stopped" and second.closed.is_set()


def test_an_unexpected_error_is_named_with_its_type() -> None:
    ports = [Port([], then=KeyError("x")), Port([])]
    s = sensor(lambda *a: ports.pop(0))
    s.start()
    try:
        wait_until(lambda: s.reconnects == 1 and s.state == "reading", what="reopened", timeout=5)
        assert s.last_error == "loop://: unexpected KeyError: 'x'"
    finally:
        s.stop()


def test_a_stop_during_the_backoff_ends_the_reader_without_reopening() -> None:
    opened: list[int] = []

    def factory(*a: Any) -> SerialLike:
        opened.append(1)
        raise OSError(2, "No such file or directory")

    s = SerialSensor(KV, serial_factory=factory, reconnect_min_s=30.0, reconnect_max_s=30.0)
    s.start()
    wait_until(lambda: s.state == "reconnecting", what="first open failed", timeout=5)
    s.stop(timeout_s=5.0)
    assert s._thread is not None and not s._thread.is_alive()
    assert opened == [1] and s.state == "stopped"


def test_each_read_asks_for_what_is_left_of_the_line_bound() -> None:
    port = Port([b"a=", b"12", b"3\n"])
    s = sensor(lambda *a: port)
    s.start()
    try:
        wait_until(lambda: s.latest() == {"a": 123}, what="the line in three chunks", timeout=5)
    finally:
        s.stop()
    assert port.sizes[:4] == [MAX_LINE_BYTES + 1, MAX_LINE_BYTES - 1, MAX_LINE_BYTES - 3, MAX_LINE_BYTES + 1]


def test_over_long_lines_warn_five_times_then_go_to_debug(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, "edge_agent.adapters.sensor.serial_reader")
    noise = [b"x" * (MAX_LINE_BYTES + 1), b"y\n"] * 7
    port = Port([*noise, b"t=1\n"])
    s = sensor(lambda *a: port)
    s.start()
    try:
        wait_until(lambda: s.latest() == {"t": 1}, what="the line after the noise", timeout=5)
    finally:
        s.stop()
    long = [r for r in caplog.records if "longer than" in r.getMessage()]
    assert [r.levelno for r in long] == [logging.WARNING] * 5 + [logging.DEBUG] * 2
    assert long[0].getMessage() == "sensor loop://: line longer than 4096 bytes: discarded up to its newline"
    assert s.garbage == 7 and s.lines == 1


def test_every_trigger_is_counted_and_logged_with_its_expression_and_reading(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "edge_agent.adapters.sensor.serial_reader")
    s = SerialSensor(SensorConfig(port="loop://", protocol="kv", trigger="pir >= 1"))
    for line in (b"pir=1\n", b"pir=0\n", b"pir=1 t=3\n"):
        s.feed_line(line)
    s.fire()
    s.fire()
    assert s.triggers == 4
    fired = [r.getMessage() for r in caplog.records if "fired" in r.getMessage()]
    assert fired == [
        "sensor trigger 'pir >= 1' fired: {'pir': 1}",
        "sensor trigger 'pir >= 1' fired: {'pir': 1, 't': 3}",
    ]


def test_every_failing_callback_is_counted_and_logged_with_its_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR, "edge_agent.adapters.sensor.serial_reader")

    def publish(reading: Any) -> None:
        raise RuntimeError("publisher down")

    s = SerialSensor(KV, on_reading=publish)
    s.feed_line(b"a=1\n")
    s.feed_line(b"a=2\n")
    assert s.callback_errors == 2 and s.latest() == {"a": 2}
    records = [r for r in caplog.records if "callback" in r.getMessage()]
    assert [r.getMessage() for r in records] == [f"sensor callback {publish!r} failed: publisher down"] * 2
    assert all(r.exc_info is not None for r in records)  # with its traceback


def test_the_reader_is_a_daemon_thread_named_sensor() -> None:
    """A daemon: a port that hangs in a driver must not keep the agent from exiting; the name is
    what a thread dump (py-spy, faulthandler) shows."""
    s = sensor(lambda *a: Port([]))
    s.start()
    try:
        assert s._thread is not None and s._thread.daemon and s._thread.name == "sensor"
    finally:
        s.stop()


@pytest.mark.parametrize("pieces", [1, 2])
def test_the_longest_line_reads_the_same_whole_or_in_pieces(pieces: int) -> None:
    """4096 bytes and its newline: how the driver splits them must not change the verdict."""
    line = b"t=" + b"1" * (MAX_LINE_BYTES - 2) + b"\n"
    port = Port([line] if pieces == 1 else [line[:-1], line[-1:]])
    s = sensor(lambda *a: port)
    s.start()
    try:
        wait_until(lambda: s.lines == 1 or s.garbage == 1, what="the line decided", timeout=5)
    finally:
        s.stop()
    assert (s.lines, s.garbage) == (1, 0) and s.latest() == {"t": int(b"1" * (MAX_LINE_BYTES - 2))}


def test_each_loss_is_counted_and_logged_and_each_reopen_follows_one_attempt(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, "edge_agent.adapters.sensor.serial_reader")
    ports = [
        Port([], then=serial.SerialException("device disconnected"), close_fails=True),
        Port([], then=KeyError("x")),
        Port([b"a=1\n"]),
    ]
    s = sensor(lambda *a: ports.pop(0))
    s.start()
    try:
        wait_until(lambda: s.latest() == {"a": 1}, what="the third port read", timeout=5)
    finally:
        s.stop()
    assert s.reconnects == 2
    messages = [(r.levelno, r.getMessage()) for r in caplog.records]
    assert (logging.WARNING, "sensor loop:// lost: device disconnected; reconnecting") in messages
    assert (logging.ERROR, "sensor loop://: unexpected KeyError: 'x'; reconnecting") in messages
    assert (logging.DEBUG, "sensor loop://: close failed: [Errno 5] Input/output error") in messages
    # a loss counts as one attempt, a first open as none: two reopens, each after 1 attempt
    assert [m for _, m in messages if "reopened" in m] == ["sensor loop://: reopened after 1 attempts"] * 2
