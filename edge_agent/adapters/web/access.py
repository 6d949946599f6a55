"""Who may use the device page: the token (beyond loopback), the Host check, CSRF-safe writes.

- Beyond loopback every data route needs ``Authorization: Bearer <token>``; the token is read at
  start from ``[web] token_file``, which must be the owner's alone (mode 0600): a token file others
  can read is refused with one line and the agent does not start.
- On loopback without a token, the ``Host`` header must name loopback: a page on another site whose
  name resolves to 127.0.0.1 (DNS rebinding) is refused.
- Writes (POST but inference) need the header ``X-Edge-Agent: 1`` and, when the browser sends an ``Origin``, one
  naming this host: a form on another site cannot set a custom header, and a script there would need
  a CORS preflight, which this server never grants. With the token, a browser does not attach it on
  its own either.
"""

from __future__ import annotations

import hmac
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Optional, Tuple

from edge_agent.errors import ConfigError

WRITE_HEADER = "X-Edge-Agent"
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]", "::1")
MAX_TOKEN_BYTES = 4096


def read_token(path: Path) -> str:
    """The token in ``path`` (stripped): ConfigError when others may read it, or it is empty."""
    try:
        st = os.stat(path)
        raw = path.read_bytes()[: MAX_TOKEN_BYTES + 1]
    except OSError as exc:
        raise ConfigError(f"web.token_file = '{path}': cannot read it: {exc.strerror or exc}") from None
    mode = stat.S_IMODE(st.st_mode)
    if mode & 0o077:
        raise ConfigError(
            f"web.token_file = '{path}': mode {mode:04o}, expected 0600 (owner only): "
            f"chmod 600 {path}; the page is not served"
        )
    token = raw.decode("utf-8", "replace").strip()
    if len(raw) > MAX_TOKEN_BYTES or len(token) < 16:
        raise ConfigError(
            f"web.token_file = '{path}': expected one token of 16 to {MAX_TOKEN_BYTES} characters "
            "(e.g. `openssl rand -hex 24`)"
        )
    return token


def _host_name(host: str) -> str:
    """``host[:port]`` -> host (an IPv6 literal keeps its brackets)."""
    if host.startswith("["):
        return host.split("]", 1)[0] + "]"
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


class Access:
    """The checks of one request; ``token`` None: loopback without a token."""

    def __init__(self, token: Optional[str], loopback: bool) -> None:
        self.token = token
        self.loopback = loopback

    def refuse(
        self, method: str, headers: Mapping[str, str], public: bool, changes: bool = True
    ) -> Optional[Tuple[int, str]]:
        """(status, one line) when the request may not go on, else None. ``public``: a static file
        of the page (no data in it); ``changes``: a POST that changes state (not inference, which
        only answers, to a caller that a browser would not let read it cross-site)."""
        host = headers.get("Host", "")
        if self.token is None and self.loopback and _host_name(host) not in LOOPBACK_HOSTS:
            return 403, f"Host {host!r} is not this machine's loopback name; open http://127.0.0.1:PORT/"
        if self.token is not None and not public:
            given = headers.get("Authorization", "")
            scheme, _, value = given.partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(
                value.strip().encode(), self.token.encode()
            ):
                return 401, "this page needs its token: send 'Authorization: Bearer <token>' (web.token_file)"
        if method not in ("GET", "HEAD") and changes:
            if headers.get(WRITE_HEADER) != "1":
                return 403, f"a write needs the header '{WRITE_HEADER}: 1' (cross-site requests are refused)"
            origin = headers.get("Origin")
            if origin is not None and origin.split("://", 1)[-1] != host:
                return 403, f"Origin {origin!r} is not this page ({host}); cross-site writes are refused"
        return None
