"""The page's routes on a built agent that is not running (issue 36: in process, no server, no
loop thread, so mutation testing reaches them): what each route answers, its query bounds in one
line, the counts per camera, the editor's JSON check, and /metrics."""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np
import pytest
from support.clip import REPO, SAMPLES
from support.world import agent_toml

from edge_agent.adapters.outbox.outbox import Outbox
from edge_agent.adapters.web.page_server import Request, Response
from edge_agent.app.agent.agent import Agent, Parts
from edge_agent.app.agent.output_steps import ObjectsOutput
from edge_agent.app.web import live_view
from edge_agent.app.web.infer_api import InferApi
from edge_agent.app.web.live_view import LiveView
from edge_agent.app.web.scene_save import SceneSaver
from edge_agent.app.web.web_routes import EVENTS_KEPT, EventLog, counts, routes
from edge_agent.core.camera.source_spec import Frame
from edge_agent.core.config.schema import parse_config
from edge_agent.core.web.request_limits import RequestError

DEMO = REPO / "models" / "demo-detector.onnx"
LINE = "points = [[0.5, 0.0], [0.5, 1.0]]"
JPEG = b"\xff\xd8 a snapshot \xff\xd9"


def build(tmp: Path, extra: str = "", mode: str = "objects") -> Agent:
    text = agent_toml(
        tmp / "state",
        None if extra else SAMPLES,
        DEMO,
        extra=extra,
        output={"mode": mode},
        web={"live_fps": 4.0},
    )
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "a.toml").write_text(text)
    return Agent(parse_config(text), tmp / "a.toml")


def two_cameras(tmp: Path) -> Agent:
    return build(
        tmp,
        f'[[cameras]]\nid = "gate"\nsource = "{SAMPLES}"\n[[cameras.lines]]\nname = "door"\n{LINE}\n'
        f'[[cameras]]\nid = "yard"\nsource = "{SAMPLES}"\n'
        '[[zones]]\nname = "lot"\ncamera = "yard"\npolygon = [[0.0, 0.0], [1.0, 0.0], [1.0, 1.0]]\n',
    )


