"""A real sd_notify socket: what the agent (or a TensorRT engine build) tells systemd."""

from __future__ import annotations

import socket


def received(sock: socket.socket) -> list[str]:
    """Every datagram waiting on the non-blocking ``sock``, oldest first (none: [])."""
    out = []
    while True:
        try:
            out.append(sock.recv(4096).decode())
        except BlockingIOError:
            return out
