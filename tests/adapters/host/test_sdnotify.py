"""sd_notify against real AF_UNIX datagram sockets (a path in tmp_path and an abstract name)."""

from __future__ import annotations

import logging
import os
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from edge_agent.adapters.host import sdnotify

pytestmark = pytest.mark.arm_smoke


@pytest.fixture
def listener(tmp_path: Path) -> Iterator[tuple[socket.socket, dict[str, str]]]:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    path = tmp_path / "notify.sock"
    sock.bind(str(path))
    sock.settimeout(2.0)
    yield sock, {"NOTIFY_SOCKET": str(path)}
    sock.close()


def test_helpers_send_exact_datagrams(listener: tuple[socket.socket, dict[str, str]]) -> None:
    sock, env = listener
    assert sdnotify.ready(env)
    assert sdnotify.status("streaming 9.8 fps\nqueue 3", env)
    assert sdnotify.watchdog(env)
    assert sdnotify.stopping(env)
    assert sdnotify.notify("EXTEND_TIMEOUT_USEC=5000000", env)
    got = [sock.recv(4096) for _ in range(5)]
    assert got == [
        b"READY=1",
        b"STATUS=streaming 9.8 fps queue 3",
        b"WATCHDOG=1",
        b"STOPPING=1",
        b"EXTEND_TIMEOUT_USEC=5000000",
    ]


def test_abstract_socket_name() -> None:
    name = f"edge-agent-test-{uuid.uuid4().hex}"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind("\0" + name)
    sock.settimeout(2.0)
    try:
        assert sdnotify.ready({"NOTIFY_SOCKET": "@" + name})
        assert sock.recv(4096) == b"READY=1"
    finally:
        sock.close()


def test_noop_without_socket_and_false_when_socket_gone(tmp_path: Path) -> None:
    assert sdnotify.ready({}) is False
    assert sdnotify.watchdog({"NOTIFY_SOCKET": "vsock:2:1234"}) is False
    assert sdnotify.ready({"NOTIFY_SOCKET": str(tmp_path / "nobody-listens.sock")}) is False


def test_reads_process_environment(
    listener: tuple[socket.socket, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    sock, env = listener
    monkeypatch.setenv("NOTIFY_SOCKET", env["NOTIFY_SOCKET"])
    assert sdnotify.watchdog()
    assert sock.recv(64) == b"WATCHDOG=1"


def test_watchdog_interval_is_half_of_watchdog_usec() -> None:
    assert sdnotify.watchdog_interval_s({"WATCHDOG_USEC": "30000000"}) == 15.0
    mine = str(os.getpid())
    assert sdnotify.watchdog_interval_s({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": mine}) == 15.0
    assert sdnotify.watchdog_interval_s({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "1"}) is None
    assert sdnotify.watchdog_interval_s({}) is None
    assert sdnotify.watchdog_interval_s({"WATCHDOG_USEC": "0"}) is None
    assert sdnotify.watchdog_interval_s({"WATCHDOG_USEC": "1"}) == 0.0000005  # 1 us is a watchdog
    assert sdnotify.watchdog_interval_s({"WATCHDOG_USEC": "soon"}) is None


def test_a_notify_socket_nobody_reads_fails_the_send_in_bounded_time(tmp_path: Path) -> None:
    """Its queue full, a blocking send hung the agent's loop for good (found by a benchmark that
    did not read its socket); now a send gives up after SEND_TIMEOUT_S and says False."""
    import time

    path = tmp_path / "notify"
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    srv.bind(str(path))
    env = {"NOTIFY_SOCKET": str(path)}
    try:
        sent = 0
        while sent < 100_000:
            t0 = time.monotonic()
            if not sdnotify.notify("WATCHDOG=1", env):
                break
            sent += 1
        took = time.monotonic() - t0
        assert 0 < sent < 100_000  # the queue filled, then a send failed
        assert took < sdnotify.SEND_TIMEOUT_S * 3, took
    finally:
        srv.close()


def test_a_failing_socket_is_a_warning_once_then_debug_lines(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a watchdog ping every few seconds to a gone socket must not flood the journal
    monkeypatch.setattr(sdnotify, "_failures", {})
    gone = str(tmp_path / "gone.sock")
    name = f"edge-agent-test-{uuid.uuid4().hex}"
    with caplog.at_level(logging.DEBUG, logger="edge_agent.adapters.host.sdnotify"):
        for env in ({"NOTIFY_SOCKET": gone},) * 3 + ({"NOTIFY_SOCKET": "@" + name},):
            assert sdnotify.watchdog(env) is False
    levels = [r.levelname for r in caplog.records]
    assert levels == ["WARNING", "DEBUG", "DEBUG", "WARNING"]
    assert caplog.records[0].getMessage() == (
        f"sd_notify to {gone!r} failed: [Errno 2] No such file or directory"
    )
    # an abstract name is shown as systemd writes it, with its '@'
    assert caplog.records[3].getMessage().startswith(f"sd_notify to '@{name}' failed: [Errno 111]")
