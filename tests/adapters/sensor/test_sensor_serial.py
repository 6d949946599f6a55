"""SerialSensor over real serial devices: a pty pair (like a USB-serial adapter) and pyserial loop://."""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import serial
from support import wait_until

from edge_agent.adapters.sensor.serial_reader import SerialLike, SerialSensor
from edge_agent.core.config.schema import SensorConfig
from edge_agent.core.sensor.parse import Reading


class Pty:
    """A pty pair whose slave is reachable through a stable symlink (like /dev/serial/by-id/...)."""

    def __init__(self, link: Path) -> None:
        self.link = link
        self.master, slave = os.openpty()
        self.closed = False
        path = os.ttyname(slave)
        os.close(slave)  # the sensor opens the slave by name, as it would a real port
        link.unlink(missing_ok=True)
        link.symlink_to(path)

    def write(self, text: str) -> None:
        os.write(self.master, text.encode())

    def close(self) -> None:
        if not self.closed:  # never close an fd number twice: it may belong to someone else by now
            self.closed = True
            os.close(self.master)

    def unplug(self) -> None:
        self.close()
        self.link.unlink()


@pytest.fixture
def pty(tmp_path: Path) -> Any:
    p = Pty(tmp_path / "ttyUSB-sensor")
    yield p
    p.close()


def start(cfg: SensorConfig, **kw: Any) -> SerialSensor:
    s = SerialSensor(cfg, read_timeout_s=0.05, reconnect_min_s=0.05, reconnect_max_s=0.2, **kw)
    s.start()
    wait_until(lambda: s.state == "reading", what="port open")
    return s


def test_kv_over_pty_latest_garbage_and_trigger(pty: Pty) -> None:
    triggered: list[Reading] = []
    published: list[Reading] = []
    s = start(
        SensorConfig(port=str(pty.link), protocol="kv", trigger="pir >= 1"),
        on_trigger=triggered.append,
        on_reading=published.append,
    )
    try:
        pty.write("temp=21.5 hum=40\r\n")
        pty.write("\x00\xffgarbage from a reset\n")
        pty.write("pir=0\n")
        pty.write("pir=1,temp=22\n")
        pty.write("pir=1\n")  # still high: no second trigger
        wait_until(lambda: s.readings == 4, what="4 readings")
        assert s.latest() == {"temp": 22, "hum": 40, "pir": 1}
        assert s.garbage == 1 and s.lines == 5
        assert s.triggers == 1 and triggered == [{"pir": 1, "temp": 22}]
        assert published[0] == {"temp": 21.5, "hum": 40}
        assert s.wait_trigger(0) is True  # the Event the loop waits on
        assert s.wait_trigger(0.01) is False  # re-armed
    finally:
        s.stop()
    assert s.state == "stopped"


@pytest.mark.parametrize(
    ("cfg_kw", "lines", "expected"),
    [
        ({"protocol": "jsonl"}, ['{"temp": 30.5, "door": "open"}'], {"temp": 30.5, "door": "open"}),
        ({"protocol": "csv", "csv_fields": ["temp", "hum"]}, ["19.25,55"], {"temp": 19.25, "hum": 55}),
        ({"protocol": "regex", "regex": r"T:(?P<temp>[\d.]+)"}, ["OK T:18.5"], {"temp": 18.5}),
    ],
)
def test_each_protocol_over_pty(
    pty: Pty, cfg_kw: dict[str, Any], lines: list[str], expected: Reading
) -> None:
    s = start(SensorConfig(port=str(pty.link), **cfg_kw))
    try:
        for line in lines:
            pty.write(line + "\n")
        wait_until(lambda: s.readings == len(lines), what="readings")
        assert s.latest() == expected
    finally:
        s.stop()


