"""``edge-agent run`` refuses state folders it cannot use, in one line, before anything starts: a
``state_dir`` that is a file (it used to run with rc 0, an ERROR per write and a false "kept as
.corrupt"), and root on folders the service user owns (it left root-owned files behind)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support.world import agent_toml

from edge_agent.app.cli.main import main
from edge_agent.app.cli.state_check import check_state_folders
from edge_agent.core.config.schema import Config
from edge_agent.errors import ConfigError

MODELS = Path(__file__).resolve().parents[3] / "models"


def _cfg(state: Path) -> Config:
    return Config.model_validate(
        {
            "device": {"state_dir": str(state)},
            "queue": {"path": str(state / "outbox.db")},
            "health": {"status_file": str(state / "status.json")},
        }
    )


def test_run_with_a_state_dir_that_is_a_file_is_one_line_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state"
    state.write_text("not a folder")
    cfg = tmp_path / "c.toml"
    text = agent_toml(state, MODELS / "samples", MODELS / "demo-detector-int8.onnx")
    cfg.write_text(text.replace(str(state / "outbox.db"), str(tmp_path / "q.db")))
    assert main(["run", "--config", str(cfg), "--max-frames", "1"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"edge-agent run: error: [device] state_dir = {state}: is a file, expected a folder "
        "(or a path the agent may create)"
    ]
    assert not (tmp_path / "q.db").exists()
    assert state.read_text() == "not a folder"


def test_a_queue_folder_that_is_a_file_is_refused_naming_its_key(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path)
    (tmp_path / "q").write_text("")
    cfg.queue.path = str(tmp_path / "q" / "outbox.db")
    with pytest.raises(ConfigError, match=r"^\[queue\] path's folder .*/q: is a file"):
        check_state_folders(cfg, euid=os.getuid())


def test_root_on_a_state_dir_another_user_owns_is_refused_naming_the_owner(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    if os.geteuid() == 0:
        os.chown(state, 4242, 4242)
    assert state.stat().st_uid != 0
    with pytest.raises(ConfigError) as info:
        check_state_folders(_cfg(state), euid=0, user_name=lambda uid: "edge-agent")
    text = str(info.value)
    assert "\n" not in text and text.startswith(f"[device] state_dir = {state} belongs to edge-agent")
    assert "and this is root" in text and "sudo -u edge-agent edge-agent run" in text


def test_root_on_its_own_folders_and_a_user_on_theirs_pass(tmp_path: Path) -> None:
    check_state_folders(_cfg(tmp_path), euid=tmp_path.stat().st_uid)
    check_state_folders(_cfg(tmp_path / "not-yet"), euid=os.geteuid())
