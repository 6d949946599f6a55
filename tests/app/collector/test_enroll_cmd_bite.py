"""`edge-agent fleet enroll|revoke` in process (issue 36: test_enroll_cmd.py runs them as a child,
which earns no mutmut credit): the snippets printed whole, the settings a later run remembers,
the groups as stored, `--rotate` only for the names given, the warnings about a hand-edited
passwd, every refusal as its whole line, and `revoke` of each kind of identity."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import tomllib

from edge_agent.app.cli.main import main


def fleet(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = main(["fleet", *args])
    got = capsys.readouterr()
    return rc, got.out, got.err


def device(d: Path, name: str, state: str, port: int, prefix: str) -> str:
    return (
        f"# device {name}: its /etc/edge-agent/config.toml\n"
        f"# password ({state}): {d}/secrets/{name}.password -> /etc/edge-agent/mqtt-password (0600)\n"
        f'[device]\nid = "{name}"\n[mqtt]\n# host = the broker\'s address\nport = {port}\n'
        f'topic_prefix = "{prefix}"\nusername = "{name}"\npassword_file = "mqtt-password"\n'
        "role_usernames = true\n\n"
    )


def broker(d: Path, deploy: str) -> str:
    return (
        f"# broker: install {d}/passwd and {d}/acl (0640, group mosquitto) in {deploy},\n"
        f"# {d}/mosquitto.conf as /etc/mosquitto/conf.d/edge-agent.conf; restart mosquitto the first\n"
        f"# time, `systemctl reload mosquitto` after later runs. Never copy {d}/secrets to the broker.\n"
    )


def test_every_snippet_whole_and_the_settings_remembered_by_the_next_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = tmp_path / "e"
    rc, out, err = fleet(
        capsys,
        *("enroll", "cam-1", "--group", "shop", "--group", "bay", "--group", "shop"),
        *("--collector", "coll-1", "--operator", "ops", "--prefix", "site", "--port", "8883"),
        *("--bind", "10.0.0.2", "--deploy-dir", "/srv/mq", "--broker-dir", str(d)),
    )
    assert (rc, err) == (0, "")
    collector = (
        "# collector coll-1: its collector.toml\n"
        f"# password (new): {d}/secrets/coll-1.password -> /etc/edge-collector/mqtt-password (0600)\n"
        '[collector]\n# broker = "mqtt://<the broker>:8883"\nprefix = "site"\n'
        'client_id = "coll-1"\nusername = "coll-1"\npassword_file = "mqtt-password"\n\n'
    )
    operator = (
        "# operator ops: the config `edge-agent model push` reads\n"
        f"# password (new): {d}/secrets/ops.password -> /etc/edge-agent/mqtt-password (0600)\n"
        '[mqtt]\n# host = the broker\'s address\nport = 8883\ntopic_prefix = "site"\n'
        'username = "ops"\npassword_file = "mqtt-password"\nrole_usernames = true\n\n'
    )
    assert out == device(d, "cam-1", "new", 8883, "site") + collector + operator + broker(d, "/srv/mq")
    enrolled = json.loads((d / "enrolled.json").read_text())
    assert enrolled["devices"] == {"cam-1": {"groups": ["bay", "shop"]}}  # sorted, once each
    assert (enrolled["collectors"], enrolled["operators"]) == (["coll-1"], ["ops"])
    # the next run without the flags: the same prefix, port, listener address and deploy folder
    rc, out, err = fleet(capsys, "enroll", "cam-2", "--broker-dir", str(d))
    assert (rc, err) == (0, "")
    assert out == device(d, "cam-2", "new", 8883, "site") + broker(d, "/srv/mq")
    assert json.loads((d / "broker.json").read_text()) == {
        "prefix": "site",
        "port": 8883,
        "bind": "10.0.0.2",
        "deploy_dir": "/srv/mq",
    }
    assert "listener 8883 10.0.0.2\n" in (d / "mosquitto.conf").read_text()
    # a flag given again replaces the remembered value, the others stay
    rc, out, _ = fleet(capsys, "enroll", "cam-2", "--port", "1884", "--prefix", "p2", "--broker-dir", str(d))
    assert rc == 0 and out == device(d, "cam-2", "unchanged", 1884, "p2") + broker(d, "/srv/mq")
    rc, out, _ = fleet(
        capsys, "enroll", "cam-2", "--bind", "10.0.0.3", "--deploy-dir", "/x", "--broker-dir", str(d)
    )
    assert rc == 0 and out == device(d, "cam-2", "unchanged", 1884, "p2") + broker(d, "/x")
    assert "listener 1884 10.0.0.3\n" in (d / "mosquitto.conf").read_text()


def test_the_defaults_without_an_earlier_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = tmp_path / "e"
    rc, out, _ = fleet(capsys, "enroll", "cam-1", "--broker-dir", str(d))
    assert rc == 0 and out == device(d, "cam-1", "new", 1883, "edge") + broker(d, "/etc/mosquitto/edge-agent")
    assert "listener 1883\n" in (d / "mosquitto.conf").read_text()


def test_json_and_rotate_only_the_names_given(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = tmp_path / "e"
    assert fleet(capsys, "enroll", "cam-1", "cam-2", "--collector", "c1", "--broker-dir", str(d))[0] == 0
    before = {n: (d / "secrets" / f"{n}.password").read_text() for n in ("cam-1", "cam-2", "c1")}
    rc, out, err = fleet(
        capsys, "enroll", "cam-2", "--collector", "c1", "--rotate", "--json", "--broker-dir", str(d)
    )
    assert (rc, err) == (0, "")
    assert json.loads(out) == {
        "broker_dir": str(d),
        "enrolled": ["cam-2", "c1"],
        "new_passwords": ["c1", "cam-2"],
        "removed": [],
    }
    after = {n: (d / "secrets" / f"{n}.password").read_text() for n in ("cam-1", "cam-2", "c1")}
    assert after["cam-1"] == before["cam-1"]
    assert after["cam-2"] != before["cam-2"] and after["c1"] != before["c1"]
    rc, out, _ = fleet(capsys, "enroll", "cam-1", "--json", "--broker-dir", str(d))
    assert rc == 0 and json.loads(out)["new_passwords"] == []


def test_a_hand_edited_passwd_gets_its_two_warnings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = tmp_path / "e"
    assert fleet(capsys, "enroll", "cam-1", "cam-2", "--broker-dir", str(d))[0] == 0
    passwd = d / "passwd"
    lines = passwd.read_text().splitlines()
    other = next(ln for ln in lines if ln.startswith("cam-2:"))
    # cam-1's own line replaced by cam-2's hash, and a user added by hand
    lines = [other.replace("cam-2:", "cam-1:", 1) if ln.startswith("cam-1:") else ln for ln in lines]
    passwd.write_text("\n".join([*lines, other.replace("cam-2:", "visitor:", 1)]) + "\n")
    rc, out, err = fleet(capsys, "enroll", "cam-1", "--broker-dir", str(d))
    assert rc == 0 and "password (unchanged)" in out
    assert err == (
        "warning: passwd user 'visitor' is not enrolled here: kept (no ACL: no topic at all)\n"
        "warning: passwd line of 'cam-1' did not take its kept password: rewritten\n"
    )
    assert "visitor:" in passwd.read_text()


@pytest.mark.parametrize(
    ("first", "args", "line"),
    [
        ([], ["--group", "g"], "--group needs a DEVICE (groups are where devices take model pushes)"),
        ([], [], "nothing to enroll: name a DEVICE, a --collector or an --operator"),
        ([], ["a", "--operator", "b", "--collector", "b"], "'b' is named twice (one name, one identity)"),
        ([], ["cam-1", *[f"--group=g{i}" for i in range(33)]], "--group given 33 times, at most 32"),
        (["--collector", "c1"], ["c1"], "'c1' is already enrolled as a collector (revoke it first)"),
        (
            ["--operator", "o1"],
            ["--collector", "o1"],
            "'o1' is already enrolled as a operator (revoke it first)",
        ),
        (["cam-1"], ["--operator", "cam-1"], "'cam-1' is already enrolled as a device (revoke it first)"),
        (
            [],
            ["--collector", "c/1"],
            "--collector 'c/1': must not contain '/' (one topic level, no wildcards)",
        ),
        ([], ["--operator", "o+"], "--operator 'o+': must not contain '+' (one topic level, no wildcards)"),
    ],
)
def test_a_refused_enroll_is_its_whole_line_and_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], first: list[str], args: list[str], line: str
) -> None:
    d = str(tmp_path / "e")
    if first:
        assert fleet(capsys, "enroll", *first, "--broker-dir", d)[0] == 0
    before = (tmp_path / "e" / "enrolled.json").read_text() if first else None
    rc, out, err = fleet(capsys, "enroll", *args, "--broker-dir", d)
    assert (rc, out, err) == (1, "", f"edge-agent fleet: error: {line}\n")
    if before is None:
        assert not (tmp_path / "e").exists() or not (tmp_path / "e" / "passwd").exists()
    else:
        assert (tmp_path / "e" / "enrolled.json").read_text() == before


def test_32_groups_are_enough(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = tmp_path / "e"
    rc, _, err = fleet(
        capsys, "enroll", "cam-1", *[f"--group=g{i:02}" for i in range(32)], "--broker-dir", str(d)
    )
    assert (rc, err) == (0, "")
    assert json.loads((d / "enrolled.json").read_text())["devices"]["cam-1"]["groups"] == [
        f"g{i:02}" for i in range(32)
    ]


@pytest.mark.parametrize("kind", ["device", "collector", "operator"])
def test_revoke_names_the_kind_it_removed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    d = tmp_path / "e"
    assert (
        fleet(capsys, "enroll", "cam-1", "--collector", "c1", "--operator", "o1", "--broker-dir", str(d))[0]
        == 0
    )
    name = {"device": "cam-1", "collector": "c1", "operator": "o1"}[kind]
    rc, out, err = fleet(capsys, "revoke", name, "--broker-dir", str(d))
    assert (rc, err) == (0, "")
    assert out == (
        f"{name}: {kind} revoked; its broker users and password removed.\n"
        "Deploy passwd and acl and reload mosquitto (SIGHUP): the ACL applies to connected clients at once.\n"
    )
    enrolled = json.loads((d / "enrolled.json").read_text())
    left = {*enrolled["devices"], *enrolled["collectors"], *enrolled["operators"]}
    assert left == {"cam-1", "c1", "o1"} - {name}
    assert not (d / "secrets" / f"{name}.password").exists()
    assert f"\n{name}:" not in "\n" + (d / "passwd").read_text()
    other = "o1" if name != "o1" else "c1"
    rc, out, _ = fleet(capsys, "revoke", other, "--json", "--broker-dir", str(d))
    assert rc == 0 and json.loads(out) == {
        "broker_dir": str(d),
        "revoked": other,
        "kind": "operator" if other == "o1" else "collector",
        "new_passwords": [],
        "removed": [other],
    }


def test_a_refused_revoke_is_its_whole_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = tmp_path / "e"
    rc, out, err = fleet(capsys, "revoke", "cam-1", "--broker-dir", str(d))
    assert (rc, out) == (1, "")
    assert err == f"edge-agent fleet: error: --broker-dir {d}: no enrolled.json (nothing enrolled there)\n"
    assert fleet(capsys, "enroll", "cam-1", "--broker-dir", str(d))[0] == 0
    rc, _, err = fleet(capsys, "revoke", "cam/2", "--broker-dir", str(d))
    assert (rc, err) == (
        1,
        "edge-agent fleet: error: name 'cam/2': must not contain '/' (one topic level, no wildcards)\n",
    )
    rc, _, err = fleet(capsys, "revoke", "cam-2", "--broker-dir", str(d))
    assert (rc, err) == (1, f"edge-agent fleet: error: 'cam-2': not enrolled in {d} (nothing revoked)\n")


def test_a_refused_device_or_group_name_is_named_by_its_role(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = str(tmp_path / "e")
    rc, _, err = fleet(capsys, "enroll", "cam/1", "--broker-dir", d)
    tail = ": must not contain '/' (one topic level, no wildcards)\n"
    assert (rc, err) == (1, f"edge-agent fleet: error: device 'cam/1'{tail}")
    rc, _, err = fleet(capsys, "enroll", "cam-1", "--group", "a/b", "--broker-dir", d)
    assert (rc, err) == (1, f"edge-agent fleet: error: --group 'a/b'{tail}")


def test_enrolling_the_same_identities_again_is_idempotent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = tmp_path / "e"
    args = ["enroll", "cam-1", "--collector", "c1", "--operator", "o1", "--broker-dir", str(d)]
    assert fleet(capsys, *args)[0] == 0
    files = {n: (d / n).read_bytes() for n in ("passwd", "acl", "enrolled.json")}
    rc, out, err = fleet(capsys, *args)
    assert (rc, err) == (0, "") and "password (new)" not in out
    assert {n: (d / n).read_bytes() for n in files} == files


def test_a_non_ascii_prefix_is_written_raw_so_the_snippet_stays_toml(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """JSON's ASCII escapes of a character beyond the BMP are a surrogate pair, which TOML refuses."""
    prefix = "edge-\U0001f600\u00e9"
    rc, out, _ = fleet(
        capsys, "enroll", "--operator", "o1", "--prefix", prefix, "--broker-dir", str(tmp_path / "e")
    )
    assert rc == 0
    snippet = out.split("# operator o1: the config `edge-agent model push` reads\n")[1].split("\n\n")[0]
    assert tomllib.loads(snippet)["mqtt"]["topic_prefix"] == prefix


def test_broker_dir_is_required(capsys: pytest.CaptureFixture[str]) -> None:
    for cmd in (["enroll", "cam-1"], ["revoke", "cam-1"]):
        with pytest.raises(SystemExit) as exc:
            main(["fleet", *cmd])
        assert exc.value.code == 2
        err = capsys.readouterr().err.splitlines()[-1]
        assert err == f"edge-agent fleet {cmd[0]}: error: the following arguments are required: --broker-dir"


def test_help_shows_the_placeholders_and_what_enroll_writes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["fleet", "enroll", "-h"])
    text = capsys.readouterr().out
    listed = [ln.strip().split("  ")[0] for ln in text.splitlines() if ln.startswith("  -")]
    want = ["--group G", "--collector NAME", "--operator NAME", "--deploy-dir PATH", "--broker-dir DIR"]
    assert set(want) <= set(listed), listed
    assert "Writes, into '--broker-dir', mosquitto's 'passwd' and 'acl'" in " ".join(text.split())