class Page:
    """The route table of ``agent`` and the parts it reads."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.live = LiveView(agent.cfg.web.live_fps)
        self.events = EventLog()
        self.table = routes(
            agent, self.live, self.events, InferApi(lambda: None, 10**6, 0), SceneSaver(agent)
        )

    def __call__(
        self, method: str, path: str, body: bytes = b"", ctype: Optional[str] = None, **query: str
    ) -> Response:
        headers = {"Content-Type": ctype} if ctype else {}
        return self.table[(method, path)](Request(method, path, query, headers, body))

    def json(self, path: str, **query: str) -> Any:
        resp = self("GET", path, **query)
        assert (resp.status, resp.content_type) == (200, "application/json")
        return json.loads(resp.body)

    def refused(self, method: str, path: str, body: bytes = b"", **query: str) -> tuple[int, str]:
        with pytest.raises(RequestError) as got:
            self(method, path, body, **query)
        return got.value.status, got.value.message


def test_cameras_lists_each_with_its_mode_the_device_and_the_live_rate(tmp_path: Path) -> None:
    assert Page(two_cameras(tmp_path)).json("/api/v1/cameras") == {
        "cameras": [
            {"id": "gate", "objects": True, "mode": "objects"},
            {"id": "yard", "objects": True, "mode": "objects"},
        ],
        "device": "cam-1",
        "live_fps": 4.0,
    }
    one = Page(build(tmp_path / "b", mode="every_frame"))
    assert one.json("/api/v1/cameras")["cameras"] == [
        {"id": "default", "objects": False, "mode": "every_frame"}
    ]


def test_counts_per_camera_with_occupancy_and_none_for_a_camera_without_objects(tmp_path: Path) -> None:
    agent = two_cameras(tmp_path)
    yard = agent.pipelines[1].output
    assert isinstance(yard, ObjectsOutput)
    events = yard.objects.events
    events.totals["zones"]["lot"]["entered"] = 3
    events.occupancy = lambda: {"lot": 2}  # type: ignore[method-assign]
    want = {
        "cameras": {
            "gate": {"lines": {"door": {"in": 0, "out": 0}}, "zones": {}},
            "yard": {"lines": {}, "zones": {"lot": {"entered": 3, "occupancy": 2}}},
        }
    }
    assert Page(agent).json("/api/v1/counts") == want == counts(agent)
    assert counts(build(tmp_path / "b", mode="every_frame")) == {"cameras": {}}


def test_counts_read_again_while_the_loop_replaces_them_and_give_up_after_five(tmp_path: Path) -> None:
    agent = two_cameras(tmp_path)
    gate = agent.pipelines[0].output
    assert isinstance(gate, ObjectsOutput)
    events = gate.objects.events
    real = events.occupancy
    failures = [4]

    def changing() -> dict[str, int]:
        if failures[0] > 0:
            failures[0] -= 1
            raise RuntimeError("dictionary changed size during iteration")
        return real()

    events.occupancy = changing  # type: ignore[method-assign]
    assert counts(agent)["cameras"]["gate"]["lines"] == {"door": {"in": 0, "out": 0}}
    failures[0] = 5
    with pytest.raises(RequestError) as got:
        counts(agent)
    assert got.value.status == 503 and "retry" in got.value.message


def test_events_limit_and_snapshots_by_id(tmp_path: Path) -> None:
    page = Page(build(tmp_path))
    for n in range(25):
        page.events.add(
            {"event": "zone_entered", "object_id": n, "snapshot_jpeg_b64": base64.b64encode(JPEG).decode()}
        )
    assert len(page.json("/api/v1/events")["events"]) == 20  # the default
    assert [e["object_id"] for e in page.json("/api/v1/events", limit="1")["events"]] == [24]
    assert len(page.json("/api/v1/events", limit=str(EVENTS_KEPT))["events"]) == 25
    assert page.refused("GET", "/api/v1/events", limit="0") == (400, f"?limit=0: expected 1 to {EVENTS_KEPT}")
    assert page.refused("GET", "/api/v1/events", limit=str(EVENTS_KEPT + 1))[0] == 400
    assert page.refused("GET", "/api/v1/events", limit="ten") == (
        400,
        "?limit='ten': expected a whole number",
    )
    newest = page.json("/api/v1/events", limit="1")["events"][0]["id"]
    snap = page("GET", "/api/v1/snapshot", id=str(newest))
    assert (snap.status, snap.body, snap.content_type) == (200, JPEG, "image/jpeg")
    assert page.refused("GET", "/api/v1/snapshot")[0] == 404  # id 0 is no event's
    assert page.refused("GET", "/api/v1/snapshot", id="-1")[0] == 400
    assert page.refused("GET", "/api/v1/snapshot", id=str(1 << 62)) == (
        404,
        "no such snapshot among the recent events",
    )
    assert page.refused("GET", "/api/v1/snapshot", id=str((1 << 62) + 1))[0] == 400


def _keep_frame(page: Page, cam: str, seq: int) -> None:
    pipe = next(p for p in page.agent.pipelines if p.id == cam)
    page.live.watched_until[cam] = time.monotonic() + 60
    image = np.full((48, 64, 3), 90, np.uint8)
    page.live.observer(pipe)(None, Frame(image, 0.0, 0.0, seq, "test"), [])  # type: ignore[arg-type]


def test_live_jpeg_of_each_camera_and_one_line_for_an_unknown_or_silent_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = Page(two_cameras(tmp_path))
    monkeypatch.setattr(live_view, "FIRST_FRAME_WAIT_S", 0.01)
    status, msg = page.refused("GET", "/api/v1/live.jpg")
    assert status == 503 and "no frame yet" in msg
    _keep_frame(page, "gate", 7)
    _keep_frame(page, "yard", 9)
    got = page("GET", "/api/v1/live.jpg")  # the first camera without ?camera
    assert (got.status, got.content_type, got.headers) == (200, "image/jpeg", {"X-Frame-Seq": "7"})
    assert got.body[:2] == b"\xff\xd8"
    assert page("GET", "/api/v1/live.jpg", camera="yard").headers == {"X-Frame-Seq": "9"}
    assert page.refused("GET", "/api/v1/live.jpg", camera="dock") == (
        404,
        "?camera='dock': no such camera (cameras: gate, yard)",
    )


def test_the_scene_of_one_camera_or_of_the_one_asked(tmp_path: Path) -> None:
    single = Page(build(tmp_path))
    got = single.json("/api/v1/scene", camera="whatever")  # one [camera]: the query is not read
    assert got["camera"] is None and got["lines"] == []
    many = Page(two_cameras(tmp_path / "b"))
    assert many.json("/api/v1/scene")["camera"] == "gate"
    assert many.json("/api/v1/scene", camera="yard")["camera"] == "yard"
    assert many.refused("GET", "/api/v1/scene", camera="dock")[0] == 404


def test_a_scene_edit_that_is_no_json_is_400_a_good_one_is_saved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = build(tmp_path)
    ran: list[Callable[[], None]] = []

    def inline(fn: Callable[[], None]) -> None:
        ran.append(fn)
        fn()

    monkeypatch.setattr(agent, "call_in_loop", inline)
    page = Page(agent)
    for body in (b"{not json", b"\xff\xfe"):
        status, msg = page.refused("POST", "/api/v1/scene", body)
        assert status == 400 and msg.startswith("the edit is not JSON: ")
    edit = {"lines": [{"name": "door", "points": [[0.3, 0.0], [0.3, 1.0]]}], "zones": []}
    resp = page("POST", "/api/v1/scene", json.dumps(edit).encode())
    assert resp.status == 200 and json.loads(resp.body)["saved"] and len(ran) == 1


def test_infer_reads_the_form_and_answers_503_while_no_model_is_loaded(tmp_path: Path) -> None:
    page = Page(build(tmp_path))
    image = (SAMPLES / "sample_1.jpg").read_bytes()
    assert page.refused("POST", "/api/v1/infer", image, ctype="text/plain")[0] == 415
    status, msg = page.refused("POST", "/api/v1/infer", image, ctype="image/jpeg")
    assert (status, msg) == (503, "the models are not loaded yet")


def test_status_and_metrics_answer_the_agents_latest_snapshot(tmp_path: Path) -> None:
    agent = build(tmp_path)
    agent.last_status = {"state": "running", "frames": 12, "queue": {"pending": 3}}
    page = Page(agent)
    assert page.json("/api/v1/status") == agent.last_status
    resp = page("GET", "/metrics")
    text = resp.body.decode()
    assert (resp.status, resp.content_type) == (200, "text/plain; version=0.0.4")
    assert 'edge_agent_frames_total{device="cam-1"} 12' in text
    assert 'edge_agent_queue_pending{device="cam-1"} 3' in text


def test_status_and_metrics_are_built_now_not_the_last_ticks(tmp_path: Path) -> None:
    agent = build(tmp_path)
    outbox = Outbox.from_config(agent.cfg.queue)
    try:
        agent._parts = Parts(outbox)  # running: a snapshot can be built between two ticks
        agent.last_status = {"state": "running", "frames": 999}  # the last tick's, stale
        page = Page(agent)
        now = page.json("/api/v1/status")
        assert now["frames"] == 0 and now["state"] == "running" and "queue" in now
        text = page("GET", "/metrics").body.decode()
        assert 'edge_agent_frames_total{device="cam-1"} 0' in text and "999" not in text
    finally:
        outbox.close()


def test_event_ids_start_at_1_and_event_mode_results_are_events_without_their_image(tmp_path: Path) -> None:
    page = Page(build(tmp_path))
    page.events.add({"detections": [{"label": "person"}], "image": "frame_0001.jpg", "seq": 4})
    page.events.add({"lines": {"door": {"in": 1}}, "zones": {}})  # counts: not an event
    assert page.json("/api/v1/events")["events"] == [{"detections": [{"label": "person"}], "seq": 4, "id": 1}]
    assert page.refused("GET", "/api/v1/snapshot", id="1")[0] == 404  # no snapshot in it


def test_one_named_camera_has_its_scene_by_id(tmp_path: Path) -> None:
    page = Page(build(tmp_path, f'[[cameras]]\nid = "gate"\nsource = "{SAMPLES}"\n'))
    assert page.json("/api/v1/scene")["camera"] == "gate"
    assert page.refused("GET", "/api/v1/scene", camera="yard")[0] == 404
