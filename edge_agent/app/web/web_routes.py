"""The page's routes on the running agent: status, counts, events, live frames, inference, the editor.

Every route reads what the agent already keeps (its status snapshot, each objects step's counters,
the messages it queued) and copies it on the request's thread; nothing here runs per frame except
the live view's observer (app/web/live_view.py) and :class:`EventLog`'s append of a queued message.
"""

from __future__ import annotations

import base64
import itertools
import json
import threading
from collections import deque
from typing import TYPE_CHECKING, Any, Deque, Dict, List, Optional, Tuple

from edge_agent.adapters.host.metrics_http import render
from edge_agent.adapters.web.page_server import Request, Response, Route, json_response
from edge_agent.app.agent.output_steps import ObjectsOutput
from edge_agent.app.web.infer_api import InferApi
from edge_agent.app.web.live_view import LiveView, counts_copy
from edge_agent.app.web.scene_save import SceneSaver, scene_of
from edge_agent.core.messages.status import prometheus_values
from edge_agent.core.web.request_limits import RequestError, image_from_body

if TYPE_CHECKING:
    from edge_agent.app.agent.agent import Agent

EVENTS_KEPT = 100  # recent messages kept for the page (their snapshots too: bounded by the count)


class EventLog:
    """The latest queued messages that are events (object events, event-mode results), newest last."""

    def __init__(self, size: int = EVENTS_KEPT) -> None:
        self.items: Deque[Tuple[int, Dict[str, Any]]] = deque(maxlen=size)
        self._ids = itertools.count(1)

    def add(self, body: Dict[str, Any]) -> None:
        if "event" in body or "detections" in body:
            self.items.append((next(self._ids), body))

    def recent(self, limit: int) -> List[Dict[str, Any]]:
        out = []
        for n, body in list(self.items)[-limit:][::-1]:
            shown = {k: v for k, v in body.items() if k not in ("snapshot_jpeg_b64", "image")}
            shown["id"] = n
            if body.get("snapshot_jpeg_b64"):
                shown["snapshot"] = f"/api/v1/snapshot?id={n}"
            out.append(shown)
        return out

    def snapshot(self, n: int) -> Optional[bytes]:
        for k, body in list(self.items):
            if k == n and body.get("snapshot_jpeg_b64"):
                return base64.b64decode(body["snapshot_jpeg_b64"])
        return None


def _int(req: Request, key: str, default: int, lo: int, hi: int) -> int:
    raw = req.query.get(key)
    if raw is None:
        return default
    try:
        v = int(raw)
    except ValueError:
        raise RequestError(400, f"?{key}={raw!r}: expected a whole number") from None
    if not lo <= v <= hi:
        raise RequestError(400, f"?{key}={v}: expected {lo} to {hi}")
    return v


def counts(agent: Agent) -> Dict[str, Any]:
    """Per camera: each line's in/out and each zone's entered totals and occupancy now."""
    out: Dict[str, Any] = {}
    for pipe in agent.pipelines:
        step = pipe.output
        if not isinstance(step, ObjectsOutput):
            continue
        events = step.objects.events
        for _ in range(5):  # the loop may replace the dicts meanwhile (an edit): read again
            try:
                totals, occ = counts_copy(events.totals), events.occupancy()
                break
            except RuntimeError:
                continue
        else:
            raise RequestError(503, "the counters changed while being read; retry")
        out[pipe.id] = {
            "lines": totals["lines"],
            "zones": {n: {**c, "occupancy": occ.get(n, 0)} for n, c in totals["zones"].items()},
        }
    return {"cameras": out}


def routes(
    agent: Agent, live: LiveView, events: EventLog, infer: InferApi, saver: SceneSaver
) -> Dict[Tuple[str, str], Route]:
    ids = [p.id for p in agent.pipelines]
    one = len(ids) == 1 and not agent.named_cameras
    lock = threading.Lock()

    def camera_of(req: Request) -> str:
        cam = req.query.get("camera", ids[0])
        if cam not in ids:
            raise RequestError(404, f"?camera={cam!r}: no such camera (cameras: {', '.join(ids)})")
        return cam

    def cameras(_req: Request) -> Response:
        return json_response(
            {
                "cameras": [
                    {"id": p.id, "objects": isinstance(p.output, ObjectsOutput), "mode": p.cfg.output.mode}
                    for p in agent.pipelines
                ],
                "device": agent.cfg.device.id,
                "live_fps": agent.cfg.web.live_fps,
            }
        )

    def status(_req: Request) -> Response:
        return json_response(agent.current_status(fresh=True))  # as a Prometheus scrape: now

    def live_jpeg(req: Request) -> Response:
        got = live.jpeg(camera_of(req))
        if got is None:
            raise RequestError(503, "no frame yet from this camera (is it running? see /api/v1/status)")
        return Response(200, got[1], "image/jpeg", {"X-Frame-Seq": str(got[0])})

    def recent(req: Request) -> Response:
        return json_response({"events": events.recent(_int(req, "limit", 20, 1, EVENTS_KEPT))})

    def snapshot(req: Request) -> Response:
        data = events.snapshot(_int(req, "id", 0, 0, 1 << 62))
        if data is None:
            raise RequestError(404, "no such snapshot among the recent events")
        return Response(200, data, "image/jpeg")

    def infer_route(req: Request) -> Response:
        return json_response(infer.infer(image_from_body(req.headers.get("Content-Type"), req.body)))

    def scene_get(req: Request) -> Response:
        return json_response(scene_of(agent.cfg, None if one else camera_of(req)))

    def scene_post(req: Request) -> Response:
        try:
            edit = json.loads(req.body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise RequestError(400, f"the edit is not JSON: {exc}") from None
        with lock:
            return json_response(saver.save(edit))

    def metrics(_req: Request) -> Response:
        text = render(prometheus_values(agent.current_status(fresh=True)), {"device": agent.cfg.device.id})
        return Response(200, text.encode(), "text/plain; version=0.0.4")

    return {
        ("GET", "/api/v1/cameras"): cameras,
        ("GET", "/api/v1/status"): status,
        ("GET", "/api/v1/counts"): lambda _r: json_response(counts(agent)),
        ("GET", "/api/v1/events"): recent,
        ("GET", "/api/v1/snapshot"): snapshot,
        ("GET", "/api/v1/live.jpg"): live_jpeg,
        ("POST", "/api/v1/infer"): infer_route,
        ("GET", "/api/v1/scene"): scene_get,
        ("POST", "/api/v1/scene"): scene_post,
        ("GET", "/metrics"): metrics,
    }
