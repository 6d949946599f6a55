"""adapters.web.access, the edges: the token's length and the file's mode bit by bit, each refusal's
one line (status and what to do), the Host forms that are loopback, the methods that write."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from edge_agent.adapters.web.access import (
    LOOPBACK_HOSTS,
    MAX_TOKEN_BYTES,
    WRITE_HEADER,
    Access,
    _host_name,
    read_token,
)
from edge_agent.errors import ConfigError

TOKEN = "0123456789abcdef0123"


def token_file(tmp_path: Path, text: str | bytes, mode: int = 0o600) -> Path:
    f = tmp_path / "token"
    if isinstance(text, bytes):
        f.write_bytes(text)
    else:
        f.write_text(text)
    os.chmod(f, mode)
    return f


def message(f: Path) -> str:
    with pytest.raises(ConfigError) as err:
        read_token(f)
    return str(err.value)


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o620, 0o602, 0o610, 0o601, 0o666])
def test_any_bit_for_group_or_others_is_refused(tmp_path: Path, mode: int) -> None:
    f = token_file(tmp_path, TOKEN, mode)
    assert message(f) == (
        f"web.token_file = '{f}': mode {mode:04o}, expected 0600 (owner only): chmod 600 {f}; the page is not served"
    )


@pytest.mark.parametrize("mode", [0o600, 0o400, 0o700])
def test_owner_only_modes_are_read(tmp_path: Path, mode: int) -> None:
    assert read_token(token_file(tmp_path, f"  {TOKEN}\n\n", mode)) == TOKEN


def test_the_token_length_bounds(tmp_path: Path) -> None:
    assert MAX_TOKEN_BYTES == 4096
    sixteen = "a" * 16
    assert read_token(token_file(tmp_path, sixteen)) == sixteen
    expected = (
        f"web.token_file = '{tmp_path / 'token'}': expected one token of 16 to 4096 characters "
        "(e.g. `openssl rand -hex 24`)"
    )
    assert message(token_file(tmp_path, "a" * 15)) == expected
    assert message(token_file(tmp_path, " " * 20 + "a" * 15 + "\n")) == expected  # blanks do not count
    longest = "b" * 4096
    assert read_token(token_file(tmp_path, longest)) == longest
    assert message(token_file(tmp_path, "b" * 4097)) == expected
    assert message(token_file(tmp_path, "b" * 5000)) == expected


def test_bytes_that_are_not_utf8_do_not_crash_the_start(tmp_path: Path) -> None:
    assert read_token(token_file(tmp_path, b"\xff" + b"x" * 20)) == "\ufffd" + "x" * 20


def test_an_unreadable_token_file_names_the_reason(tmp_path: Path) -> None:
    missing = tmp_path / "none"
    assert message(missing) == f"web.token_file = '{missing}': cannot read it: No such file or directory"
    assert message(tmp_path) == f"web.token_file = '{tmp_path}': cannot read it: Is a directory"


def test_host_names_without_their_port() -> None:
    assert _host_name("127.0.0.1:8080") == "127.0.0.1"
    assert _host_name("localhost") == "localhost"
    assert _host_name("[::1]:8080") == "[::1]"
    assert _host_name("[::1]") == "[::1]"
    assert _host_name("[::1]:80]") == "[::1]"  # the literal ends at its first bracket
    assert _host_name("::1") == "::1"  # two colons: an IPv6 literal, not host:port
    assert _host_name("a:b:c") == "a:b:c"
    assert _host_name("evil.example:127.0.0.1") == "evil.example"
    assert LOOPBACK_HOSTS == ("127.0.0.1", "localhost", "[::1]", "::1")


def test_the_host_refusal_names_the_host_and_the_way_in() -> None:
    a = Access(None, loopback=True)
    assert a.refuse("GET", {"Host": "::1"}, public=False) is None
    assert a.refuse("GET", {"Host": "evil.example:8080"}, public=False) == (
        403,
        "Host 'evil.example:8080' is not this machine's loopback name; open http://127.0.0.1:PORT/",
    )
    assert a.refuse("GET", {}, public=True) == (
        403,
        "Host '' is not this machine's loopback name; open http://127.0.0.1:PORT/",
    )


def test_the_host_check_is_for_loopback_without_a_token_only() -> None:
    far = {"Host": "camera-7.lan:8080"}
    assert Access(None, loopback=False).refuse("GET", far, public=False) is None
    assert (
        Access(TOKEN, loopback=True).refuse("GET", {**far, "Authorization": f"Bearer {TOKEN}"}, public=False)
        is None
    )


def test_the_token_scheme_is_case_blind_and_the_value_exact() -> None:
    a = Access(TOKEN, loopback=False)
    h = {"Host": "10.0.0.5:8080"}
    for given in (f"bearer {TOKEN}", f"BEARER {TOKEN}", f"Bearer {TOKEN}  "):
        assert a.refuse("GET", {**h, "Authorization": given}, public=False) is None, given
    need = (401, "this page needs its token: send 'Authorization: Bearer <token>' (web.token_file)")
    for given in ("", TOKEN, f"Bearer {TOKEN}x", f"Bearer {TOKEN[:-1]}", f"Bearer{TOKEN}", f"Token {TOKEN}"):
        assert a.refuse("GET", {**h, "Authorization": given}, public=False) == need, given
    assert a.refuse("POST", {**h, WRITE_HEADER: "1"}, public=True) is None  # a static file: no token


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH"])
def test_every_method_but_get_and_head_is_a_write(method: str) -> None:
    a = Access(None, loopback=True)
    h = {"Host": "127.0.0.1:8080"}
    assert a.refuse(method, h, public=False) == (
        403,
        "a write needs the header 'X-Edge-Agent: 1' (cross-site requests are refused)",
    )
    assert a.refuse(method, {**h, "X-Edge-Agent": "true"}, public=False) is not None
    assert a.refuse(method, {**h, "X-Edge-Agent": "1"}, public=False) is None
    assert a.refuse("GET", h, public=False) is None and a.refuse("HEAD", h, public=False) is None


def test_the_origin_must_name_this_host_and_port() -> None:
    a = Access(None, loopback=True)
    h = {"Host": "127.0.0.1:8080", WRITE_HEADER: "1"}
    assert a.refuse("POST", {**h, "Origin": "https://127.0.0.1:8080"}, public=False) is None
    assert a.refuse("POST", {**h, "Origin": "http://127.0.0.1:9090"}, public=False) == (
        403,
        "Origin 'http://127.0.0.1:9090' is not this page (127.0.0.1:8080); cross-site writes are refused",
    )
    assert a.refuse("POST", {**h, "Origin": "null"}, public=False) is not None  # a sandboxed frame
    assert a.refuse("POST", {**h, "Origin": "http://x://127.0.0.1:8080"}, public=False) is not None
