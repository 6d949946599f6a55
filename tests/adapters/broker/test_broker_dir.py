"""The enrollment directory: modes, atomic rewrites, idempotence, kept entries, revocation, and a
run interrupted anywhere healed by the next one."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pytest

from edge_agent.adapters.broker.broker_dir import apply, load, load_settings, read_secret
from edge_agent.core.broker.files import BrokerSettings, parse_passwd, passwd_line, passwd_matches
from edge_agent.core.broker.identity import EnrollError, Enrollment

S = BrokerSettings(prefix="edge", port=1883, deploy_dir="/etc/mosquitto/edge-agent")


def add(
    root: Path,
    *devices: str,
    groups: tuple[str, ...] = (),
    collectors: tuple[str, ...] = (),
    rotate: tuple[str, ...] = (),
) -> None:
    def fn(e: Enrollment) -> None:
        for d in devices:
            e.devices[d] = list(groups)
        e.collectors = sorted(set(e.collectors) | set(collectors))

    apply(root, S, fn, rotate=rotate)


def mode(p: Path) -> int:
    return stat.S_IMODE(os.lstat(p).st_mode)


def test_modes_are_tight_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        add(tmp_path / "d", "cam-1", collectors=("coll",))
    finally:
        os.umask(old)
    d = tmp_path / "d"
    assert mode(d) == 0o750 and mode(d / "secrets") == 0o700
    assert mode(d / "secrets" / "cam-1.password") == 0o600
    for f in ("passwd", "acl", "mosquitto.conf", "enrolled.json", "broker.json"):
        assert mode(d / f) == 0o640, f


def test_rerunning_keeps_passwords_and_bytes(tmp_path: Path) -> None:
    d = tmp_path / "d"
    add(d, "cam-1")
    before = {f: (d / f).read_bytes() for f in ("passwd", "acl", "enrolled.json")}
    pw = read_secret(d, "cam-1")
    add(d, "cam-1")
    assert {f: (d / f).read_bytes() for f in before} == before  # idempotent, byte for byte
    add(d, "cam-2", collectors=("coll",))  # another identity: cam-1 is untouched
    assert read_secret(d, "cam-1") == pw
    lines = parse_passwd((d / "passwd").read_text())
    assert {u: lines[u] for u in ("cam-1", "cam-1-model", "cam-1-doctor")} == {
        u: line for u, line in parse_passwd(before["passwd"].decode()).items()
    }
    assert set(load(d).devices) == {"cam-1", "cam-2"} and load(d).collectors == ["coll"]
    # the three users of a device share its one password
    pw2 = read_secret(d, "cam-2")
    assert pw2 and pw2 != pw
    assert all(passwd_matches(lines[u], pw2) for u in ("cam-2", "cam-2-model", "cam-2-doctor"))


def test_rotate_makes_a_new_password_for_that_identity_only(tmp_path: Path) -> None:
    d = tmp_path / "d"
    add(d, "cam-1", "cam-2")
    one, two = read_secret(d, "cam-1"), read_secret(d, "cam-2")
    add(d, "cam-1", rotate=("cam-1",))
    assert read_secret(d, "cam-1") != one and read_secret(d, "cam-2") == two
    lines = parse_passwd((d / "passwd").read_text())
    new = read_secret(d, "cam-1")
    assert new is not None and one is not None
    assert passwd_matches(lines["cam-1-model"], new) and not passwd_matches(lines["cam-1-model"], one)


def test_a_hand_added_user_is_kept_and_a_revoked_one_removed(tmp_path: Path) -> None:
    d = tmp_path / "d"
    add(d, "cam-1", "cam-2")
    admin = passwd_line("admin", "x", b"s" * 12)
    with open(d / "passwd", "a") as f:
        f.write(admin + "\n")
    change = apply(d, S, lambda e: e.devices.pop("cam-1"))
    lines = parse_passwd((d / "passwd").read_text())
    assert lines["admin"] == admin and change.foreign_users == ["admin"]
    assert not {"cam-1", "cam-1-model", "cam-1-doctor"} & set(lines)
    assert "cam-1" not in (d / "acl").read_text()
    assert not (d / "secrets" / "cam-1.password").exists() and change.removed == ["cam-1"]
    assert "user cam-2" in (d / "acl").read_text()


def test_a_lost_passwd_is_rebuilt_from_the_kept_passwords(tmp_path: Path) -> None:
    d = tmp_path / "d"
    add(d, "cam-1")
    pw = read_secret(d, "cam-1")
    (d / "passwd").unlink()
    (d / "acl").unlink()
    add(d, "cam-9")
    lines = parse_passwd((d / "passwd").read_text())
    assert pw is not None and passwd_matches(lines["cam-1"], pw)
    assert "user cam-1\n" in (d / "acl").read_text()


def test_a_passwd_line_that_lost_its_password_is_rewritten(tmp_path: Path) -> None:
    d = tmp_path / "d"
    add(d, "cam-1")
    pw = read_secret(d, "cam-1")
    (d / "passwd").write_text(passwd_line("cam-1", "other", b"s" * 12) + "\n")
    change = apply(d, S, lambda e: None)
    assert "cam-1" in change.mismatched
    assert pw is not None and passwd_matches(parse_passwd((d / "passwd").read_text())["cam-1"], pw)


def test_settings_are_remembered(tmp_path: Path) -> None:
    d = tmp_path / "d"
    apply(d, BrokerSettings(prefix="site", port=8883), lambda e: e.devices.update({"a": []}))
    assert load_settings(d) == BrokerSettings(prefix="site", port=8883)
    assert load_settings(tmp_path / "none") == BrokerSettings()


def test_a_refused_change_writes_nothing(tmp_path: Path) -> None:
    d = tmp_path / "d"
    add(d, "cam")
    before = (d / "passwd").read_bytes()
    with pytest.raises(EnrollError, match="already the user of device cam"):
        add(d, "cam-model")
    assert (d / "passwd").read_bytes() == before and set(load(d).devices) == {"cam"}


def test_a_symlinked_secrets_dir_is_refused(tmp_path: Path) -> None:
    d = tmp_path / "d"
    d.mkdir()
    (tmp_path / "elsewhere").mkdir()
    (d / "secrets").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(EnrollError, match="not a directory"):
        add(d, "cam-1")
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_a_broken_registry_is_refused_not_overwritten(tmp_path: Path) -> None:
    d = tmp_path / "d"
    add(d, "cam-1")
    (d / "enrolled.json").write_text('{"version": 1, "devices": {"a b": {}}}')
    with pytest.raises(EnrollError, match=re.escape("enrolled.json: device 'a b'")):
        add(d, "cam-2")
    assert (d / "enrolled.json").read_text() == '{"version": 1, "devices": {"a b": {}}}'


@pytest.mark.parametrize("cut_at", ["passwd", "acl", "enrolled.json"])
def test_a_revoke_cut_short_still_kills_the_old_password(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cut_at: str
) -> None:
    import edge_agent.adapters.broker.broker_dir as bd

    d = tmp_path / "d"
    add(d, "cam-1", "cam-2")
    stolen = read_secret(d, "cam-1")
    real = bd.write_durable

    def cut(path: Path, data: bytes, mode: int = 0o640) -> None:
        if path.name == cut_at:
            raise OSError(28, "No space left on device")  # the power cut, as far as the files go
        real(path, data, mode)

    monkeypatch.setattr(bd, "write_durable", cut)
    with pytest.raises(OSError):
        apply(d, S, lambda e: e.devices.pop("cam-1"))
    monkeypatch.setattr(bd, "write_durable", real)
    add(d, "cam-3")  # any later run, not the revoke again
    lines = parse_passwd((d / "passwd").read_text())
    assert stolen is not None
    assert not any(passwd_matches(line, stolen) for line in lines.values())


def test_the_number_of_identities_is_capped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import edge_agent.adapters.broker.broker_dir as bd

    monkeypatch.setattr(bd, "MAX_IDENTITIES", 3)
    add(tmp_path / "d", "a", "b", "c")
    with pytest.raises(EnrollError, match="more than 3 identities"):
        add(tmp_path / "d", "e")
