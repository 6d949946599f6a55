"""The enrollment directory's refusals and reports, as an operator meets them (issue 36: made for
the mutation run's survivors): files that are not what they claim, kept passwords read back, and
what a run says it did."""

from __future__ import annotations

import base64
import os
import re
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

import edge_agent.adapters.broker.broker_dir as bd
from edge_agent.adapters.broker.broker_dir import apply, load, load_settings, read_secret
from edge_agent.core.broker.files import BrokerSettings, parse_passwd, passwd_line, passwd_matches
from edge_agent.core.broker.identity import EnrollError, Enrollment

S = BrokerSettings(prefix="edge", port=1883)


def enroll(*devices: str) -> Callable[[Enrollment], None]:
    def fn(e: Enrollment) -> None:
        for d in devices:
            e.devices[d] = []

    return fn


def test_an_empty_directory_has_no_enrollment_no_settings_and_no_secrets(tmp_path: Path) -> None:
    assert load(tmp_path).names() == []
    assert load_settings(tmp_path) == BrokerSettings()
    assert read_secret(tmp_path, "cam-1") is None


def test_a_kept_password_is_read_stripped_and_a_blank_one_is_none(tmp_path: Path) -> None:
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "cam-1.password").write_text("  abc \n")
    (tmp_path / "secrets" / "cam-2.password").write_text(" \n")
    assert read_secret(tmp_path, "cam-1") == "abc"
    assert read_secret(tmp_path, "cam-2") is None


def test_a_blank_kept_password_gets_a_new_one_reported(tmp_path: Path) -> None:
    d = tmp_path / "d"
    apply(d, S, enroll("cam-1"))
    (d / "secrets" / "cam-1.password").write_text("\n")
    change = apply(d, S, lambda e: None)
    assert change.new_secrets == ["cam-1"]
    pw = read_secret(d, "cam-1")
    assert pw is not None and passwd_matches(parse_passwd((d / "passwd").read_text())["cam-1"], pw)


def test_a_first_run_reports_each_new_password_and_writes_it_with_a_newline(tmp_path: Path) -> None:
    d = tmp_path / "d"
    change = apply(d, S, enroll("cam-2", "cam-1"))
    assert change.new_secrets == ["cam-1", "cam-2"]
    assert change.removed == [] and change.foreign_users == [] and change.mismatched == []
    text = (d / "secrets" / "cam-1.password").read_text()
    assert re.fullmatch(r"[A-Za-z0-9_-]{32}\n", text)  # 24 random bytes, url-safe
    again = apply(d, S, lambda e: None)
    assert again.new_secrets == [] and again.mismatched == []


def test_rotating_reports_the_new_password_and_no_mismatch(tmp_path: Path) -> None:
    d = tmp_path / "d"
    apply(d, S, enroll("cam-1", "cam-2"))
    change = apply(d, S, lambda e: None, rotate=["cam-1"])
    assert change.new_secrets == ["cam-1"] and change.mismatched == []


def test_only_the_lines_that_lost_their_password_are_reported(tmp_path: Path) -> None:
    d = tmp_path / "d"
    apply(d, S, enroll("cam-1"))
    lines = parse_passwd((d / "passwd").read_text())
    lines["cam-1-model"] = passwd_line("cam-1-model", "other", b"s" * 12)
    (d / "passwd").write_text("".join(line + "\n" for line in lines.values()))
    change = apply(d, S, lambda e: None)
    assert change.mismatched == ["cam-1-model"]
    after = parse_passwd((d / "passwd").read_text())
    assert after["cam-1"] == lines["cam-1"]  # a matching line is kept byte for byte


def test_a_revoked_identitys_lines_are_not_kept_as_hand_added(tmp_path: Path) -> None:
    d = tmp_path / "d"
    apply(d, S, enroll("cam-1", "cam-2"))
    change = apply(d, S, lambda e: e.devices.pop("cam-2"))
    assert change.removed == ["cam-2"] and change.foreign_users == []
    assert not any(u.startswith("cam-2") for u in parse_passwd((d / "passwd").read_text()))


def test_the_lock_file_is_private(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        apply(tmp_path / "d", S, enroll("cam-1"))
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.lstat(tmp_path / "d" / ".lock").st_mode) == 0o600


def test_a_root_that_is_a_file_is_refused_naming_it(tmp_path: Path) -> None:
    (tmp_path / "d").write_text("x")
    with pytest.raises(EnrollError, match=re.escape(f"{tmp_path / 'd'}: not a directory")):
        apply(tmp_path / "d", S, enroll("cam-1"))


def test_a_registry_that_is_a_directory_is_refused_naming_it(tmp_path: Path) -> None:
    (tmp_path / "enrolled.json").mkdir()
    with pytest.raises(EnrollError, match=re.escape(f"{tmp_path / 'enrolled.json'}: not a regular file")):
        load(tmp_path)


def test_a_symlinked_password_is_refused_not_followed(tmp_path: Path) -> None:
    (tmp_path / "secrets").mkdir()
    (tmp_path / "elsewhere").write_text("stolen\n")
    (tmp_path / "secrets" / "cam-1.password").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(EnrollError, match=r"cam-1\.password: not a regular file"):
        read_secret(tmp_path, "cam-1")


def test_an_oversized_file_is_refused_with_its_size_and_the_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = BrokerSettings(prefix="site").to_json()
    (tmp_path / "broker.json").write_text(text)
    monkeypatch.setattr(bd, "MAX_FILE_BYTES", len(text))
    assert load_settings(tmp_path).prefix == "site"  # exactly the limit is read
    (tmp_path / "broker.json").write_text(text + " ")
    with pytest.raises(EnrollError) as size:
        load_settings(tmp_path)
    assert str(size.value) == f"{tmp_path / 'broker.json'}: {len(text) + 1} bytes, at most {len(text)}"


def test_a_registry_that_is_not_utf8_is_one_line_naming_it(tmp_path: Path) -> None:
    (tmp_path / "enrolled.json").write_bytes(b'{"version": 1, "devices": {"\xff": {}}}')
    with pytest.raises(EnrollError) as err:
        load(tmp_path)
    assert str(err.value) == f"{tmp_path / 'enrolled.json'}: not UTF-8 text"
    assert err.value.__suppress_context__


def test_the_identity_cap_counts_the_enrollment_after_the_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bd, "MAX_IDENTITIES", 2)
    d = tmp_path / "d"
    apply(d, S, enroll("a", "b"))
    with pytest.raises(EnrollError, match=r"^more than 2 identities in one enrollment$"):
        apply(d, S, enroll("c"))
    assert set(load(d).devices) == {"a", "b"}
    apply(d, S, lambda e: (e.devices.pop("a"), e.devices.update({"c": []})))  # swap: still 2
    assert set(load(d).devices) == {"b", "c"}


def test_each_passwd_line_has_its_own_salt_of_mosquittos_length(tmp_path: Path) -> None:
    """mosquitto_passwd writes 12-byte salts; one random salt per line (the three users of a device
    share a password, not a hash)."""
    apply(tmp_path / "d", S, enroll("cam-1"))
    lines = parse_passwd((tmp_path / "d" / "passwd").read_text())
    salts = [line.split("$")[3] for line in lines.values()]
    assert len(salts) == 3 and len(set(salts)) == 3
    assert all(len(base64.b64decode(s)) == 12 for s in salts)
