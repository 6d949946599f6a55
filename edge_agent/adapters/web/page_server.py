"""The device page's HTTP server: the stdlib's ThreadingHTTPServer, a route table, static files.

Why the stdlib and not Starlette/uvicorn or aiohttp (docs/web.md has the long form): the page
serves a handful of JSON routes and JPEGs to one or two viewers, which a thread per request does
well; uvicorn dropped Python 3.8 with 0.34 (Dec 2024) so JetPack 4 would pin a frozen release
of it (and of Starlette, anyio, h11, click); aiohttp needs compiled wheels of itself, multidict,
yarl, frozenlist and propcache for every board; and an asyncio loop beside the agent's threads
would be one more concurrency model to get right. ``http.server`` is in every Python 3.8, on every
board, with nothing to install: the base install stays as small as it was.

What this module knows is HTTP: a request is checked (:class:`Access`), its body bounded before
it is read, and handed to the route; the routes (app/web) know nothing of sockets.
"""

from __future__ import annotations

import json
import logging
import mimetypes
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable, Dict, Tuple
from urllib.parse import parse_qs, urlsplit

from edge_agent.adapters.web.access import Access
from edge_agent.core.web.request_limits import RequestError, body_length

log = logging.getLogger(__name__)

STATIC = Path(__file__).resolve().parent / "static"
PAGES = {"/": "index.html", "/app.js": "app.js", "/app.css": "app.css"}
ANSWER_ONLY = {"/api/v1/infer"}  # POSTs that change nothing: no write header needed (curl -F)


@dataclass
class Request:
    method: str
    path: str
    query: Dict[str, str]
    headers: Mapping[str, str]
    body: bytes = b""


@dataclass
class Response:
    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    headers: Dict[str, str] = field(default_factory=dict)


Route = Callable[[Request], Response]


def json_response(data: object, status: int = 200) -> Response:
    return Response(status, json.dumps(data, separators=(",", ":")).encode())


def error_response(status: int, message: str) -> Response:
    return json_response({"error": message}, status)


class PageServer:
    """Serves ``routes`` ((method, path) -> handler) and the page's static files."""

    def __init__(
        self,
        bind: str,
        port: int,
        routes: Mapping[Tuple[str, str], Route],
        access: Access,
        max_body: int,
    ) -> None:
        table = dict(routes)
        self.requests = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                self._handle("GET")

            def do_POST(self) -> None:
                self._handle("POST")

            def do_HEAD(self) -> None:
                self._handle("HEAD")

            def _handle(self, method: str) -> None:
                server.requests += 1
                url = urlsplit(self.path)
                path = url.path
                query = {k: v[0] for k, v in parse_qs(url.query).items()}
                public = method in ("GET", "HEAD") and path in PAGES
                # names as Title-Case (HTTP names are case-blind; every name looked up is Title-Case)
                headers = {k.title(): v for k, v in self.headers.items()}
                refused = access.refuse(method, headers, public, path not in ANSWER_ONLY)
                if refused is not None:
                    extra = {"WWW-Authenticate": "Bearer"} if refused[0] == 401 else {}
                    self._send(error_response(*refused), method, close=method == "POST", **extra)
                    return
                if public:
                    self._send(_static(PAGES[path]), method)
                    return
                route = table.get(("GET" if method == "HEAD" else method, path))
                if route is None:
                    known = sorted({p for _, p in table} | set(PAGES))
                    status = 405 if any(p == path for _, p in table) else 404
                    self._send(
                        error_response(status, f"{method} {path}: not here (routes: {', '.join(known)})"),
                        method,
                        close=method == "POST",  # its body is not read: the connection ends
                    )
                    return
                body = b""
                if method == "POST":
                    try:
                        n = body_length(self.headers.get("Content-Length"), max_body)
                    except RequestError as exc:  # not read: the connection closes after the answer
                        self._send(error_response(exc.status, exc.message), method, close=True)
                        return
                    body = self.rfile.read(n)
                try:
                    resp = route(Request(method, path, query, headers, body))
                except RequestError as exc:
                    resp = error_response(exc.status, exc.message)
                except Exception as exc:
                    log.exception("web: %s %s failed", method, path)
                    resp = error_response(500, f"{type(exc).__name__}: {exc}")
                self._send(resp, method)

            def _send(self, resp: Response, method: str, close: bool = False, **extra: str) -> None:
                self.send_response(resp.status)
                self.send_header("Content-Type", resp.content_type)
                self.send_header("Content-Length", str(len(resp.body)))
                self.send_header("Cache-Control", "no-store")
                self.send_header("X-Content-Type-Options", "nosniff")
                self.send_header("X-Frame-Options", "DENY")
                for k, v in {**resp.headers, **extra}.items():
                    self.send_header(k, v)
                if close:
                    self.send_header("Connection", "close")
                    self.close_connection = True
                self.end_headers()
                if method != "HEAD":
                    self.wfile.write(resp.body)

            def log_message(self, format: str, *args: object) -> None:
                log.debug("web: " + format, *args)

        self.server = _server_class(bind)((bind, port), Handler)
        self.server.daemon_threads = True
        self.port = int(self.server.server_address[1])
        self.thread = threading.Thread(target=self.server.serve_forever, name="web", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _static(name: str) -> Response:
    path = STATIC / name
    kind = mimetypes.guess_type(name)[0] or "application/octet-stream"
    return Response(200, path.read_bytes(), f"{kind}; charset=utf-8")


def _server_class(bind: str) -> type[ThreadingHTTPServer]:
    """IPv6 binds (``::``, ``::1``) need the address family set on the server class."""
    if ":" not in bind:
        return ThreadingHTTPServer
    import socket

    class V6(ThreadingHTTPServer):
        address_family = socket.AF_INET6

    return V6
