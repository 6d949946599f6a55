"""The page server on a real loopback socket: routes, static files, the body bound before reading,
a failing route answering 500 while the server goes on."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from typing import Any

import pytest

from edge_agent.adapters.web.access import Access
from edge_agent.adapters.web.page_server import PageServer, Request, Response, json_response
from edge_agent.core.web.request_limits import RequestError


@pytest.fixture
def server() -> Iterator[PageServer]:
    def echo(req: Request) -> Response:
        return json_response({"n": len(req.body), "q": req.query})

    def broken(_req: Request) -> Response:
        raise ValueError("a bug")

    def busy(_req: Request) -> Response:
        raise RequestError(429, "busy")

    routes = {
        ("POST", "/echo"): echo,
        ("GET", "/echo"): echo,
        ("GET", "/broken"): broken,
        ("GET", "/busy"): busy,
    }
    s = PageServer("127.0.0.1", 0, routes, Access(None, loopback=True), max_body=1000)
    s.start()
    yield s
    s.stop()


def ask(s: PageServer, method: str, path: str, body: bytes = b"", **headers: str) -> tuple[int, Any]:
    c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=10)
    c.request(method, path, body=body or None, headers={"X-Edge-Agent": "1", **headers})
    r = c.getresponse()
    data = r.read()
    c.close()
    ctype = r.getheader("Content-Type") or ""
    return r.status, json.loads(data) if ctype.startswith("application/json") else data


def test_routes_queries_and_bodies(server: PageServer) -> None:
    assert ask(server, "GET", "/echo?x=1") == (200, {"n": 0, "q": {"x": "1"}})
    assert ask(server, "POST", "/echo", b"abc") == (200, {"n": 3, "q": {}})


def test_a_body_over_the_limit_is_refused_before_it_is_read(server: PageServer) -> None:
    status, got = ask(server, "POST", "/echo", b"x" * 1001)
    assert status == 413 and "1001 bytes exceeds the limit of 1000" in got["error"]


def test_unknown_paths_failing_routes_and_refusals(server: PageServer) -> None:
    status, got = ask(server, "GET", "/nope")
    assert status == 404 and "/api" not in got["error"] and "/echo" in got["error"]
    assert ask(server, "POST", "/broken")[0] == 405
    status, got = ask(server, "GET", "/broken")
    assert status == 500 and "ValueError: a bug" in got["error"]
    assert ask(server, "GET", "/busy") == (429, {"error": "busy"})
    assert ask(server, "GET", "/echo")[0] == 200  # the server goes on


def test_the_page_is_served_from_the_package(server: PageServer) -> None:
    status, html = ask(server, "GET", "/")
    assert status == 200 and b'<script src="/app.js">' in html
    status, js = ask(server, "GET", "/app.js")
    assert (
        status == 200 and b"/api/v1/scene" in js and b"http" not in js.replace(b"https?", b"")
    )  # nothing remote


def test_header_names_are_case_blind(server: PageServer) -> None:
    c = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    c.putrequest("POST", "/echo", skip_host=True)
    for k, v in (("host", f"127.0.0.1:{server.port}"), ("x-edge-agent", "1"), ("content-length", "2")):
        c.putheader(k, v)
    c.endheaders(b"ab")
    r = c.getresponse()
    assert (r.status, json.loads(r.read())) == (200, {"n": 2, "q": {}})
    c.close()
