"""[web] (core/config/web.py) without a server: which addresses are loopback, that a page reachable
from the network needs a token file (said by `config check`, before a start), and where the
editor's scene drop-in lives."""

from __future__ import annotations

from pathlib import Path

import pytest

from edge_agent.core.config.schema import parse_config
from edge_agent.core.config.web import SCENE_FILE_NAME, is_loopback, scene_path
from edge_agent.errors import ConfigError


@pytest.mark.parametrize(
    ("bind", "loopback"),
    [
        ("localhost", True),
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.20", False),
        ("fe80::1", False),
        ("example.com", False),  # not an address: never taken for loopback
        ("", False),
    ],
)
def test_loopback_addresses(bind: str, loopback: bool) -> None:
    assert is_loopback(bind) is loopback


def web(**keys: object) -> str:
    lines = [f"{k} = {v!r}".replace("True", "true").replace("False", "false") for k, v in keys.items()]
    return "[web]\n" + "\n".join(lines) + "\n"


@pytest.mark.parametrize("bind", ["127.0.0.1", "::1", "localhost"])
def test_a_loopback_page_needs_no_token(bind: str) -> None:
    assert parse_config(web(enabled=True, bind=bind)).web.bind == bind


@pytest.mark.parametrize("bind", ["0.0.0.0", "192.168.1.20", "::"])
def test_a_page_beyond_loopback_needs_a_token_file(bind: str) -> None:
    with pytest.raises(
        ConfigError, match=rf"web\.bind = '{bind}' is reachable from the network: set web\.token_file"
    ):
        parse_config(web(enabled=True, bind=bind))
    cfg = parse_config(web(enabled=True, bind=bind, token_file="/etc/edge-agent/web-token"))
    assert cfg.web.token_file == "/etc/edge-agent/web-token"
    # off, the address is only a setting: nothing listens
    assert parse_config(web(enabled=False, bind=bind)).web.enabled is False


@pytest.mark.parametrize("bind", ["example.com", "127.0.0.1:8080", "", " 127.0.0.1", "LOCALHOST"])
def test_a_bind_that_is_no_address_is_one_line(bind: str) -> None:
    with pytest.raises(ConfigError, match=r"web\.bind = .*expected an IP address .* or localhost$"):
        parse_config(web(bind=bind))


def test_the_scene_drop_in_is_the_named_file_or_scene_toml_in_the_state_dir() -> None:
    assert scene_path("/etc/edge-agent/scene.toml", "/var/lib/edge-agent") == Path(
        "/etc/edge-agent/scene.toml"
    )
    assert scene_path(None, "/var/lib/edge-agent") == Path("/var/lib/edge-agent") / SCENE_FILE_NAME
    assert scene_path("", "/var/lib/edge-agent") == Path("/var/lib/edge-agent/scene.toml")
    assert SCENE_FILE_NAME == "scene.toml"