def test_unplug_then_replug_reconnects(pty: Pty, tmp_path: Path) -> None:
    s = start(SensorConfig(port=str(pty.link), protocol="kv"))
    try:
        pty.write("temp=20\n")
        wait_until(lambda: s.readings == 1, what="first reading")
        pty.unplug()
        wait_until(lambda: s.state == "reconnecting", what="reconnecting after unplug")
        wait_until(lambda: s.open_failures >= 2, what="failed reopen attempts while unplugged")
        assert s.reconnects == 1
        assert s.last_error is not None and str(pty.link) in s.last_error
        pty2 = Pty(pty.link)  # plugged back in (new pty, same by-id style name)
        try:
            wait_until(lambda: s.state == "reading", what="reopened")
            pty2.write("temp=25\n")
            wait_until(lambda: s.readings == 2, what="reading after replug")
            assert s.latest() == {"temp": 25}
            assert s.reconnects == 1
        finally:
            pty2.close()
    finally:
        s.stop()


def test_loop_url_through_the_real_factory() -> None:
    ports: list[SerialLike] = []
    lock = threading.Lock()

    def factory(url: str, baud: int, timeout: float) -> SerialLike:
        ser = serial.serial_for_url(url, baud, timeout=timeout)
        with lock:
            ports.append(ser)
        return ser  # type: ignore[no-any-return]

    s = start(SensorConfig(port="loop://", protocol="jsonl", trigger="temp > 30.5"), serial_factory=factory)
    try:
        port = ports[0]
        port.write(b'{"temp": 30.5}\n{"temp": 31}\nnot json\n')  # type: ignore[attr-defined]
        assert s.wait_trigger(5.0)
        wait_until(lambda: s.garbage == 1, what="garbage counted")
        assert s.latest() == {"temp": 31}
        assert s.stats()["triggers"] == 1 and s.stats()["readings"] == 2
    finally:
        s.stop()


def test_callback_exception_is_counted_not_fatal() -> None:
    def boom(reading: Reading) -> None:
        raise RuntimeError("publisher down")

    s = SerialSensor(SensorConfig(port="loop://", protocol="kv"), on_reading=boom)
    assert s.feed_line(b"a=1\n") == {"a": 1}
    assert s.callback_errors == 1 and s.latest() == {"a": 1}


def test_bad_config_fails_at_construction() -> None:
    # the schema itself refuses it now, so neither `config check` nor the reader thread sees it
    with pytest.raises(ValueError, match=r"sensor\.trigger"):
        SerialSensor(SensorConfig(port="loop://", trigger="pir ~ 1"))


def test_an_unexpected_error_from_the_port_reopens_it_instead_of_ending_the_reader() -> None:
    """A driver's own exception type (neither SerialException nor OSError) once ended the thread:
    the state stayed "reading" and readings stopped for good while the loop went on."""
    ports: list[Any] = []

    class Flaky:
        def __init__(self, url: str, baud: int, timeout: float) -> None:
            self.inner = serial.serial_for_url(url, baud, timeout=timeout)
            self.explode = not ports  # the first port raises once it has delivered a line

        def readline(self, n: int) -> bytes:
            line: bytes = self.inner.readline(n)
            if self.explode and line:
                self.explode = False
                raise KeyError("driver bug")
            return line

        def write(self, data: bytes) -> None:
            self.inner.write(data)

        def close(self) -> None:
            self.inner.close()

    def factory(url: str, baud: int, timeout: float) -> Flaky:
        p = Flaky(url, baud, timeout)
        ports.append(p)
        return p

    s = start(SensorConfig(port="loop://", protocol="kv"), serial_factory=factory)
    try:
        ports[0].write(b"a=1\n")
        wait_until(lambda: len(ports) == 2 and s.state == "reading", what="the port reopened")
        st = s.stats()
        assert st["reconnects"] == 1 and "unexpected KeyError" in st["last_error"]
        ports[1].write(b"a=2\n")
        wait_until(lambda: s.latest() == {"a": 2}, what="readings flow from the reopened port")
    finally:
        s.stop()
    assert s.state == "stopped"


