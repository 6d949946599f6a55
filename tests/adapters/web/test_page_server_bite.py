"""The page server's manners a browser and curl rely on (issue 36, in process on loopback so
mutation testing reaches its handler): HEAD answers without a body, every answer's safety headers,
which refusals close the connection, the token's 401 challenge, inference needing no write header,
the static files' types, an IPv6 bind, and stop."""

from __future__ import annotations

import http.client
import json
import logging
import socket
import threading
from collections.abc import Iterator
from typing import Any, Optional

import pytest

from edge_agent.adapters.web.access import Access
from edge_agent.adapters.web.page_server import PageServer, Request, Response, json_response

TOKEN = "a-token-0123456789abcdef"


def routes() -> dict[tuple[str, str], Any]:
    def echo(req: Request) -> Response:
        return json_response({"m": req.method, "n": len(req.body), "q": req.query})

    def tagged(_req: Request) -> Response:
        return Response(201, b"tagged", "text/plain", {"X-Frame-Seq": "7"})

    return {
        ("GET", "/echo"): echo,
        ("POST", "/echo"): echo,
        ("GET", "/tagged"): tagged,
        ("POST", "/api/v1/infer"): echo,
    }


def serve(token: Optional[str], bind: str = "127.0.0.1") -> PageServer:
    s = PageServer(bind, 0, routes(), Access(token, loopback=token is None), max_body=100)
    s.start()
    return s


# a server per test: mutmut credits a test with the code it saw run, and a module-scoped server is
# built in the first test only (its handler is PageServer.__init__'s: nothing else would count)
@pytest.fixture
def server() -> Iterator[PageServer]:
    s = serve(None)
    yield s
    s.stop()


def conn(s: PageServer) -> http.client.HTTPConnection:
    return http.client.HTTPConnection("127.0.0.1", s.port, timeout=10)


def answer(c: http.client.HTTPConnection) -> tuple[http.client.HTTPResponse, bytes]:
    r = c.getresponse()
    return r, r.read()


def test_head_gives_the_headers_of_get_and_no_body_on_a_kept_connection(server: PageServer) -> None:
    before = server.requests
    c = conn(server)
    c.request("GET", "/echo")
    r, body = answer(c)
    got = json.loads(body)
    assert got == {"m": "GET", "n": 0, "q": {}}
    c.request("HEAD", "/echo")
    r, head_body = answer(c)
    # the route saw HEAD; the length is its answer's, the body is not sent
    assert r.status == 200 and head_body == b""
    assert int(r.getheader("Content-Length") or -1) == len(b'{"m":"HEAD","n":0,"q":{}}')
    c.request("HEAD", "/")
    r, page = answer(c)
    assert r.status == 200 and page == b"" and int(r.getheader("Content-Length") or 0) > 100
    # a body sent after a HEAD would be read as the next answer's start: this one must be clean
    c.request("GET", "/echo?x=1&x=2&y=")
    r, body = answer(c)
    assert r.status == 200 and json.loads(body)["q"] == {"x": "1"}
    assert r.getheader("Connection") is None  # kept open
    c.close()
    assert server.requests == before + 4


def test_every_answer_carries_the_safety_headers_and_the_routes_own(server: PageServer) -> None:
    c = conn(server)
    for method, path in (("GET", "/tagged"), ("GET", "/nope"), ("GET", "/app.css")):
        c.request(method, path)
        r, _ = answer(c)
        assert r.getheader("Cache-Control") == "no-store", path
        assert r.getheader("X-Content-Type-Options") == "nosniff", path
        assert r.getheader("X-Frame-Options") == "DENY", path
    c.request("GET", "/tagged")
    r, body = answer(c)
    assert (r.status, body, r.getheader("Content-Type"), r.getheader("X-Frame-Seq")) == (
        201,
        b"tagged",
        "text/plain",
        "7",
    )
    c.close()


def test_the_static_files_have_their_types(server: PageServer) -> None:
    c = conn(server)
    want = {"/": "text/html", "/app.css": "text/css", "/app.js": "javascript"}
    for path, kind in want.items():
        c.request("GET", path)
        r, body = answer(c)
        ctype = r.getheader("Content-Type") or ""
        assert r.status == 200 and kind in ctype and ctype.endswith("; charset=utf-8"), (path, ctype)
        assert len(body) == int(r.getheader("Content-Length") or 0)
    c.close()


def test_unknown_and_wrong_method_list_every_route_and_page(server: PageServer) -> None:
    c = conn(server)
    c.request("GET", "/nope")
    r, body = answer(c)
    msg = json.loads(body)["error"]
    assert r.status == 404 and r.getheader("Connection") is None
    assert msg == "GET /nope: not here (routes: /, /api/v1/infer, /app.css, /app.js, /echo, /tagged)"
    c.request("POST", "/tagged", body=b"xy", headers={"X-Edge-Agent": "1"})
    r, body = answer(c)
    # its body is not read: the connection must end, or the body would be the next request
    assert r.status == 405 and r.getheader("Connection") == "close"
    assert json.loads(body)["error"].startswith("POST /tagged: not here")
    c.close()


