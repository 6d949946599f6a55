"""RTSP transport choice (pure): FFmpeg's capture options, and the few RTSP replies the agent reads
itself to tell "the server refuses RTP over TCP" (461) from "the camera is not there".

OpenCV's FFmpeg backend reads ``OPENCV_FFMPEG_CAPTURE_OPTIONS`` ("key;value|key;value") at each
open and gives no status code back: a server that only offers UDP (VLC, several NVRs and cheap
cameras) answers the TCP SETUP with ``461 Unsupported Transport`` and OpenCV reports only "not
opened". So ``auto`` opens over TCP, and when that fails asks the server itself (DESCRIBE, then a
SETUP over TCP); on 461 it opens over UDP.
"""

from __future__ import annotations

import hashlib
import re
from typing import Optional
from urllib.parse import urljoin

TRANSPORTS = ("tcp", "udp", "auto")
UNSUPPORTED_TRANSPORT = 461


def capture_options(transport: str, existing: str = "") -> str:
    """``existing`` FFmpeg capture options with ``rtsp_transport`` set to ``transport`` (the config
    decides the transport; every other option the operator put in the variable is kept)."""
    kept = [
        item
        for item in existing.split("|")
        if item.strip() and item.split(";", 1)[0].strip() != "rtsp_transport"
    ]
    return "|".join([*kept, f"rtsp_transport;{transport}"])


def parse_reply(head: bytes) -> tuple[int, dict[str, str]]:
    """Status code and lower-cased headers of an RTSP reply head; ValueError if it is not one."""
    lines = head.decode("latin-1").split("\r\n")
    m = re.match(r"RTSP/1\.\d (\d{3})", lines[0])
    if m is None:
        raise ValueError(f"not an RTSP reply: {lines[0][:60]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        key, colon, value = line.partition(":")
        if colon:
            headers[key.strip().lower()] = value.strip()
    return int(m.group(1)), headers


def first_video_control(sdp: str, base: str) -> str:
    """The URL to SETUP for the first video (else first) media of an SDP, resolved against ``base``;
    a media without ``a=control`` (or with ``*``) is the base URL itself (RFC 2326 C.1.1)."""
    sections: list[tuple[str, Optional[str]]] = []  # (media type, its control) per m= line
    for line in sdp.splitlines():
        line = line.strip()
        if line.startswith("m="):
            sections.append((line[2:].split(" ", 1)[0], None))
        elif line.startswith("a=control:") and sections:  # session-level controls come before any m=
            sections[-1] = (sections[-1][0], line[len("a=control:") :].strip())
    video = [control for media, control in sections if media == "video"]
    control = video[0] if video else (sections[0][1] if sections else None)
    if not control or control == "*":
        return base
    if control.lower().startswith(("rtsp://", "rtsps://")):
        return control
    return urljoin(base if base.endswith("/") else base + "/", control)


def digest_authorization(challenge: str, user: str, password: str, method: str, uri: str) -> Optional[str]:
    """An ``Authorization: Digest`` value for a ``WWW-Authenticate: Digest`` challenge (RFC 2069
    form, what cameras ask for), None if the challenge is not Digest."""
    if not challenge.lower().startswith("digest"):
        return None
    fields = dict(re.findall(r'(\w+)="?([^",]*)"?', challenge[6:]))
    realm, nonce = fields.get("realm", ""), fields.get("nonce", "")

    def md5(text: str) -> str:
        # RTSP Digest is MD5 by definition (usedforsecurity= is 3.9+, this runs on 3.8)
        return hashlib.md5(text.encode("utf-8")).hexdigest()

    response = md5(f"{md5(f'{user}:{realm}:{password}')}:{nonce}:{md5(f'{method}:{uri}')}")
    return f'Digest username="{user}", realm="{realm}", nonce="{nonce}", uri="{uri}", response="{response}"'
