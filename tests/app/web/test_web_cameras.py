"""[web] with [[cameras]]: the editor saves one camera's lines and leaves the other's (and the
lines written inside a [[cameras]] table) alone; live frames and counts per camera id."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.clip import REPO, SAMPLES
from support.ports import free_port
from support.waiting import wait_until
from support.web import ask
from support.world import agent_toml, running

from edge_agent.app.agent.agent import Agent
from edge_agent.app.agent.output_steps import ObjectsOutput
from edge_agent.core.config.schema import parse_config

pytestmark = pytest.mark.slow
LINE = "points = [[0.5, 0.0], [0.5, 1.0]]"


def test_an_edit_of_one_camera_leaves_the_other_alone(tmp_path: Path) -> None:
    port = free_port()
    extra = (
        f'[[cameras]]\nid = "gate"\nsource = "{SAMPLES}"\nloop = true\n[[cameras.lines]]\nname = "inline"\n{LINE}\n'
        f'[[cameras]]\nid = "yard"\nsource = "{SAMPLES}"\nloop = true\n'
        f'[[lines]]\nname = "fence"\ncamera = "yard"\n{LINE}\n'
    )
    text = agent_toml(
        tmp_path / "state",
        None,
        REPO / "models" / "demo-detector.onnx",
        extra=extra,
        output={"mode": "objects"},
        web={"enabled": True, "port": port},
    )
    (tmp_path / "a.toml").write_text(text)
    agent = Agent(parse_config(text), tmp_path / "a.toml")
    with running(agent):
        wait_until(lambda: agent.frames >= 4, 60, "frames of both cameras")
        status, cams = ask(port, "GET", "/api/v1/cameras")
        assert [c["id"] for c in cams["cameras"]] == ["gate", "yard"]
        gate = ask(port, "GET", "/api/v1/scene?camera=gate")[1]
        assert gate["lines"] == [] and [ln["name"] for ln in gate["fixed"]["lines"]] == ["inline"]
        new = {"name": "door", "points": [[0.3, 0.0], [0.3, 1.0]]}
        body = json.dumps({"camera": "yard", "lines": [new]}).encode()
        status, got = ask(port, "POST", "/api/v1/scene", body, **{"X-Edge-Agent": "1"})
        assert status == 200 and got["applied"], got
        lines = {
            p.id: [ln.name for ln in p.output.objects.events.lines]
            for p in agent.pipelines
            if isinstance(p.output, ObjectsOutput)
        }
        assert lines == {"gate": ["inline"], "yard": ["door"]}
        counts = ask(port, "GET", "/api/v1/counts")[1]["cameras"]
        assert set(counts["gate"]["lines"]) == {"inline"} and set(counts["yard"]["lines"]) == {"door"}
        assert ask(port, "GET", "/api/v1/live.jpg?camera=yard")[0] == 200
        wrong = json.dumps({"camera": None, "lines": []}).encode()
        status, got = ask(port, "POST", "/api/v1/scene", wrong, **{"X-Edge-Agent": "1"})
        assert status == 422 and "expected one of gate, yard" in got["error"]
