"""RTSP through OpenCV's FFmpeg with the configured transport (``camera.rtsp_transport``).

TCP is the default because RTP over UDP loses packets on Wi-Fi and smears frames; ``auto`` falls
back to UDP only when the server itself says it will not do TCP (461 Unsupported Transport),
which :func:`probe_tcp_setup` asks it directly (see :mod:`edge_agent.core.camera.rtsp_options` for why).
"""

from __future__ import annotations

import base64
import logging
import os
import socket
import threading
from typing import Optional
from urllib.parse import unquote, urlsplit, urlunsplit

import cv2

from edge_agent.core.camera.rtsp_options import (
    UNSUPPORTED_TRANSPORT,
    capture_options,
    digest_authorization,
    first_video_control,
    parse_reply,
)
from edge_agent.errors import CameraError

log = logging.getLogger(__name__)


class TransportRefused(CameraError):
    """The server will not send RTP over TCP (461) and the config says TCP only."""


ENV = "OPENCV_FFMPEG_CAPTURE_OPTIONS"
_ENV_LOCK = threading.Lock()  # the variable is process-wide; OpenCV reads it during the open
MAX_REPLY = 64 * 1024


def open_ffmpeg(url: str, transport: str, params: list[int]) -> cv2.VideoCapture:
    """``cv2.VideoCapture(url, CAP_FFMPEG)`` with ``rtsp_transport`` set for this open only."""
    with _ENV_LOCK:
        before = os.environ.get(ENV)
        os.environ[ENV] = capture_options(transport, before or "")
        try:
            return cv2.VideoCapture(url, cv2.CAP_FFMPEG, params)
        finally:
            if before is None:
                os.environ.pop(ENV, None)
            else:
                os.environ[ENV] = before


def _request(
    sock: socket.socket, method: str, uri: str, cseq: int, extra: dict[str, str]
) -> tuple[int, dict[str, str], bytes]:
    lines = [f"{method} {uri} RTSP/1.0", f"CSeq: {cseq}", "User-Agent: edge-agent"]
    lines += [f"{k}: {v}" for k, v in extra.items()]
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("utf-8"))
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk or len(data) > MAX_REPLY:
            raise OSError("the server closed the connection or sent no RTSP reply")
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status, headers = parse_reply(head)
    raw = headers.get("content-length", "0")
    length = int(raw) if raw.isascii() and raw.isdigit() and len(raw) < 7 else 0
    while len(body) < length:
        chunk = sock.recv(4096)
        if not chunk:
            break
        body += chunk
    return status, headers, body[:length]


def probe_tcp_setup(url: str, timeout_s: float = 5.0) -> Optional[int]:
    """The status the server gives a SETUP asking for RTP over TCP (461: UDP only), or the failing
    DESCRIBE's status; None when it cannot be asked (not reachable, not RTSP, rtsps://)."""
    parts = urlsplit(url)
    if parts.scheme.lower() != "rtsp" or not parts.hostname:
        return None
    try:
        port = parts.port
    except ValueError:  # "554x", "99999": FFmpeg refused the URL already; there is no one to ask
        return None
    user = unquote(parts.username) if parts.username else None
    password = unquote(parts.password) if parts.password else ""
    host = parts.netloc.rpartition("@")[2]  # as written: an IPv6 address keeps its brackets
    bare = urlunsplit((parts.scheme, host, parts.path or "/", parts.query, ""))
    challenge = ""  # a Digest challenge, answered anew for each request's method and URI

    def auth(method: str, uri: str) -> dict[str, str]:
        # nothing before the camera's 401 says which login it takes: Basic sent unasked would put
        # the password on the wire in the clear to a camera that wants Digest (FFmpeg waits too)
        if user is None or not challenge:
            return {}
        digest = digest_authorization(challenge, user, password, method, uri)
        if digest is not None:
            return {"Authorization": digest}
        token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
        return {"Authorization": f"Basic {token}"}

    try:
        with socket.create_connection((parts.hostname, port or 554), timeout=timeout_s) as sock:
            accept = {"Accept": "application/sdp"}
            status, headers, body = _request(sock, "DESCRIBE", bare, 1, {**accept, **auth("DESCRIBE", bare)})
            if status == 401 and user is not None:
                challenge = headers.get("www-authenticate", "")
                status, headers, body = _request(
                    sock, "DESCRIBE", bare, 2, {**accept, **auth("DESCRIBE", bare)}
                )
            if status != 200:
                return status
            base = headers.get("content-base") or headers.get("content-location") or bare
            track = first_video_control(body.decode("utf-8", "replace"), base)
            transport = {"Transport": "RTP/AVP/TCP;unicast;interleaved=0-1"}
            status, headers, _ = _request(sock, "SETUP", track, 3, {**transport, **auth("SETUP", track)})
            session = headers.get("session", "").split(";", 1)[0]
            if status == 200 and session:
                _request(sock, "TEARDOWN", bare, 4, {"Session": session, **auth("TEARDOWN", bare)})
            return status
    except (OSError, ValueError):
        return None


def transport_refused(status: Optional[int]) -> bool:
    return status == UNSUPPORTED_TRANSPORT


def open_rtsp(url: str, name: str, transport: str, params: list[int], timeout_s: float) -> cv2.VideoCapture:
    """Open ``url`` over ``transport`` (tcp, udp, auto) and log which one is used. Returns the
    capture, opened or not; raises :class:`TransportRefused` when the server refuses TCP (461) and
    the config allows nothing else, so the operator reads the fix instead of "cannot open"."""
    first = "udp" if transport == "udp" else "tcp"
    cap = open_ffmpeg(url, first, params)
    if cap.isOpened():
        log.info("camera %s: RTSP over %s (camera.rtsp_transport = %s)", name, first.upper(), transport)
        return cap
    cap.release()
    if first == "udp":
        return cap
    status = probe_tcp_setup(url, timeout_s)
    if not transport_refused(status):
        return cap
    if transport == "tcp":
        raise TransportRefused(
            f"cannot open camera source {name!r}: the server answers {UNSUPPORTED_TRANSPORT} Unsupported "
            'Transport to RTP over TCP (it offers UDP only); set [camera] rtsp_transport = "udp" or "auto"'
        )
    cap = open_ffmpeg(url, "udp", params)
    if cap.isOpened():
        log.info(
            "camera %s: RTSP over UDP (the server answers %d Unsupported Transport to TCP; "
            'camera.rtsp_transport = "auto")',
            name,
            UNSUPPORTED_TRANSPORT,
        )
    return cap