def test_which_refusals_close_the_connection(server: PageServer) -> None:
    c = conn(server)
    c.request("POST", "/echo", body=b"ab")  # no write header: refused, body unread
    r, body = answer(c)
    assert r.status == 403 and r.getheader("Connection") == "close" and "X-Edge-Agent" in body.decode()
    assert r.getheader("WWW-Authenticate") is None
    c.close()
    c = conn(server)
    c.putrequest("GET", "/echo", skip_host=True)
    c.putheader("Host", "evil.example")
    c.endheaders()
    r, _ = answer(c)
    assert r.status == 403 and r.getheader("Connection") is None  # a GET has no body to skip
    c.close()
    for length, status in ((None, 411), ("lots", 400), ("101", 413)):
        c = conn(server)
        c.putrequest("POST", "/echo")
        c.putheader("X-Edge-Agent", "1")
        if length is not None:
            c.putheader("Content-Length", length)
        c.endheaders()
        r, body = answer(c)
        assert (r.status, r.getheader("Connection")) == (status, "close"), length
        assert "error" in json.loads(body)
        c.close()
    c = conn(server)
    c.request("POST", "/echo", body=b"x" * 100, headers={"X-Edge-Agent": "1"})
    r, body = answer(c)
    assert (r.status, json.loads(body)["n"], r.getheader("Connection")) == (200, 100, None)
    c.close()


def test_inference_needs_no_write_header_other_posts_do(server: PageServer) -> None:
    c = conn(server)
    c.request("POST", "/api/v1/infer", body=b"img")
    r, body = answer(c)
    assert r.status == 200 and json.loads(body) == {"m": "POST", "n": 3, "q": {}}
    c.close()


def test_a_token_page_challenges_with_bearer_and_serves_its_static_files() -> None:
    s = serve(TOKEN)
    try:
        c = conn(s)
        c.request("GET", "/echo")
        r, body = answer(c)
        assert r.status == 401 and r.getheader("WWW-Authenticate") == "Bearer"
        assert r.getheader("Connection") is None and "token" in json.loads(body)["error"]
        c.request("GET", "/")  # the page itself holds no data: it asks for the token
        r, body = answer(c)
        assert r.status == 200 and b"<script" in body
        c.request("GET", "/echo", headers={"Authorization": f"Bearer {TOKEN}"})
        r, body = answer(c)
        assert r.status == 200 and json.loads(body)["m"] == "GET"
        c.close()
    finally:
        s.stop()


def _has_ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as probe:
            probe.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.skipif(not _has_ipv6_loopback(), reason="this machine has no IPv6 loopback (::1)")
def test_an_ipv6_bind_serves_and_stop_ends_the_page() -> None:
    s = serve(None, "::1")
    c = http.client.HTTPConnection("::1", s.port, timeout=10)
    c.request("GET", "/echo", headers={"Host": f"[::1]:{s.port}"})
    r, body = answer(c)
    assert r.status == 200 and json.loads(body)["m"] == "GET"
    c.close()
    s.stop()
    with pytest.raises(OSError):
        socket.create_connection(("::1", s.port), timeout=5).close()


def test_a_refused_post_is_answered_and_its_connection_really_ends(server: PageServer) -> None:
    """Its body is never read: were the socket kept, the body would be parsed as a request."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as raw:
        raw.sendall(b"POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\n\r\nab")
        got = b""
        while True:
            chunk = raw.recv(4096)  # the server closes: EOF; kept open, this times out
            if not chunk:
                break
            got += chunk
    assert got.startswith(b"HTTP/1.1 403 ") and b"Connection: close" in got


def test_a_failing_route_and_each_request_are_logged_with_the_request(
    server: PageServer, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(_req: Request) -> Response:
        raise ValueError("a bug")

    caplog.set_level(logging.DEBUG, logger="edge_agent.adapters.web.page_server")
    s = PageServer("127.0.0.1", 0, {("GET", "/broken"): broken}, Access(None, loopback=True), max_body=10)
    s.start()
    try:
        c = conn(s)
        c.request("GET", "/broken?x=1")
        r, _ = answer(c)
        c.close()
    finally:
        s.stop()
    assert r.status == 500
    failed = [rec for rec in caplog.records if rec.levelno == logging.ERROR]
    assert [rec.getMessage() for rec in failed] == ["web: GET /broken failed"]
    assert failed[0].exc_info is not None and "a bug" in str(failed[0].exc_info[1])
    access = [rec.getMessage() for rec in caplog.records if rec.levelno == logging.DEBUG]
    assert any(m.startswith('web: "GET /broken?x=1 HTTP/1.1" 500') for m in access), access


def test_stop_does_not_wait_for_a_browser_holding_its_connection_open() -> None:
    """A browser keeps its connection between polls; the agent's stop must not wait on it."""
    s = serve(None)
    c = conn(s)
    c.request("GET", "/echo")
    assert answer(c)[0].status == 200  # the connection stays open, its thread waiting in a read
    stopping = threading.Thread(target=s.stop)
    stopping.start()
    stopping.join(20)  # a bound on a hang, not a timing: stop returns in about 0.5 s
    hung = stopping.is_alive()
    c.close()
    stopping.join()
    assert not hung


def test_the_server_runs_on_a_daemon_thread_named_for_thread_dumps(server: PageServer) -> None:
    """Named "web" in py-spy / faulthandler dumps; a daemon, so a page left open never keeps the
    process alive after the agent's own threads end."""
    assert server.thread.name == "web" and server.thread.daemon and server.thread.is_alive()
