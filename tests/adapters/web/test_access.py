"""Who may use the page: the token file's mode, the Bearer token, the Host check, CSRF-safe writes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from edge_agent.adapters.web.access import Access, read_token
from edge_agent.errors import ConfigError

TOKEN = "0123456789abcdef0123"


def test_a_token_file_others_can_read_is_refused_in_one_line(tmp_path: Path) -> None:
    f = tmp_path / "token"
    f.write_text(TOKEN + "\n")
    os.chmod(f, 0o644)
    with pytest.raises(ConfigError) as err:
        read_token(f)
    assert "mode 0644, expected 0600" in str(err.value) and f"chmod 600 {f}" in str(err.value)
    assert "\n" not in str(err.value)
    os.chmod(f, 0o600)
    assert read_token(f) == TOKEN


def test_a_short_or_missing_token_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "token"
    f.write_text("short")
    os.chmod(f, 0o600)
    with pytest.raises(ConfigError, match="16 to 4096 characters"):
        read_token(f)
    with pytest.raises(ConfigError, match="cannot read it"):
        read_token(tmp_path / "none")


def test_beyond_loopback_every_data_request_needs_the_token() -> None:
    a = Access(TOKEN, loopback=False)
    host = {"Host": "10.0.0.5:8080"}
    refused = a.refuse("GET", host, public=False)
    assert refused is not None and refused[0] == 401 and "Authorization: Bearer" in refused[1]
    assert a.refuse("GET", {**host, "Authorization": "Bearer wrong-token-000000"}, public=False)[0] == 401  # type: ignore[index]
    assert a.refuse("GET", {**host, "Authorization": f"Basic {TOKEN}"}, public=False)[0] == 401  # type: ignore[index]
    assert a.refuse("GET", {**host, "Authorization": f"Bearer {TOKEN}"}, public=False) is None
    assert a.refuse("GET", host, public=True) is None  # the page's static files carry no data


def test_loopback_refuses_another_sites_name_for_it() -> None:
    a = Access(None, loopback=True)
    for host in ("127.0.0.1:8080", "localhost:8080", "[::1]:8080", "localhost"):
        assert a.refuse("GET", {"Host": host}, public=False) is None, host
    refused = a.refuse("GET", {"Host": "evil.example:8080"}, public=True)
    assert refused is not None and refused[0] == 403


def test_writes_need_the_custom_header_and_a_same_host_origin() -> None:
    a = Access(None, loopback=True)
    h = {"Host": "127.0.0.1:8080"}
    assert a.refuse("POST", h, public=False)[0] == 403  # type: ignore[index]
    assert a.refuse("POST", {**h, "X-Edge-Agent": "1"}, public=False) is None
    assert (
        a.refuse("POST", {**h, "X-Edge-Agent": "1", "Origin": "http://127.0.0.1:8080"}, public=False) is None
    )
    cross = a.refuse("POST", {**h, "X-Edge-Agent": "1", "Origin": "http://evil.example"}, public=False)
    assert cross is not None and cross[0] == 403 and "cross-site" in cross[1]
    assert a.refuse("POST", h, public=False, changes=False) is None  # inference: curl -F as it is
