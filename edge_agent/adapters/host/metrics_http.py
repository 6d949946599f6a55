"""Optional Prometheus text endpoint (``[health] prometheus_port``), on 127.0.0.1 by default.

Loopback unless ``[health] prometheus_bind`` says otherwise, and then only with a bearer token
(``prometheus_token_file``; the config refuses a non-loopback bind without one): a scrape without
``Authorization: Bearer <token>`` gets 401. The numbers come from a callable so this module knows
nothing about the agent; names, types and help are core.messages.agent_metrics.
"""

from __future__ import annotations

import hmac
import logging
import math
import socket
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Optional, Union

from edge_agent.core.messages import fleet_metrics
from edge_agent.core.messages.agent_metrics import agent_families

log = logging.getLogger(__name__)


def number(value: float) -> str:
    """A sample value as the exposition format reads it, exactly: ``:g`` kept 6 digits, so a frame
    counter of 1 234 567 (two days at 7 fps) went out as 1.23457e+06 and rate() saw steps."""
    f = float(value)
    if math.isnan(f):
        return "NaN"
    if math.isinf(f):
        return "+Inf" if f > 0 else "-Inf"
    if f.is_integer() and abs(f) < 2**53:
        return str(int(f))
    return repr(f)


def render(metrics: Mapping[str, float], labels: Mapping[str, str]) -> str:
    """Prometheus text exposition format, ``edge_agent_`` prefixed: each family's ``# HELP`` and
    ``# TYPE`` (counters ``_total``, times in seconds), then its series, ``labels`` on each.

    A name may carry labels of its own, ``camera_fps{camera="gate"}`` (label values escaped by the
    caller)."""
    return fleet_metrics.render(agent_families(metrics, labels))


class _V6Server(ThreadingHTTPServer):
    address_family = socket.AF_INET6


class MetricsServer:
    def __init__(
        self,
        port: int,
        collect: Callable[[], Union[tuple[Mapping[str, float], Mapping[str, str]], str]],
        bind: str = "127.0.0.1",
        token: Optional[str] = None,
    ) -> None:
        """``collect``: ``(gauges, labels)`` to :func:`render`, or the exposition text itself;
        ``token``: the bearer token every request must carry (None: none asked)."""
        collect_fn = collect
        want = None if token is None else f"Bearer {token}".encode()

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                got_auth = (self.headers.get("Authorization") or "").encode("utf-8", "replace")
                if want is not None and not hmac.compare_digest(got_auth, want):
                    self.send_response(401)
                    self.send_header("WWW-Authenticate", 'Bearer realm="edge-agent metrics"')
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if self.path.split("?")[0] != "/metrics":
                    self.send_error(404, "only /metrics here")
                    return
                got = collect_fn()
                body = (got if isinstance(got, str) else render(*got)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                log.debug("metrics: " + format, *args)

        server_cls = _V6Server if ":" in bind else ThreadingHTTPServer
        self.server = server_cls((bind, port), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, name="metrics", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
