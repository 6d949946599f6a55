"""camera_rtsp.probe_tcp_setup against a scripted RTSP server on loopback: what goes on the wire
(request lines, CSeq, Basic and Digest logins answered anew for each method and URI, the track the
SDP names, TEARDOWN of the session it opened), replies split over many reads, and the bounds on
what a server may send (no reply, an endless head, a silent listener). The real gst-rtsp-server
tests are in test_rtsp_transport.py; this one plays cameras that server cannot (logins, odd SDP)."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Optional

import pytest

from edge_agent.adapters.camera.rtsp import MAX_REPLY, open_rtsp, probe_tcp_setup


@dataclass
class Request:
    line: str
    headers: dict[str, str]

    @property
    def method(self) -> str:
        return self.line.split(" ")[0]

    @property
    def uri(self) -> str:
        return self.line.split(" ")[1]


Script = Callable[[Request], Optional[bytes]]


@dataclass
class ScriptedCamera:
    """Accepts one connection and answers each request with ``script(request)`` (None: close)."""

    script: Script
    port: int = 0
    requests: list[Request] = field(default_factory=list)
    statuses: list[str] = field(default_factory=list)  # of the replies sent, in order
    closed_by_client: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", self.port))
        self.sock.listen(4)
        self.port = self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:  # one connection after the other (FFmpeg's, then the probe's)
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                self._talk(conn)

    def _talk(self, conn: socket.socket) -> None:
        data = b""
        while True:
            while b"\r\n\r\n" not in data:
                try:
                    chunk = conn.recv(4096)
                except OSError:
                    chunk = b""
                if not chunk:
                    self.closed_by_client.set()
                    return
                data += chunk
            head, _, data = data.partition(b"\r\n\r\n")
            line, *rest = head.decode("utf-8").split("\r\n")
            headers = dict(h.split(": ", 1) for h in rest if ": " in h)
            req = Request(line, headers)
            self.requests.append(req)
            answer = self.script(req)
            if answer is None:
                return
            self.statuses.append(answer.split(b" ", 2)[1].decode())
            conn.sendall(answer)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes the accept() (close alone does not)
        self.sock.close()
        self.thread.join(10)
        assert not self.thread.is_alive()


@pytest.fixture
def camera() -> Iterator[Callable[[Script], ScriptedCamera]]:
    made: list[ScriptedCamera] = []

    def make(script: Script) -> ScriptedCamera:
        made.append(ScriptedCamera(script))
        return made[-1]

    yield make
    for c in made:
        c.close()


def reply(status: str, cseq: str, headers: Optional[dict[str, str]] = None, body: bytes = b"") -> bytes:
    lines = [f"RTSP/1.0 {status}", f"CSeq: {cseq}"] + [f"{k}: {v}" for k, v in (headers or {}).items()]
    if body:
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def md5(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()


REALM, NONCE = "IP Camera(21388)", "c0ffee42"
# a real camera's SDP: audio first, the video track's control relative, padded past one read
SDP = (
    "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=cam\r\nt=0 0\r\na=control:*\r\n"
    "m=video 0 RTP/AVP 96\r\na=rtpmap:96 H264/90000\r\na=control:track1\r\n"
    "m=audio 0 RTP/AVP 0\r\na=control:track2\r\n" + "a=x-pad:" + "p" * 9000 + "\r\n"
).encode()


def digest_camera(user: str, password: str, setup_status: str = "200 OK") -> Script:
    """Digest-protected camera (what most IP cameras ask): checks each answer for its method and
    URI as a camera does, refuses a wrong one with 401."""

    def script(req: Request) -> bytes:
        cseq = req.headers.get("CSeq", "?")
        auth = req.headers.get("Authorization", "")
        want = md5(f"{md5(f'{user}:{REALM}:{password}')}:{NONCE}:{md5(f'{req.method}:{req.uri}')}")
        if f'response="{want}"' not in auth or f'uri="{req.uri}"' not in auth:
            return reply(
                "401 Unauthorized", cseq, {"WWW-Authenticate": f'Digest realm="{REALM}", nonce="{NONCE}"'}
            )
        if req.method == "DESCRIBE":
            base = f"rtsp://127.0.0.1:{req.uri.split(':')[2].split('/')[0]}/Streaming/101/"
            return reply("200 OK", cseq, {"Content-Base": base, "Content-Type": "application/sdp"}, SDP)
        if req.method == "SETUP":
            session = {"Session": "8f3a;timeout=60"} if setup_status.startswith("200") else {}
            return reply(setup_status, cseq, {"Transport": req.headers.get("Transport", ""), **session})
        return reply("200 OK", cseq)

    return script


def test_a_digest_camera_is_asked_describe_setup_teardown_each_answered_for_its_uri(
    camera: Callable[[Script], ScriptedCamera],
) -> None:
    """The login in the URL is percent-decoded; the challenge of the 401 is answered for each
    method and URI; the SETUP goes to the video track (the SDP's relative control on its
    Content-Base), over TCP; the session opened is torn down."""
    cam = camera(digest_camera("ad@min", "p:ss/1"))
    url = f"rtsp://ad%40min:p%3Ass%2F1@127.0.0.1:{cam.port}/Streaming/101?transportmode=unicast"
    assert probe_tcp_setup(url, timeout_s=10.0) == 200
    bare = f"rtsp://127.0.0.1:{cam.port}/Streaming/101?transportmode=unicast"
    track = f"rtsp://127.0.0.1:{cam.port}/Streaming/101/track1"
    assert [(r.method, r.uri, r.headers["CSeq"]) for r in cam.requests] == [
        ("DESCRIBE", bare, "1"),
        ("DESCRIBE", bare, "2"),
        ("SETUP", track, "3"),
        ("TEARDOWN", bare, "4"),
    ]
    assert all(r.line.endswith(" RTSP/1.0") and r.headers["User-Agent"] == "edge-agent" for r in cam.requests)
    first, second, setup, teardown = cam.requests
    assert "Authorization" not in first.headers  # no login is sent before the camera asks which
    assert second.headers["Accept"] == first.headers["Accept"] == "application/sdp"
    assert second.headers["Authorization"].startswith('Digest username="ad@min", realm="IP Camera(21388)"')
    assert setup.headers["Transport"] == "RTP/AVP/TCP;unicast;interleaved=0-1"
    assert teardown.headers["Session"] == "8f3a"
    assert "Authorization" in setup.headers and "Authorization" in teardown.headers
    assert cam.statuses == ["401", "200", "200", "200"]  # each answer accepted, the session closed


def test_a_camera_that_refuses_tcp_gives_461_and_no_session_is_torn_down(
    camera: Callable[[Script], ScriptedCamera],
) -> None:
    cam = camera(digest_camera("admin", "pw", setup_status="461 Unsupported Transport"))
    assert probe_tcp_setup(f"rtsp://admin:pw@127.0.0.1:{cam.port}/s1", timeout_s=10.0) == 461
    assert [r.method for r in cam.requests] == ["DESCRIBE", "DESCRIBE", "SETUP"]
    assert cam.closed_by_client.wait(10)


def test_a_wrong_password_is_the_401_not_a_setup(camera: Callable[[Script], ScriptedCamera]) -> None:
    cam = camera(digest_camera("admin", "right"))
    assert probe_tcp_setup(f"rtsp://admin:wrong@127.0.0.1:{cam.port}/s1", timeout_s=10.0) == 401
    assert [r.method for r in cam.requests] == ["DESCRIBE", "DESCRIBE"]
    cam2 = camera(digest_camera("admin", "right"))
    assert probe_tcp_setup(f"rtsp://127.0.0.1:{cam2.port}/s1", timeout_s=10.0) == 401  # no login: asked once
    assert [r.method for r in cam2.requests] == ["DESCRIBE"]


def test_a_basic_login_is_sent_when_the_camera_asks_for_basic(
    camera: Callable[[Script], ScriptedCamera],
) -> None:
    token = base64.b64encode(b"admin:").decode()  # a user without a password: an empty one

    def script(req: Request) -> bytes:
        cseq = req.headers["CSeq"]
        if req.headers.get("Authorization") != f"Basic {token}":
            return reply("401 Unauthorized", cseq, {"WWW-Authenticate": 'Basic realm="cam"'})
        if req.method == "DESCRIBE":
            return reply("200 OK", cseq, {}, b"v=0\r\nm=video 0 RTP/AVP 96\r\n")
        return reply("461 Unsupported Transport", cseq)

    cam = camera(script)
    assert probe_tcp_setup(f"rtsp://admin@127.0.0.1:{cam.port}/live", timeout_s=10.0) == 461
    assert [(r.method, r.uri) for r in cam.requests] == [
        ("DESCRIBE", f"rtsp://127.0.0.1:{cam.port}/live"),
        ("DESCRIBE", f"rtsp://127.0.0.1:{cam.port}/live"),
        ("SETUP", f"rtsp://127.0.0.1:{cam.port}/live"),  # no control line: the URL itself
    ]


def test_a_setup_without_a_session_is_not_torn_down(camera: Callable[[Script], ScriptedCamera]) -> None:
    def script(req: Request) -> bytes:
        if req.method == "DESCRIBE":
            return reply(
                "200 OK", req.headers["CSeq"], {"Content-Location": "rtsp://10.0.0.9/cam/"}, b"v=0\r\n"
            )
        return reply("200 OK", req.headers["CSeq"])

    cam = camera(script)
    assert probe_tcp_setup(f"rtsp://127.0.0.1:{cam.port}", timeout_s=10.0) == 200
    # no path: "/" asked; the SDP names no track: the Content-Location is the SETUP's URI
    assert [(r.method, r.uri) for r in cam.requests] == [
        ("DESCRIBE", f"rtsp://127.0.0.1:{cam.port}/"),
        ("SETUP", "rtsp://10.0.0.9/cam/"),
    ]


def test_what_cannot_be_asked_is_none_not_an_error(camera: Callable[[Script], ScriptedCamera]) -> None:
    """Not rtsp:// (rtsps is TLS: no plain probe), no host, a port that does not parse, a server
    that closes without a reply, a reply that is not RTSP."""
    assert probe_tcp_setup("rtsps://127.0.0.1:1/s1") is None
    assert probe_tcp_setup("http://127.0.0.1:1/s1") is None
    assert probe_tcp_setup("rtsp:///s1") is None
    assert probe_tcp_setup("rtsp://127.0.0.1:554x/s1") is None
    closes = camera(lambda req: None)
    assert probe_tcp_setup(f"RTSP://127.0.0.1:{closes.port}/s1", timeout_s=10.0) is None
    assert [r.method for r in closes.requests] == ["DESCRIBE"]  # the scheme in any case is RTSP
    http = camera(lambda req: b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
    assert probe_tcp_setup(f"rtsp://127.0.0.1:{http.port}/s1", timeout_s=10.0) is None


def test_an_endless_reply_head_is_cut_at_max_reply(camera: Callable[[Script], ScriptedCamera]) -> None:
    """A server that streams header bytes without ever ending the head: the probe stops reading
    after MAX_REPLY instead of waiting out its timeout (60 s here; the guard below is 30 s)."""
    cam = camera(lambda req: b"RTSP/1.0 200 OK\r\nX-Junk: " + b"j" * (MAX_REPLY + 8192))
    got: list[Optional[int]] = []
    t = threading.Thread(target=lambda: got.append(probe_tcp_setup(f"rtsp://127.0.0.1:{cam.port}/s1", 60.0)))
    t.start()
    t.join(30)
    assert not t.is_alive() and got == [None]


def test_a_silent_camera_is_given_up_after_the_timeout() -> None:
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(1)
    got: list[Optional[int]] = []
    url = f"rtsp://127.0.0.1:{silent.getsockname()[1]}/s1"
    t = threading.Thread(target=lambda: got.append(probe_tcp_setup(url, timeout_s=0.5)), daemon=True)
    t.start()
    try:
        t.join(30)  # a guard against a hang, not a timing
        assert not t.is_alive() and got == [None]
    finally:
        silent.close()


@pytest.mark.parametrize(
    ("length", "with_body"), [("1000000", True), ("abc", False), ("abc", True), ("-5", True)]
)
def test_a_content_length_that_is_no_size_is_not_waited_for(
    camera: Callable[[Script], ScriptedCamera], length: str, with_body: bool
) -> None:
    """A megabyte or more, or no number: the probe goes on with no body (the SETUP then goes to the
    URL itself) instead of waiting for bytes that never come or failing on the header."""

    def script(req: Request) -> bytes:
        cseq = req.headers["CSeq"]
        if req.method == "DESCRIBE":
            body = b"v=0\r\nm=video 0 RTP/AVP 96\r\na=control:track9\r\n" if with_body else b""
            return f"RTSP/1.0 200 OK\r\nCSeq: {cseq}\r\nContent-Length: {length}\r\n\r\n".encode() + body
        return reply("461 Unsupported Transport", cseq)

    cam = camera(script)
    assert probe_tcp_setup(f"rtsp://127.0.0.1:{cam.port}/s1", timeout_s=10.0) == 461
    assert [(r.method, r.uri) for r in cam.requests][-1] == ("SETUP", f"rtsp://127.0.0.1:{cam.port}/s1")


def describe_then_461(sdp: bytes) -> Script:
    """A camera that answers DESCRIBE with ``sdp`` and refuses the TCP SETUP that follows."""

    def script(req: Request) -> bytes:
        if req.method == "DESCRIBE":
            return reply("200 OK", req.headers["CSeq"], {}, sdp)
        return reply("461 Unsupported Transport", req.headers["CSeq"])

    return script


def test_an_sdp_with_a_blank_line_is_read_to_its_length(camera: Callable[[Script], ScriptedCamera]) -> None:
    """The head ends at the first blank line; an SDP that has one of its own (some cameras end it
    with one) is the body, read to its Content-Length."""
    sdp = b"v=0\r\nm=video 0 RTP/AVP 96\r\na=control:trackID=0\r\n\r\n"

    cam = camera(describe_then_461(sdp))
    assert probe_tcp_setup(f"rtsp://127.0.0.1:{cam.port}/s1", timeout_s=10.0) == 461
    assert cam.requests[-1].uri == f"rtsp://127.0.0.1:{cam.port}/s1/trackID=0"


def test_a_401_without_a_challenge_gets_no_login(camera: Callable[[Script], ScriptedCamera]) -> None:
    """No WWW-Authenticate: no scheme was asked for, so the password is not sent in any form."""
    cam = camera(lambda req: reply("401 Unauthorized", req.headers["CSeq"]))
    assert probe_tcp_setup(f"rtsp://admin:s3cret@127.0.0.1:{cam.port}/s1", timeout_s=10.0) == 401
    assert [r.method for r in cam.requests] == ["DESCRIBE", "DESCRIBE"]
    assert all("Authorization" not in r.headers for r in cam.requests)


def test_a_url_that_is_not_rtsp_is_not_asked(camera: Callable[[Script], ScriptedCamera]) -> None:
    cam = camera(lambda req: reply("200 OK", req.headers["CSeq"]))
    for scheme in ("http", "rtsps", "rtmp"):
        assert probe_tcp_setup(f"{scheme}://127.0.0.1:{cam.port}/s1", timeout_s=10.0) is None
    assert cam.requests == []


def test_an_sdp_that_is_not_utf8_is_still_read(camera: Callable[[Script], ScriptedCamera]) -> None:
    """A camera named in Latin-1 (``s=Caméra``): the byte that is not UTF-8 does not end the probe."""
    sdp = "v=0\r\ns=Caméra entrée\r\nm=video 0 RTP/AVP 96\r\na=control:video\r\n".encode("latin-1")

    cam = camera(describe_then_461(sdp))
    assert probe_tcp_setup(f"rtsp://127.0.0.1:{cam.port}/s1", timeout_s=10.0) == 461
    assert cam.requests[-1].uri == f"rtsp://127.0.0.1:{cam.port}/s1/video"


def test_a_url_without_a_port_is_asked_at_554() -> None:
    """RTSP's port (RFC 2326). Binding 554 needs root (CI runs as root): skipped otherwise."""
    try:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 554))
    except OSError as exc:
        pytest.skip(f"cannot listen on 127.0.0.1:554 here: {exc}")
    sock.close()
    srv = ScriptedCamera(lambda req: reply("404 Not Found", req.headers["CSeq"]), port=554)
    try:
        assert probe_tcp_setup("rtsp://127.0.0.1/s1", timeout_s=10.0) == 404
        assert [r.uri for r in srv.requests] == ["rtsp://127.0.0.1/s1"]
    finally:
        srv.close()


def test_udp_never_asks_about_tcp_and_auto_asks_once(camera: Callable[[Script], ScriptedCamera]) -> None:
    """``rtsp_transport = "udp"``: one FFmpeg open, no probe. ``auto``: FFmpeg over TCP fails, the
    probe asks (edge-agent's own DESCRIBE), the 461 sends FFmpeg to UDP."""
    import cv2

    params = [cv2.CAP_PROP_OPEN_TIMEOUT_MSEC, 2000, cv2.CAP_PROP_READ_TIMEOUT_MSEC, 2000]
    for transport, probes in (("udp", 0), ("auto", 1)):
        cam = camera(lambda req: reply("461 Unsupported Transport", req.headers["CSeq"]))
        cap = open_rtsp(f"rtsp://127.0.0.1:{cam.port}/s1", "cam", transport, params, 5.0)
        assert not cap.isOpened()
        ours = [r for r in cam.requests if r.headers.get("User-Agent") == "edge-agent"]
        assert [r.method for r in ours] == ["DESCRIBE"] * probes, transport
