"""Optional Prometheus text endpoint on 127.0.0.1 (``[health] prometheus_port``).

Loopback only: the board exposes nothing to the network; a local node_exporter-style scraper or an
SSH tunnel reads it. The numbers come from a callable so this module knows nothing about the agent.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Union

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


def _label(value: str) -> str:
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def render(metrics: Mapping[str, float], labels: Mapping[str, str]) -> str:
    """Prometheus text exposition format, one gauge family per metric, ``edge_agent_`` prefixed.

    A name may carry labels of its own, ``camera_fps{camera="gate"}`` (label values escaped by the
    caller): one ``# TYPE`` line per family, then each series."""
    lab = ",".join(f'{k}="{_label(v)}"' for k, v in sorted(labels.items()))
    lines = []
    typed: set[str] = set()
    for name, value in sorted(metrics.items()):
        family, _, own = name.partition("{")
        full = f"edge_agent_{family}"
        if full not in typed:
            typed.add(full)
            lines.append(f"# TYPE {full} gauge")
        both = ",".join(p for p in (lab, own.rstrip("}")) if p)
        lines.append(f"{full}{{{both}}} {number(value)}")
    return "\n".join(lines) + "\n"


class MetricsServer:
    def __init__(
        self,
        port: int,
        collect: Callable[[], Union[tuple[Mapping[str, float], Mapping[str, str]], str]],
    ) -> None:
        """``collect``: ``(gauges, labels)`` to :func:`render`, or the exposition text itself."""
        collect_fn = collect

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
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

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, name="metrics", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