@pytest.mark.parametrize("baud", [9600, 115200])
def test_the_port_is_opened_at_the_configured_baudrate(pty: Pty, baud: int) -> None:
    """``sensor.baudrate`` reaches the line: the pty's termios speed is what pyserial set."""
    import termios

    s = start(SensorConfig(port=str(pty.link), protocol="kv", baudrate=baud))
    try:
        fd = os.open(str(pty.link), os.O_RDONLY | os.O_NOCTTY | os.O_NONBLOCK)
        try:
            attrs = termios.tcgetattr(fd)
        finally:
            os.close(fd)
        assert attrs[4] == attrs[5] == getattr(termios, f"B{baud}")
    finally:
        s.stop()


class ScriptedPort:
    """A port that serves a byte stream the way pyserial's readline does: up to and including the
    next newline, at most ``size`` bytes; an empty read (the port's timeout) once it is drained."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def readline(self, size: int = -1) -> bytes:
        if not self.data:
            time.sleep(0.01)
            return b""
        end = self.data.find(b"\n") + 1 or len(self.data)
        if size >= 0:
            end = min(end, size)
        out, self.data = self.data[:end], self.data[end:]
        return out

    def close(self) -> None:
        pass


def test_an_over_long_line_is_one_garbage_line_skipped_to_its_newline() -> None:
    """Wrong baud rate or binary noise: 10 000 bytes without a newline are discarded as ONE bad line
    (the reader drops bytes until the newline), and the next line reads normally."""
    port = ScriptedPort(b"x" * 10_000 + b"\n" + b"t=7\n")
    s = start(SensorConfig(port="loop://", protocol="kv"), serial_factory=lambda *a: port)
    try:
        wait_until(lambda: s.latest() == {"t": 7}, what="the line after the long one")
        st = s.stats()
        assert (st["garbage"], st["lines"], st["readings"]) == (1, 1, 1), st
        assert st["last_error"] == "line longer than 4096 bytes: discarded up to its newline"
    finally:
        s.stop()


def test_a_line_of_exactly_the_limit_is_read() -> None:
    port = ScriptedPort(b"t=" + b"1" * 4093 + b"\n")  # 4096 bytes with its newline
    s = start(SensorConfig(port="loop://", protocol="kv"), serial_factory=lambda *a: port)
    try:
        wait_until(lambda: s.stats()["lines"] == 1, what="the line read")
        assert s.stats()["garbage"] == 0 and s.latest() == {"t": int("1" * 4093)}
    finally:
        s.stop()


def test_blank_lines_are_not_counted_as_lines() -> None:
    s = SerialSensor(SensorConfig(port="loop://", protocol="kv"))
    assert s.feed_line(b"\r\n") is None and s.feed_line(b"   \n") is None
    assert s.stats()["lines"] == 0 and s.stats()["garbage"] == 0
    assert s.feed_line(b"a=1\n") == {"a": 1} and s.stats()["lines"] == 1


def test_a_sensor_stopped_before_it_started_says_stopped() -> None:
    s = SerialSensor(SensorConfig(port="loop://", protocol="kv"))
    s.stop()
    assert s.state == "stopped" and s.stats()["state"] == "stopped"


def test_a_thousand_garbage_lines_make_five_log_lines_the_last_with_the_count(
    pty: Pty, caplog: pytest.LogCaptureFixture
) -> None:
    """A wrong baud rate sends garbage all day: the first refusal as is, then every 250th with the
    count (LogThrottle), never one line each; every line is still counted."""
    caplog.set_level(logging.DEBUG, "edge_agent.adapters.sensor.serial_reader")
    s = start(SensorConfig(port=str(pty.link), protocol="kv"))
    try:
        for i in range(1000):
            pty.write(f"\x00\xffgarbage {i}\n")
        wait_until(lambda: s.garbage == 1000, what="1000 garbage lines", timeout=30)
    finally:
        s.stop()
    lines = [r.getMessage() for r in caplog.records if "garbage" in r.getMessage()]
    assert len(lines) == 5, lines
    assert all(r.levelno == logging.WARNING for r in caplog.records if "garbage" in r.getMessage())
    assert "(1000 refused for " in lines[-1] and "(250 refused for " in lines[1]
    assert "refused for" not in lines[0]
