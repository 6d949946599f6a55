"""[web] put on a built agent that is not running (issue 36: in process, so mutation testing
reaches it): the token, a bind beyond loopback without one, a port already taken, the URL it
logs, the parts it hands the routes, and the result chain the page's events come from."""

from __future__ import annotations

import http.client
import json
import logging
import socket
from pathlib import Path
from typing import Any

import pytest
from support.clip import REPO, SAMPLES
from support.world import agent_toml

from edge_agent.app.agent.agent import Agent
from edge_agent.app.agent.modelset import ModelSet
from edge_agent.app.web.web_app import WebApp, start_web
from edge_agent.core.config.schema import parse_config
from edge_agent.errors import ConfigError

TOKEN = "a-token-0123456789abcdef"
LINE = "points = [[0.5, 0.0], [0.5, 1.0]]"


def build(tmp: Path, extra: str = "", **web: Any) -> Agent:
    tmp.mkdir(parents=True, exist_ok=True)
    text = agent_toml(
        tmp / "state",
        None if extra else SAMPLES,
        REPO / "models" / "demo-detector.onnx",
        extra=extra,
        output={"mode": "objects"},
        web={"enabled": True, "port": 0, **web},
    )
    (tmp / "a.toml").write_text(text)
    return Agent(parse_config(text), tmp / "a.toml")


def token_file(tmp: Path) -> Path:
    path = tmp / "token"
    path.write_text(TOKEN + "\n")
    path.chmod(0o600)
    return path


def ask(app: WebApp, path: str, method: str = "GET", **headers: str) -> tuple[int, Any]:
    c = http.client.HTTPConnection("127.0.0.1", app.server.port, timeout=10)
    c.putrequest(method, path)
    for k, v in headers.items():
        c.putheader(k, v)
    c.endheaders()
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, json.loads(data)


def test_a_loopback_page_without_a_token_its_url_and_its_parts(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    agent = build(tmp_path, live_fps=4.0, max_pixels=12345, infer_queue=3, max_body_mb=1.0)
    app = WebApp(agent)
    assert app.token_required is False
    assert app.url == f"http://127.0.0.1:{app.server.port}/" and app.server.port > 0
    assert app.live.min_interval_s == 0.25
    assert (app.infer.max_pixels, app.infer.gate.limit) == (12345, 4)
    assert app.infer.models() is None  # not loaded yet
    agent._models = ModelSet.from_config(agent.cfg)  # loaded (or swapped by a reload) later
    assert app.infer.models() is agent.models is not None
    assert agent.pipelines[0].observers  # the live view's observer is on the camera
    caplog.set_level(logging.INFO, logger="edge_agent.app.web.web_app")
    app.start()
    try:
        assert [r.getMessage() for r in caplog.records if r.name.endswith("web_app")] == [
            f"device page on {app.url}"
        ]
        status, got = ask(app, "/api/v1/cameras", Host="127.0.0.1")
        assert status == 200 and got["live_fps"] == 4.0
        # the body bound is max_body_mb in bytes, checked before reading
        status, got = ask(
            app, "/api/v1/scene", "POST", **{"X-Edge-Agent": "1", "Content-Length": str(2**20 + 1)}
        )
        assert status == 413 and f"exceeds the limit of {2**20} bytes" in got["error"]
    finally:
        app.stop()


def test_a_token_file_guards_the_page(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    app = WebApp(build(tmp_path, token_file=str(token_file(tmp_path))))
    assert app.token_required is True
    caplog.set_level(logging.INFO, logger="edge_agent.app.web.web_app")
    app.start()
    try:
        assert [r.getMessage() for r in caplog.records if r.name.endswith("web_app")] == [
            f"device page on {app.url} (token required)"
        ]
        assert ask(app, "/api/v1/cameras")[0] == 401
        assert ask(app, "/api/v1/cameras", Authorization=f"Bearer {TOKEN}")[0] == 200
    finally:
        app.stop()


def test_a_bind_beyond_loopback_needs_a_token_even_from_a_config_built_in_code(tmp_path: Path) -> None:
    agent = build(tmp_path)
    # past the schema's check, as code may build it (model_copy does not validate)
    object.__setattr__(agent.cfg, "web", agent.cfg.web.model_copy(update={"bind": "0.0.0.0"}))
    with pytest.raises(ConfigError) as err:
        WebApp(agent)
    assert str(err.value) == "web.bind = '0.0.0.0' is not loopback: set web.token_file"
    object.__setattr__(
        agent.cfg, "web", agent.cfg.web.model_copy(update={"token_file": str(token_file(tmp_path))})
    )
    app = WebApp(agent)
    assert app.token_required and app.url == f"http://0.0.0.0:{app.server.port}/"
    app.server.server.server_close()


def test_a_port_taken_is_one_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ConfigError) as err:
            WebApp(build(tmp_path, port=port))
    msg = str(err.value)
    assert msg.startswith(f"web: cannot listen on 127.0.0.1:{port}: ") and "in use" in msg.lower()
    assert "\n" not in msg and "Errno" not in msg


def _has_ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.skipif(not _has_ipv6_loopback(), reason="this machine has no IPv6 loopback (::1)")
def test_an_ipv6_url_has_its_brackets(tmp_path: Path) -> None:
    app = WebApp(build(tmp_path, bind="::1"))
    assert app.url == f"http://[::1]:{app.server.port}/"
    app.server.server.server_close()


def test_every_result_reaches_the_page_and_the_chained_callback(tmp_path: Path) -> None:
    agent = build(tmp_path)
    seen: list[dict[str, Any]] = []
    agent.on_result = seen.append
    app = WebApp(agent)
    assert agent.on_result is not None
    event = {"event": "zone_entered", "object_id": 1}
    agent.on_result(event)
    agent.on_result({"lines": {}})  # counts: chained on, not a page event
    assert seen == [event, {"lines": {}}]
    assert [e["object_id"] for e in app.events.recent(10)] == [1]
    app.server.server.server_close()
    alone = build(tmp_path / "b")
    app = WebApp(alone)
    assert alone.on_result is not None
    alone.on_result(event)  # no callback before it: only the page's log
    assert len(app.events.recent(10)) == 1
    app.server.server.server_close()


def test_start_web_is_none_when_disabled_else_a_started_page(tmp_path: Path) -> None:
    off = build(tmp_path / "off")
    off.cfg.web.enabled = False
    assert start_web(off) is None
    app = start_web(build(tmp_path / "on", extra=f'[[cameras]]\nid = "gate"\nsource = "{SAMPLES}"\n'))
    assert app is not None
    try:
        assert app.server.thread.is_alive()
        assert ask(app, "/api/v1/cameras", Host="127.0.0.1")[1]["cameras"][0]["id"] == "gate"
    finally:
        app.stop()
