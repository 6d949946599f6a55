"""[web] on the running agent (in process, a folder camera and the demo detector): the infer API
answers what ``infer --json`` prints, a 100 MP image is 413 in one line, a full queue is 429, the
token guards every data route and /metrics, a token file others can read stops ``run`` in one
line, and the live view keeps no frame while nobody watches."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Optional

import pytest
from support.bigpng import write_huge_png
from support.clip import REPO, SAMPLES
from support.ports import free_port
from support.runner import cli
from support.waiting import wait_until
from support.web import ask
from support.world import agent_toml, running

from edge_agent.app.agent.agent import Agent
from edge_agent.app.web.infer_api import InferGate
from edge_agent.core.config.schema import parse_config
from edge_agent.core.web.request_limits import RequestError

pytestmark = pytest.mark.slow
DEMO = REPO / "models" / "demo-detector.onnx"
TOKEN = "test-token-0123456789"


def form(data: bytes) -> tuple[bytes, dict[str, str]]:
    body = (
        b'--B0undary\r\nContent-Disposition: form-data; name="image"; filename="x.jpg"\r\n\r\n'
        + data
        + b"\r\n--B0undary--\r\n"
    )
    return body, {"Content-Type": "multipart/form-data; boundary=B0undary"}


def make_agent(tmp: Path, web: dict[str, Any], build: bool = True) -> tuple[Any, int]:
    port = free_port()
    text = agent_toml(
        tmp / "state",
        SAMPLES,
        DEMO,
        camera={"fps": 20.0, "loop": True},
        detector={"conf_threshold": 0.3},
        output={"mode": "objects"},
        web={"enabled": True, "port": port, **web},
    )
    (tmp / "agent.toml").write_text(text)
    return Agent(parse_config(text), tmp / "agent.toml") if build else None, port


@pytest.fixture
def agent(tmp_path: Path) -> Iterator[tuple[Agent, int]]:
    agent, port = make_agent(tmp_path, {})
    with running(agent):
        wait_until(lambda: agent.frames >= 5, 60, "five frames")
        yield agent, port


def test_infer_answers_what_infer_json_prints(agent: tuple[Agent, int]) -> None:
    _, port = agent
    image = SAMPLES / "sample_1.jpg"
    body, headers = form(image.read_bytes())
    status, got = ask(port, "POST", "/api/v1/infer", body, **headers)
    assert status == 200, got
    printed = cli("infer", "--json", "--conf", "0.3", "--model", str(DEMO), str(image))
    want = json.loads(printed.stdout.splitlines()[0])
    assert got["detections"] and got["detections"] == want["detections"]
    assert (got["width"], got["height"]) == (want["width"], want["height"])
    # the raw body form too
    status, raw = ask(port, "POST", "/api/v1/infer", image.read_bytes(), **{"Content-Type": "image/jpeg"})
    assert status == 200 and raw["detections"] == want["detections"]


def test_a_100_mp_image_is_413_in_one_line_and_the_agent_goes_on(
    agent: tuple[Agent, int], tmp_path: Path
) -> None:
    a, port = agent
    png = write_huge_png(tmp_path / "big.png", 10000, 10000)
    body, headers = form(png.read_bytes())
    status, got = ask(port, "POST", "/api/v1/infer", body, **headers)
    assert status == 413
    assert (
        "10000x10000 pixels (100 MP) exceeds the limit of 40 MP (web.max_pixels); not decoded" in got["error"]
    )
    frames = a.frames
    wait_until(lambda: a.frames > frames, 20, "frames after the refusal")


def test_status_counts_events_and_metrics_answer(agent: tuple[Agent, int]) -> None:
    _, port = agent
    status, got = ask(port, "GET", "/api/v1/status")
    assert status == 200 and got["device_id"] == "cam-1" and got["frames"] >= 1
    assert ask(port, "GET", "/api/v1/counts") == (200, {"cameras": {"default": {"lines": {}, "zones": {}}}})
    status, ev = ask(port, "GET", "/api/v1/events?limit=5")
    assert status == 200 and isinstance(ev["events"], list)
    assert ask(port, "GET", "/api/v1/events?limit=0")[0] == 400
    status, text = ask(port, "GET", "/metrics")
    assert status == 200 and b'edge_agent_frames_total{device="cam-1"}' in text


def test_the_live_view_keeps_no_frame_while_nobody_watches(agent: tuple[Agent, int]) -> None:
    a, port = agent
    assert a.web is not None
    live = a.web.live
    frames = a.frames
    wait_until(lambda: a.frames >= frames + 10, 30, "ten more frames")
    assert live.kept == 0 and live.encoded == 0 and not live.latest  # nobody watched
    status, jpeg = ask(port, "GET", "/api/v1/live.jpg")
    assert status == 200 and jpeg[:2] == b"\xff\xd8"
    assert live.kept >= 1 and live.encoded == 1
    assert ask(port, "GET", "/api/v1/live.jpg?camera=nope")[0] == 404


def test_the_token_guards_every_data_route_and_metrics(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text(TOKEN)
    os.chmod(token, 0o600)
    a, port = make_agent(tmp_path, {"token_file": str(token)})
    with running(a):
        wait_until(lambda: a.frames >= 1, 60, "a frame")
        for path in ("/api/v1/status", "/api/v1/counts", "/api/v1/live.jpg", "/metrics"):
            status, got = ask(port, "GET", path)
            assert status == 401 and "Bearer" in got["error"], path
            assert ask(port, "GET", path, Authorization=f"Bearer {TOKEN}")[0] == 200, path
        body, headers = form((SAMPLES / "sample_1.jpg").read_bytes())
        assert ask(port, "POST", "/api/v1/infer", body, **headers)[0] == 401
        assert ask(port, "GET", "/")[0] == 200  # the page itself: no data, asks for the token


def test_a_token_file_others_can_read_stops_run_in_one_line(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text(TOKEN)
    os.chmod(token, 0o644)
    make_agent(tmp_path, {"token_file": str(token), "bind": "0.0.0.0"}, build=False)
    proc = cli("run", "--config", str(tmp_path / "agent.toml"), timeout=60)
    assert proc.returncode != 0
    assert "mode 0644, expected 0600" in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_a_network_bind_without_a_token_fails_config_check(tmp_path: Path) -> None:
    make_agent(tmp_path, {"bind": "0.0.0.0"}, build=False)
    proc = cli("config", "check", "--config", str(tmp_path / "agent.toml"))
    assert proc.returncode == 1 and "set web.token_file" in proc.stderr


def test_the_gate_runs_one_lets_the_queue_wait_and_refuses_the_next() -> None:
    gate = InferGate(queue=1)
    release = threading.Event()
    inside: list[Optional[int]] = []

    def hold() -> None:
        with gate:
            inside.append(gate.inside)
            release.wait(10)

    threads = [threading.Thread(target=hold) for _ in range(2)]
    for t in threads:
        t.start()
    wait_until(lambda: gate.inside == 2, 5, "one running, one waiting")
    with pytest.raises(RequestError) as err:
        gate.__enter__()
    assert err.value.status == 429 and "web.infer_queue" in err.value.message
    release.set()
    for t in threads:
        t.join(10)
    assert gate.inside == 0 and gate.done == 2 and gate.refused == 1


def test_the_editor_refuses_what_config_check_refuses_and_applies_the_rest(agent: tuple[Agent, int]) -> None:
    a, port = agent
    line = {"name": "door", "points": [[0.5, 0.0], [0.5, 1.0]], "in_side": "left"}
    edit = json.dumps({"camera": None, "lines": [line, line]}).encode()
    assert ask(port, "POST", "/api/v1/scene", edit)[0] == 403  # no write header
    headers = {"X-Edge-Agent": "1", "Content-Type": "application/json"}
    status, got = ask(port, "POST", "/api/v1/scene", edit, **headers)
    assert status == 422 and "lines.1.name = 'door' is used twice" in got["error"]
    drop_in = Path(a.cfg.device.state_dir) / "scene.toml"
    assert not drop_in.exists()
    status, got = ask(
        port, "POST", "/api/v1/scene", json.dumps({"camera": None, "lines": [line]}).encode(), **headers
    )
    assert status == 200 and got["applied"] is True and got["saved"] == str(drop_in)
    assert [ln.name for ln in a.cfg.lines] == ["door"]
    assert a.objects is not None and [ln.name for ln in a.objects.events.lines] == ["door"]
    assert ask(port, "GET", "/api/v1/scene")[1]["lines"] == [line]
    assert ask(port, "GET", "/api/v1/counts")[1]["cameras"]["default"]["lines"] == {
        "door": {"in": 0, "out": 0}
    }
    assert cli("config", "check", "--config", str(a.config_path)).returncode == 0
