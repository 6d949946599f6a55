"""The pure side of broker identity: mosquitto's $7$ password lines, the ACL text, the names and the
registry read back from enrolled.json (outside data: every field bounded)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.mqtt import MOSQUITTO_PASSWD

from edge_agent.core.broker.files import (
    DEVICE_KINDS,
    BrokerSettings,
    acl_text,
    conf_text,
    parse_passwd,
    parse_settings,
    passwd_line,
    passwd_matches,
)
from edge_agent.core.broker.identity import (
    MAX_GROUPS,
    EnrollError,
    Enrollment,
    check_name,
    name_problem,
    parse_enrolled,
)
from edge_agent.core.messages.batch import batch_topic
from edge_agent.core.messages.builders import (
    CAMERA_KINDS,
    SENSOR_RESULTS,
    camera_base,
    object_topics,
    sensor_result_topic,
    topics,
)
from edge_agent.core.messages.fleet import DEVICE_RE

LINE_RE = re.compile(r"^[^:]+:\$7\$(\d+)\$([A-Za-z0-9+/=]+)\$([A-Za-z0-9+/=]+)\Z")


def test_our_line_has_mosquitto_passwds_shape(tmp_path: Path) -> None:
    if not MOSQUITTO_PASSWD.exists():
        pytest.skip("mosquitto_passwd not installed")
    f = tmp_path / "pw"
    subprocess.run([str(MOSQUITTO_PASSWD), "-c", "-b", str(f), "alice", "s3cret"], check=True)
    theirs = f.read_text().strip()
    ours = passwd_line("alice", "s3cret", b"0123456789ab")
    m_theirs, m_ours = LINE_RE.match(theirs), LINE_RE.match(ours)
    assert m_theirs and m_ours
    assert m_theirs.group(1) == m_ours.group(1) == "101"  # the same iterations
    assert len(m_theirs.group(2)) == len(m_ours.group(2)) == 16  # a 12-byte salt
    assert len(m_theirs.group(3)) == len(m_ours.group(3)) == 88  # a 64-byte SHA-512
    # and the hash is the same function: mosquitto_passwd's own line checks out here
    assert passwd_matches(theirs, "s3cret") and not passwd_matches(theirs, "s3cret ")


@settings(max_examples=40, deadline=None)
@given(
    pw=st.text(min_size=1, max_size=40),
    other=st.text(min_size=1, max_size=40),
    salt=st.binary(min_size=12, max_size=12),
)
def test_a_line_takes_its_password_and_no_other(pw: str, other: str, salt: bytes) -> None:
    pw, other = (p.encode("utf-8", "replace").decode("utf-8", "replace") for p in (pw, other))
    line = passwd_line("u", pw, salt)
    assert passwd_matches(line, pw)
    assert passwd_matches(line, other) == (other == pw)


@pytest.mark.parametrize(
    "line",
    ["u", "u:$6$abc", "u:$7$0$AAAA$AAAA", "u:$7$x$AAAA$AAAA", "u:$7$101$!!$AAAA", "u:$7$99999999999$AA$AA"],
)
def test_a_malformed_line_never_matches(line: str) -> None:
    assert not passwd_matches(line, "x")


def test_parse_passwd_refuses_what_mosquitto_would() -> None:
    good = passwd_line("a", "p", b"x" * 12)
    assert parse_passwd(f"{good}\n\n") == {"a": good}
    with pytest.raises(EnrollError, match="line 2: user 'a' is there twice"):
        parse_passwd(f"{good}\n{good}\n")
    with pytest.raises(EnrollError, match="line 1: not 'user:\\$7\\$"):
        parse_passwd("a:plaintext\n")


def test_device_kinds_cover_every_topic_the_agent_publishes() -> None:
    # a kind missing from the ACL is acknowledged by mosquitto and dropped: results lost
    t = topics("edge", "d")
    built = [t.detections, t.status, t.sensors, *object_topics("edge", "d"), batch_topic("edge", "d")]
    assert sorted(x.split("/")[-1] for x in built) == sorted(DEVICE_KINDS)


def test_a_named_camera_publishes_only_where_the_acl_lets_it() -> None:
    # [[cameras]]: every topic a camera's messages go to matches one of the device's write lines,
    # and no status, batch or confirm one level deeper does
    acl = acl_of(acl_text(Enrollment({"d": []}), "edge"))["d"]
    deeper = {line.split(" ", 1)[1] for line in acl if line.count("/") == 3}
    assert deeper == {f"edge/d/+/{k}" for k in (*CAMERA_KINDS, SENSOR_RESULTS)}
    base = camera_base("edge", "d", "gate")
    built = [
        *object_topics("edge", "d", "gate"),
        f"{base}/detections",
        sensor_result_topic("edge", "d", "gate"),
    ]
    assert sorted(t.replace("/gate/", "/+/") for t in built) == sorted(deeper)
    assert all(line.startswith("write ") for line in acl if line.count("/") == 3)


def acl_of(text: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    user = ""
    for line in text.splitlines():
        if line.startswith("user "):
            user = line[5:]
            out[user] = []
        elif line.startswith("topic "):
            assert user, f"a topic line before any user gives anonymous access: {line}"
            out[user].append(line[6:])
    return out


def test_acl_grants_each_identity_its_own_topics_only() -> None:
    e = Enrollment({"cam-1": ["g1", "g2"]}, ["coll"], ["ops"])
    acl = acl_of(acl_text(e, "/site/"))
    assert acl["cam-1"] == [
        *(f"write site/cam-1/{k}" for k in DEVICE_KINDS),
        *(f"write site/cam-1/+/{k}" for k in CAMERA_KINDS),
        f"write site/cam-1/+/{SENSOR_RESULTS}",
        "read site/cam-1/confirm",
    ]
    assert acl["cam-1-model"] == [
        "read site/cam-1/model/#",
        "read site/groups/g1/model/#",
        "read site/groups/g2/model/#",
    ]
    assert acl["cam-1-doctor"] == ["deny site/#"]
    assert acl["coll"] == [
        "read site/+/+",
        *(f"read site/+/+/{k}" for k in (*CAMERA_KINDS, SENSOR_RESULTS)),
        "write site/+/confirm",
    ]
    assert acl["ops"] == ["write site/+/model/#", "write site/groups/+/model/#"]
    assert acl["ops-watch"] == ["read site/+/status"]
    assert set(acl) == {"cam-1", "cam-1-model", "cam-1-doctor", "coll", "ops", "ops-watch"}


@pytest.mark.parametrize(
    "e, clash",
    [
        (Enrollment({"cam": [], "cam-model": []}), "'cam-model' is already the user of device cam"),
        (Enrollment({"cam": []}, ["cam-doctor"]), "collector cam-doctor: its broker user 'cam-doctor'"),
        (Enrollment({}, ["ops-watch"], ["ops"]), "operator ops: its broker user 'ops-watch'"),
    ],
)
def test_two_identities_never_share_a_broker_user(e: Enrollment, clash: str) -> None:
    with pytest.raises(EnrollError, match=re.escape(clash)):
        acl_text(e, "edge")


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=80))
def test_a_name_is_a_device_id_or_refused_in_one_line(name: str) -> None:
    problem = name_problem(name)
    if problem is None:
        assert DEVICE_RE.match(name) and name != "groups"
        assert check_name(name, "device") == name
    else:
        with pytest.raises(EnrollError) as err:
            check_name(name, "device")
        assert "\n" not in str(err.value) and len(str(err.value)) < 400


def test_groups_is_reserved_and_non_strings_are_refused() -> None:
    with pytest.raises(EnrollError, match="reserved"):
        check_name("groups", "device")
    with pytest.raises(EnrollError, match="expected a string, got int"):
        check_name(7, "device")


def test_enrolled_json_round_trips_in_the_shape_the_collector_reads() -> None:
    e = Enrollment({"b": ["g"], "a": []}, ["c2", "c1"], ["o"])
    doc = json.loads(e.to_json())
    assert doc == {
        "version": 1,
        "devices": {"a": {"groups": []}, "b": {"groups": ["g"]}},
        "collectors": ["c1", "c2"],
        "operators": ["o"],
    }
    back = parse_enrolled(e.to_json())
    assert back.devices == {"a": [], "b": ["g"]} and back.collectors == ["c1", "c2"]


@pytest.mark.parametrize(
    "doc, error",
    [
        ("[]", "expected an object"),
        ("{", "not JSON"),
        ('{"version": 2}', "version '2', expected 1"),
        ('{"version": 1, "devices": []}', "devices must be an object"),
        ('{"version": 1, "devices": {"a/b": {}}}', "must not contain '/'"),
        ('{"version": 1, "devices": {"a": {"groups": "g"}}}', "groups must be a list"),
        ('{"version": 1, "devices": {"a": {"groups": ["+"]}}}', "wildcards"),
        (
            json.dumps(
                {"version": 1, "devices": {"a": {"groups": [f"g{i}" for i in range(MAX_GROUPS + 1)]}}}
            ),
            "at most 32",
        ),
        ('{"version": 1, "collectors": "c"}', "collectors: expected a list"),
        ('{"version": 1, "devices": {"x": {}, "x-model": {}}}', "already the user of device x"),
        ('{"version": 1, "operators": ["a\\u0000"]}', "NUL"),
    ],
)
def test_a_bad_enrolled_json_is_refused_naming_the_field(doc: str, error: str) -> None:
    with pytest.raises(EnrollError, match=re.escape(error)):
        parse_enrolled(doc)


def test_settings_are_bounded_and_round_trip() -> None:
    s = BrokerSettings(prefix="site", port=8883, bind="127.0.0.1", deploy_dir="/etc/m")
    assert parse_settings(s.to_json()) == s
    assert "listener 8883 127.0.0.1" in s.conf() and "password_file /etc/m/passwd" in s.conf()
    for bad, msg in [
        ({"port": 0}, "port '0'"),
        ({"port": True}, "port"),
        ({"prefix": "a/#"}, "wildcard"),
        ({"bind": "a b"}, "bind"),
        ({"deploy_dir": "rel/dir"}, "absolute path"),
        ({"deploy_dir": "/a b"}, "absolute path"),
    ]:
        with pytest.raises(EnrollError, match=re.escape(msg)):
            BrokerSettings(**bad)  # type: ignore[arg-type]
    with pytest.raises(EnrollError, match=re.escape("broker.json")):
        parse_settings('{"prefix": "x", "evil": 1}')


def test_the_snippet_turns_identity_on() -> None:
    lines = conf_text("/etc/mosquitto/edge-agent/", 1883).splitlines()
    assert "allow_anonymous false" in lines
    assert "password_file /etc/mosquitto/edge-agent/passwd" in lines
    assert "acl_file /etc/mosquitto/edge-agent/acl" in lines
    # a listener option: it must come after the listener line it belongs to
    assert lines.index("use_username_as_clientid true") > lines.index("listener 1883")
    assert "max_queued_messages 0" not in lines  # see MAX_QUEUED: 0 drops denied publishers
    assert any("confirmations" in x for x in lines)  # the end-to-end helper's marked place
