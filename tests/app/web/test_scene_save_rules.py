"""The editor's save without the web server or the loop thread (in process, so mutation testing
reaches it): a built agent whose ``call_in_loop`` runs the apply at once, what is written, what is
refused with which status, and what each camera takes."""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Any, Callable

import pytest
from support.clip import REPO, SAMPLES
from support.world import agent_toml

from edge_agent.app.agent.agent import Agent
from edge_agent.app.agent.output_steps import ObjectsOutput
from edge_agent.app.cli.configfile import load_config
from edge_agent.app.web import scene_save
from edge_agent.app.web.scene_save import HEADER, SceneSaver, scene_of
from edge_agent.core.config.schema import parse_config
from edge_agent.core.web.request_limits import RequestError

LINE = "points = [[0.5, 0.0], [0.5, 1.0]]"
DOOR = {"name": "door", "points": [[0.3, 0.0], [0.3, 1.0]]}
ZONE = {"name": "pen", "polygon": [[0.0, 0.0], [0.5, 0.0], [0.5, 0.5]]}


def two_cameras(tmp: Path, web: dict[str, Any] | None = None) -> Agent:
    extra = (
        f'[[cameras]]\nid = "gate"\nsource = "{SAMPLES}"\n[[cameras.lines]]\nname = "inline"\n{LINE}\n'
        f'[[cameras]]\nid = "yard"\nsource = "{SAMPLES}"\n'
        f'[[lines]]\nname = "fence"\ncamera = "yard"\n{LINE}\n'
        '[[zones]]\nname = "lot"\ncamera = "gate"\npolygon = [[0.0, 0.0], [1.0, 0.0], [1.0, 1.0]]\n'
    )
    text = agent_toml(
        tmp / "state",
        None,
        REPO / "models" / "demo-detector.onnx",
        extra=extra,
        output={"mode": "objects"},
        web=web or {},
    )
    (tmp / "a.toml").write_text(text)
    return Agent(parse_config(text), tmp / "a.toml")


def inline(agent: Agent, monkeypatch: pytest.MonkeyPatch) -> list[Callable[[], None]]:
    calls: list[Callable[[], None]] = []

    def run(fn: Callable[[], None]) -> None:
        calls.append(fn)
        fn()

    monkeypatch.setattr(agent, "call_in_loop", run)
    return calls


def lines_of(agent: Agent) -> dict[str, list[str]]:
    return {
        p.id: [ln.name for ln in p.output.objects.events.lines]
        for p in agent.pipelines
        if isinstance(p.output, ObjectsOutput)
    }


def test_scene_of_splits_editable_from_fixed(tmp_path: Path) -> None:
    agent = two_cameras(tmp_path)
    gate: dict[str, Any] = scene_of(agent.cfg, "gate")
    assert gate == {
        "camera": "gate",
        "zones": [{"name": "lot", "polygon": [[0.0, 0.0], [1.0, 0.0], [1.0, 1.0]]}],
        "lines": [],
        "fixed": {"zones": [], "lines": [{"name": "inline", "points": [[0.5, 0.0], [0.5, 1.0]]}]},
    }
    yard = scene_of(agent.cfg, "yard")
    assert yard["lines"] == [{"name": "fence", "points": [[0.5, 0.0], [0.5, 1.0]]}]
    assert yard["fixed"] == {"zones": [], "lines": []} and yard["zones"] == []
    # a camera no [[cameras]] table names: nothing fixed, nothing of its own
    assert scene_of(agent.cfg, None) == {
        "camera": None,
        "zones": [],
        "lines": [],
        "fixed": {"zones": [], "lines": []},
    }


def test_web_scene_file_is_where_the_save_goes_its_folders_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "etc" / "edge" / "scene.toml"
    agent = two_cameras(tmp_path, {"scene_file": str(target)})
    inline(agent, monkeypatch)
    got = SceneSaver(agent).save({"camera": "yard", "lines": [DOOR]})
    assert got["saved"] == str(target) and target.is_file()
    assert not (tmp_path / "state" / "scene.toml").exists()


