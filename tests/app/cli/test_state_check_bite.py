"""The state-folder check as the service user meets it (issue 36, the survivors of cli-state-check):
every folder is checked even after one not made yet, the health file's folder is named by its key,
a folder the service user cannot write is refused naming that user, and a call without ``euid``
judges the process's own user. As root, the service user is played by support.users.as_user."""

from __future__ import annotations

import os
import pwd
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.users import OTHER_USERS, ROOT, as_user, open_dir

from edge_agent.app.cli.state_check import _user_name, check_state_folders
from edge_agent.core.config.schema import Config
from edge_agent.errors import ConfigError


def _cfg(state: Path, queue: Path, health: Path) -> Config:
    return Config.model_validate(
        {
            "device": {"state_dir": str(state)},
            "queue": {"path": str(queue / "outbox.db")},
            "health": {"status_file": str(health / "status.json")},
        }
    )


@pytest.fixture(name="open_dir")
def _open_dir() -> Iterator[Path]:
    with open_dir() as d:
        yield d


def test_the_health_files_folder_that_is_a_file_is_refused_naming_its_key(tmp_path: Path) -> None:
    (tmp_path / "h").write_text("")
    with pytest.raises(ConfigError) as info:
        check_state_folders(_cfg(tmp_path, tmp_path, tmp_path / "h"), euid=os.geteuid())
    assert str(info.value) == (
        f"[health] status_file's folder {tmp_path / 'h'}: is a file, expected a folder "
        "(or a path the agent may create)"
    )


def test_a_state_dir_not_made_yet_does_not_hide_a_queue_folder_that_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "q").write_text("")
    cfg = _cfg(tmp_path / "not-yet", tmp_path / "q", tmp_path)
    with pytest.raises(ConfigError, match=r"^\[queue\] path's folder .*/q: is a file"):
        check_state_folders(cfg, euid=os.geteuid())


def test_root_is_told_the_whole_way_to_run_it_as_the_owner(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    if ROOT:
        os.chown(state, 4242, 4242)
    with pytest.raises(ConfigError) as info:
        check_state_folders(_cfg(state, tmp_path, tmp_path), euid=0, user_name=lambda uid: "svc")
    assert str(info.value) == (
        f"[device] state_dir = {state} belongs to svc and this is root: files root writes there "
        "would lock the service out; run it as svc (sudo -u svc edge-agent run ..., or systemctl "
        "start edge-agent)"
    )


@pytest.mark.skipif(not ROOT, reason="root's own folders are the case; the rest is run as root")
def test_root_on_its_own_folders_is_told_nothing(tmp_path: Path) -> None:
    check_state_folders(_cfg(tmp_path, tmp_path, tmp_path), euid=0)


@pytest.mark.parametrize("uid", OTHER_USERS)
def test_the_service_user_on_a_folder_it_cannot_write_is_refused_naming_it(open_dir: Path, uid: int) -> None:
    state = open_dir / "state"
    state.mkdir(mode=0o500)
    if ROOT:
        state.chmod(0o755)  # root's, readable by all, writable by root only
    with as_user(uid), pytest.raises(ConfigError) as info:
        check_state_folders(_cfg(state, open_dir, open_dir), euid=uid)
    assert str(info.value) == (
        f"[device] state_dir = {state}: not writable by {pwd.getpwuid(uid).pw_name}; fix its "
        "owner/mode or set [device] state_dir"
    )


@pytest.mark.parametrize("uid", OTHER_USERS)
def test_the_service_user_on_its_own_folders_passes(open_dir: Path, uid: int) -> None:
    for name in ("state", "q", "h"):
        (open_dir / name).mkdir()
        if ROOT:
            os.chown(open_dir / name, uid, uid)
    with as_user(uid):
        check_state_folders(_cfg(open_dir / "state", open_dir / "q", open_dir / "h"), euid=uid)


def test_without_euid_the_check_judges_the_process_own_user(tmp_path: Path) -> None:
    """As root: a folder another user owns is refused; otherwise: a folder it cannot write is."""
    state = tmp_path / "state"
    state.mkdir(mode=0o500)
    if ROOT:
        os.chown(state, 4242, 4242)
    cfg = _cfg(state, tmp_path, tmp_path)
    with pytest.raises(ConfigError) as explicit:
        check_state_folders(cfg, euid=os.geteuid())
    with pytest.raises(ConfigError) as default:
        check_state_folders(cfg)
    assert str(default.value) == str(explicit.value)


def test_a_user_is_named_by_the_password_file_or_by_its_number() -> None:
    assert _user_name(os.getuid()) == pwd.getpwuid(os.getuid()).pw_name
    assert _user_name(1) == pwd.getpwuid(1).pw_name
    unknown = 4242424
    with pytest.raises(KeyError):
        pwd.getpwuid(unknown)
    assert _user_name(unknown) == f"uid {unknown}"
