"""sd_notify(3) without libsystemd: one datagram to ``$NOTIFY_SOCKET``, a no-op outside systemd.

The agent runs as ``Type=notify`` with ``WatchdogSec=``: it says READY=1 once the model is loaded and
the camera streams, and pings WATCHDOG=1 from the loop, so a wedged loop gets restarted by systemd.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Mapping
from typing import Optional

log = logging.getLogger(__name__)
_failures: dict[str, int] = {}
SEND_TIMEOUT_S = 0.5


def notify(state: str, env: Optional[Mapping[str, str]] = None) -> bool:
    """Send ``state`` (e.g. ``"READY=1"``); False when not under systemd or the send failed."""
    addr = (os.environ if env is None else env).get("NOTIFY_SOCKET", "")
    if addr.startswith("@"):
        addr = "\0" + addr[1:]  # abstract namespace
    elif not addr.startswith("/"):
        return False  # unset, or vsock:... which we do not speak
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            # bounded: a notify socket nobody reads (its queue full) hung the loop's thread for good
            sock.settimeout(SEND_TIMEOUT_S)
            sock.connect(addr)
            sock.sendall(state.encode("utf-8"))
    except OSError as exc:
        # once loudly, then quietly: a watchdog ping every few seconds must not flood the journal
        level = logging.DEBUG if _failures.get(addr) else logging.WARNING
        _failures[addr] = _failures.get(addr, 0) + 1
        log.log(level, "sd_notify to %r failed: %s", addr.replace("\0", "@"), exc)
        return False
    return True


def ready(env: Optional[Mapping[str, str]] = None) -> bool:
    return notify("READY=1", env)


def status(text: str, env: Optional[Mapping[str, str]] = None) -> bool:
    """One-line status shown by ``systemctl status`` (newlines would end the field, so they become spaces)."""
    return notify("STATUS=" + " ".join(text.splitlines()), env)


def watchdog(env: Optional[Mapping[str, str]] = None) -> bool:
    return notify("WATCHDOG=1", env)


def stopping(env: Optional[Mapping[str, str]] = None) -> bool:
    return notify("STOPPING=1", env)


def watchdog_interval_s(env: Optional[Mapping[str, str]] = None) -> Optional[float]:
    """How often to call :func:`watchdog`: half of ``WATCHDOG_USEC`` (None when no watchdog is ours)."""
    e = os.environ if env is None else env
    pid = e.get("WATCHDOG_PID")
    if pid and pid.strip() != str(os.getpid()):
        return None
    try:
        usec = int(e.get("WATCHDOG_USEC", ""))
    except ValueError:
        return None
    return usec / 2_000_000 if usec > 0 else None