def test_a_save_writes_the_drop_in_and_each_camera_takes_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = two_cameras(tmp_path)
    calls = inline(agent, monkeypatch)
    saver = SceneSaver(agent)
    got = saver.save({"camera": "yard", "lines": [DOOR], "zones": [ZONE]})
    drop_in = tmp_path / "state" / "scene.toml"
    # counts of the whole scene saved: gate's zone kept beside yard's new one
    assert got == {"saved": str(drop_in), "zones": 2, "lines": 1, "applied": True}
    assert len(calls) == 1 and saver.saves == 1
    text = drop_in.read_text(encoding="utf-8")
    assert all(f"# {h}" in text for h in HEADER.splitlines()) and '"door"' in text
    assert lines_of(agent) == {"gate": ["inline"], "yard": ["door"]}
    assert [ln.name for ln in agent.cfg.lines] == ["door"] and sorted(z.name for z in agent.cfg.zones) == [
        "lot",
        "pen",
    ]
    yard = next(p for p in agent.pipelines if p.id == "yard")
    assert [ln.name for ln in yard.cfg.lines] == ["door"] and [z.name for z in yard.cfg.zones] == ["pen"]
    gate = next(p for p in agent.pipelines if p.id == "gate")
    assert [ln.name for ln in gate.cfg.lines] == ["inline"]
    # the file reads back as the config: the next load has the saved scene
    assert [ln.name for ln in load_config(tmp_path / "a.toml").lines] == ["door"]
    assert saver.save({"camera": "yard", "lines": []})["lines"] == 0 and saver.saves == 2
    assert lines_of(agent) == {"gate": ["inline"], "yard": []}


def test_an_edit_config_check_refuses_is_422_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = two_cameras(tmp_path)
    calls = inline(agent, monkeypatch)
    saver = SceneSaver(agent)
    with pytest.raises(RequestError) as err:
        saver.save({"camera": "yard", "lines": [DOOR, DOOR]})
    assert err.value.status == 422 and "'door' is used twice" in err.value.message
    assert f"{tmp_path / 'a.toml'} + {tmp_path / 'state' / 'scene.toml'}" in err.value.message
    assert not (tmp_path / "state" / "scene.toml").exists() and calls == [] and saver.saves == 0


def test_no_config_file_is_409(tmp_path: Path) -> None:
    agent = two_cameras(tmp_path)
    agent.config_path = None
    with pytest.raises(RequestError) as err:
        SceneSaver(agent).save({"camera": "yard", "lines": []})
    assert (err.value.status, err.value.message) == (
        409,
        "this agent runs without a config file: nothing to save into",
    )


def test_an_unreadable_config_is_500_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    agent = two_cameras(tmp_path)
    (tmp_path / "a.toml").unlink()
    with pytest.raises(RequestError) as err:
        SceneSaver(agent).save({"camera": "yard", "lines": []})
    assert err.value.status == 500
    assert err.value.message == f"{tmp_path / 'a.toml'}: cannot read the config: No such file or directory"


def test_an_unwritable_drop_in_is_500_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A full disk (root ignores permissions, so the write itself is made to fail as ENOSPC)."""
    agent = two_cameras(tmp_path)
    calls = inline(agent, monkeypatch)

    def full(path: Path, data: bytes) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(scene_save, "write_durable", full)
    with pytest.raises(RequestError) as err:
        SceneSaver(agent).save({"camera": "yard", "lines": []})
    assert err.value.status == 500 and calls == []
    want = f"{tmp_path / 'state' / 'scene.toml'}: cannot write the drop-in: No space left on device"
    assert err.value.message == want
    assert lines_of(agent)["yard"] == ["fence"]


def test_a_loop_that_does_not_take_the_apply_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    agent = two_cameras(tmp_path)
    monkeypatch.setattr(scene_save, "APPLY_WAIT_S", 0.01)
    monkeypatch.setattr(agent, "call_in_loop", lambda fn: None)  # never runs it
    got = SceneSaver(agent).save({"camera": "yard", "lines": [DOOR]})
    assert got["applied"] is False and (tmp_path / "state" / "scene.toml").exists()
    assert lines_of(agent)["yard"] == ["fence"]  # not applied: the old lines stay
