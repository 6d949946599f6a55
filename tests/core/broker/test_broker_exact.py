"""The broker files' exact text and every refusal's exact wording, field by field: what a mutation
run of files.py / identity.py found unchecked by the shape tests in test_broker_text.py (a wrong
iteration bound, a dropped directive, a swapped message would all have passed there)."""

from __future__ import annotations

import base64
import hashlib
import json

import pytest

from edge_agent.core.broker import files, identity
from edge_agent.core.broker.files import (
    BrokerSettings,
    acl_text,
    conf_text,
    parse_passwd,
    parse_settings,
    passwd_line,
    passwd_matches,
    passwd_text,
)
from edge_agent.core.broker.identity import (
    MAX_GROUPS,
    EnrollError,
    Enrollment,
    check_name,
    name_problem,
    parse_enrolled,
)
from edge_agent.core.messages.mqtt_names import topic_level_problem, topic_prefix_problem

SALT = b"0123456789ab"


def _b64(b: bytes) -> str:
    return base64.b64encode(b).decode()


def _pbkdf2(pw: str, salt: bytes, n: int) -> bytes:
    return hashlib.pbkdf2_hmac("sha512", pw.encode("utf-8"), salt, n)


def test_passwd_line_is_exactly_mosquittos_format() -> None:
    want = f"alice:$7$101${_b64(SALT)}${_b64(_pbkdf2('pw', SALT, 101))}"
    assert passwd_line("alice", "pw", SALT) == want
    assert passwd_line("alice", "pw", SALT, 7) == f"alice:$7$7${_b64(SALT)}${_b64(_pbkdf2('pw', SALT, 7))}"
    # non-ASCII passwords are hashed as UTF-8, as mosquitto_passwd does
    assert passwd_line("u", "é", SALT).endswith(_b64(_pbkdf2("é", SALT, 101)))


def _line(salt: str = _b64(SALT), digest: str = "", n: str = "101", kind: str = "7", lead: str = "") -> str:
    digest = digest or _b64(_pbkdf2("pw", SALT, int(n) if n.isdigit() else 101))
    return f"u:{lead}${kind}${n}${salt}${digest}"


def test_passwd_matches_accepts_exactly_the_right_line() -> None:
    assert passwd_matches(_line(), "pw")
    assert passwd_matches(_line() + "\n", "pw") and passwd_matches(_line() + "\r\n", "pw")
    assert passwd_matches(_line(n="1"), "pw")  # the lowest iteration count
    # the user part is not checked here (the file is keyed by user): any user's line is its own
    assert passwd_matches("other" + _line()[1:], "pw")
    assert not passwd_matches(_line(), "pw ") and not passwd_matches(_line(), "Pw")


@pytest.mark.parametrize(
    "line",
    [
        _line(lead="x"),  # something before the first '$'
        _line(kind="6"),  # SHA-512 crypt: not checked here
        _line(kind="8"),
        _line(kind="77"),
        _line(n="102", digest=_b64(_pbkdf2("pw", SALT, 101))),  # the hash was made with 101
        _line(n="0", digest=_b64(_pbkdf2("pw", SALT, 1))),
        _line(n="-1", digest=_b64(_pbkdf2("pw", SALT, 1))),
        _line(salt=_b64(b"0123456789ac")),  # another salt
        _line(salt=_b64(SALT)[:8] + "!" + _b64(SALT)[8:]),  # not base64: refused, not skipped
        _line(digest=_b64(_pbkdf2("pw", SALT, 101))[:8] + "!" + _b64(_pbkdf2("pw", SALT, 101))[8:]),
        _line(digest=_b64(_pbkdf2("pw", SALT, 101)[:-1] + b"\0")),  # the last byte differs
        _line(digest=_b64(_pbkdf2("pw", SALT, 101)[:32])),  # a truncated hash
        _line() + "$",  # a sixth field
        _line().replace("$", ":", 1),
        "u" + _line()[2:],  # no ':'
    ],
)
def test_passwd_matches_refuses_every_other_line(line: str) -> None:
    assert not passwd_matches(line, "pw")


def test_passwd_matches_bounds_the_iterations(monkeypatch: pytest.MonkeyPatch) -> None:
    # a hostile line must not make the checker spin: the bound is inclusive
    monkeypatch.setattr(files, "MAX_ITERATIONS", 5)
    assert passwd_matches(_line(n="5"), "pw")
    assert not passwd_matches(_line(n="6"), "pw")


def test_parse_passwd_exact_lines_and_errors() -> None:
    a, b6 = passwd_line("a", "p", SALT), "b:$6$salt$hash"
    assert parse_passwd(f"  {a}  \n\t\n{b6}") == {"a": a, "b": b6}
    assert parse_passwd("") == {}
    edge = "u:$7$" + "x" * (255 - 5)
    assert parse_passwd(edge) == {"u": edge}  # 255 characters: mosquitto's own line limit
    for text, n in [(edge + "x", 1), ("\n\n:$7$x", 3), ("a$7$x", 1), ("a:", 1), ("a:$5$x", 1), ("a:7$x", 1)]:
        with pytest.raises(EnrollError) as err:
            parse_passwd(text)
        assert str(err.value) == f"passwd line {n}: not 'user:$7$...' (is this a mosquitto password file?)"
    with pytest.raises(EnrollError) as err:
        parse_passwd(f"{'u' * 90}:$7$x\n\n{'u' * 90}:$6$y")
    assert str(err.value) == f"passwd line 3: user {'u' * 80!r} is there twice"
    assert passwd_text({"b": "b:x", "a": "a:y"}) == "a:y\nb:x\n"


ACL_GOLDEN = """\
# written by `edge-agent fleet enroll`; edit enrolled.json through it, not this file
# (docs/collector.md, 'Broker identity'). No line before the first 'user': anonymous gets nothing.

user a
topic write s/a/detections
topic write s/a/status
topic write s/a/sensors
topic write s/a/objects
topic write s/a/counts
topic write s/a/batch.zlib
topic write s/a/+/detections
topic write s/a/+/objects
topic write s/a/+/counts
topic write s/a/+/sensor_results
topic read s/a/confirm

user a-model
topic read s/a/model/#

user a-doctor
topic deny s/#

user b
topic write s/b/detections
topic write s/b/status
topic write s/b/sensors
topic write s/b/objects
topic write s/b/counts
topic write s/b/batch.zlib
topic write s/b/+/detections
topic write s/b/+/objects
topic write s/b/+/counts
topic write s/b/+/sensor_results
topic read s/b/confirm

user b-model
topic read s/b/model/#
topic read s/groups/g2/model/#
topic read s/groups/g1/model/#

user b-doctor
topic deny s/#

user c1
topic read s/+/+
topic read s/+/+/detections
topic read s/+/+/objects
topic read s/+/+/counts
topic read s/+/+/sensor_results
topic write s/+/confirm

user c2
topic read s/+/+
topic read s/+/+/detections
topic read s/+/+/objects
topic read s/+/+/counts
topic read s/+/+/sensor_results
topic write s/+/confirm

user o1
topic write s/+/model/#
topic write s/groups/+/model/#

user o1-watch
topic read s/+/status

user o2
topic write s/+/model/#
topic write s/groups/+/model/#

user o2-watch
topic read s/+/status
"""


def test_acl_text_is_exactly_the_golden_file() -> None:
    e = Enrollment({"b": ["g2", "g1"], "a": []}, ["c2", "c1"], ["o2", "o1"])
    assert acl_text(e, "//s/") == ACL_GOLDEN
    assert acl_text(Enrollment(), "s") == "\n".join(ACL_GOLDEN.splitlines()[:2]) + "\n"


CONF_GOLDEN = """\
# written by `edge-agent fleet enroll` (docs/collector.md, 'Broker identity (required)')
per_listener_settings false
allow_anonymous false
password_file /etc/m/passwd
acl_file /etc/m/acl
# the collector's queue while it is away (the default 1000 drops the rest). Not 0
# (unlimited): mosquitto 2.0.11 then closes a client's connection after the PUBACK
# of a publish the ACL denied
max_queued_messages 10000000
message_size_limit 16842752
# ---- persistence: Debian's /etc/mosquitto/mosquitto.conf already sets
# ---- 'persistence true' and 'persistence_location' (a second location is an error);
# ---- a broker without it needs both. Lower autosave_interval to shrink what a broker
# ---- kill -9 loses (docs/collector.md, 'The delivery guarantee').
# autosave_interval 60
# ---- end-to-end confirmations need no setting here: the collector publishes
# ---- <prefix>/<device>/confirm retained (the acl above lets only it), and devices with
# ---- [mqtt] confirm = "collector" resend whatever this broker dropped or lost
listener 1883
# the broker replaces every client id by the user name: no one takes another's session
use_username_as_clientid true
"""


def test_conf_text_is_exactly_the_golden_snippet() -> None:
    assert conf_text("/etc/m//", 1883) == CONF_GOLDEN
    assert conf_text("/etc/m", 1883, "") == CONF_GOLDEN  # an empty bind is every address
    bound = CONF_GOLDEN.replace("listener 1883\n", "listener 8883 10.0.0.1\n")
    assert conf_text("/etc/m", 8883, "10.0.0.1") == bound
    assert BrokerSettings(port=8883, bind="10.0.0.1", deploy_dir="/etc/m").conf() == bound
    root = conf_text("/", 1883)  # the root directory: still an absolute path mosquitto opens
    assert "password_file //passwd\n" in root and "acl_file //acl\n" in root


def test_settings_bounds_at_their_edges() -> None:
    for ok in [
        BrokerSettings(port=1),
        BrokerSettings(port=65535),
        BrokerSettings(bind="h" * 253),
        BrokerSettings(bind="fe80::1"),
        BrokerSettings(bind="a.b_c-d"),
        BrokerSettings(deploy_dir="/"),
        BrokerSettings(deploy_dir="/" + "d" * 1023),
        BrokerSettings(deploy_dir="/a.b_c/+@-"),
    ]:
        assert isinstance(ok, BrokerSettings)
    long = "x" * 100
    for bad, msg in [
        ({"port": 0}, "port '0': expected 1-65535"),
        ({"port": 65536}, "port '65536': expected 1-65535"),
        ({"port": -1}, "port '-1': expected 1-65535"),
        ({"port": True}, "port 'True': expected 1-65535"),
        ({"port": "1883"}, "port '1883': expected 1-65535"),
        ({"port": 10**30}, f"port {str(10**30)[:20]!r}: expected 1-65535"),
        ({"bind": "h" * 254}, f"bind {'h' * 80!r}: expected a host name or an IP address"),
        ({"bind": ""}, "bind '': expected a host name or an IP address"),
        ({"bind": "a\n"}, "bind 'a\\n': expected a host name or an IP address"),
        ({"bind": long + " "}, f"bind {'x' * 80!r}: expected a host name or an IP address"),
        ({"prefix": "a/#"}, f"prefix 'a/#': {topic_prefix_problem('a/#')}"),
        ({"prefix": long + "#"}, f"prefix {long[:80]!r}: {topic_prefix_problem(long + '#')}"),
        (
            {"deploy_dir": "/" + "d" * 1024},
            f"deploy dir {('/' + 'd' * 79)!r}: expected an absolute path without spaces or control characters",
        ),
        (
            {"deploy_dir": "/a\n"},
            "deploy dir '/a\\n': expected an absolute path without spaces or control characters",
        ),
        ({"deploy_dir": ""}, "deploy dir '': expected an absolute path without spaces or control characters"),
    ]:
        with pytest.raises(EnrollError) as err:
            BrokerSettings(**bad)  # type: ignore[arg-type]
        assert str(err.value) == msg


def test_settings_json_is_exact_and_parsed_strictly() -> None:
    s = BrokerSettings(prefix="site", port=8883, bind=None, deploy_dir="/etc/m")
    assert (
        s.to_json()
        == '{\n  "prefix": "site",\n  "port": 8883,\n  "bind": null,\n  "deploy_dir": "/etc/m"\n}\n'
    )
    assert parse_settings("{}") == BrokerSettings()
    assert parse_settings('{"port": 1884}') == BrokerSettings(port=1884)
    shape = "broker.json: expected an object with prefix, port, bind, deploy_dir"
    for text, msg in [
        ("[]", shape),
        ('"x"', shape),
        ('{"prefix": "x", "evil": 1}', shape),
        ('{"port": 0}', "port '0': expected 1-65535"),
    ]:
        with pytest.raises(EnrollError) as err:
            parse_settings(text)
        assert str(err.value) == msg
    with pytest.raises(EnrollError) as err:
        parse_settings("{")
    assert str(err.value).startswith("broker.json: not JSON (Expecting")
    # a value of the wrong type reaches the regex as a TypeError: still one EnrollError line
    for text in ['{"bind": 5}', '{"deploy_dir": 5}']:
        with pytest.raises(EnrollError) as err:
            parse_settings(text)
        assert str(err.value).startswith("broker.json: expected string") and err.value.__cause__ is None


def test_name_problem_names_each_rule() -> None:
    assert name_problem("cam-1.A_z") is None and name_problem("x" * 64) is None
    assert name_problem("x" * 65) == "expected 1-64 of A-Za-z0-9_.-"
    assert name_problem("a b") == "expected 1-64 of A-Za-z0-9_.-"
    assert name_problem("groups") == "'groups' is reserved (the topic level of group model pushes)"
    assert name_problem("a/b") == topic_level_problem("a/b")
    with pytest.raises(EnrollError) as err:
        check_name("y" * 90 + "/", "device")
    assert str(err.value) == f"device {'y' * 80!r}: {topic_level_problem('/')}"


def test_users_maps_every_user_to_its_identity() -> None:
    e = Enrollment({"cam": []}, ["coll", "coll"], ["op"])
    assert e.users() == {
        "cam": "device cam",
        "cam-model": "device cam",
        "cam-doctor": "device cam",
        "coll": "collector coll",  # listed twice: the same owner, no clash
        "op": "operator op",
        "op-watch": "operator op",
    }
    with pytest.raises(EnrollError) as err:
        Enrollment({"cam": []}, ["cam"]).users()
    assert str(err.value) == (
        "collector cam: its broker user 'cam' is already the user of device cam "
        "(every connection has a user name of its own; choose another name)"
    )


def test_enrollment_json_is_exact() -> None:
    e = Enrollment({"b": ["g2", "g1"], "a": []}, ["c"], [])
    assert e.to_json() == (
        '{\n  "version": 1,\n  "devices": {\n    "a": {\n      "groups": []\n    },\n'
        '    "b": {\n      "groups": [\n        "g2",\n        "g1"\n      ]\n    }\n  },\n'
        '  "collectors": [\n    "c"\n  ],\n  "operators": []\n}\n'
    )


def test_parse_enrolled_accepts_exactly_this_shape() -> None:
    doc = {"version": 1, "devices": {"b": {"groups": ["g2", "g1", "g2"]}, "a": {}}, "collectors": ["c", "c"]}
    assert parse_enrolled(json.dumps(doc)) == Enrollment({"b": ["g1", "g2"], "a": []}, ["c"], [])
    assert parse_enrolled('{"version": 1}') == Enrollment()
    assert parse_enrolled('{"version": 1, "operators": ["o2", "o1"]}').operators == ["o1", "o2"]
    groups = [f"g{i}" for i in range(MAX_GROUPS)]
    assert parse_enrolled(json.dumps({"version": 1, "devices": {"a": {"groups": groups}}})).devices == {
        "a": sorted(groups)
    }


@pytest.mark.parametrize(
    "doc, error",
    [
        ("[]", "enrolled.json: expected an object"),
        ("{}", "enrolled.json: version 'None', expected 1"),
        ('{"version": "1"}', "enrolled.json: version '1', expected 1"),
        (
            '{"version": 1, "devices": []}',
            "enrolled.json: devices must be an object of at most 100000 entries",
        ),
        (
            '{"version": 1, "devices": {"a": []}}',
            "enrolled.json: device 'a': groups must be a list of at most 32",
        ),
        (
            '{"version": 1, "devices": {"a": {"groups": {}}}}',
            "enrolled.json: device 'a': groups must be a list of at most 32",
        ),
        (
            '{"version": 1, "devices": {"a": {"groups": [1]}}}',
            "enrolled.json: device 'a' groups[0]: expected a string, got int",
        ),
        (
            '{"version": 1, "devices": {"groups": {}}}',
            "enrolled.json: device 'groups': 'groups' is reserved (the topic level of group model pushes)",
        ),
        ('{"version": 1, "collectors": "c"}', "enrolled.json: collectors: expected a list, got str"),
        (
            '{"version": 1, "operators": ["a", "b/"]}',
            f"enrolled.json: operators[1] 'b/': {topic_level_problem('/')}",
        ),
    ],
)
def test_parse_enrolled_error_texts_are_exact(doc: str, error: str) -> None:
    with pytest.raises(EnrollError) as err:
        parse_enrolled(doc)
    assert str(err.value) == error


def test_parse_enrolled_bounds_are_inclusive(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(identity, "MAX_IDENTITIES", 3)
    three = {"version": 1, "devices": {"a": {}}, "collectors": ["c"], "operators": ["o"]}
    assert parse_enrolled(json.dumps(three)).names() == ["a", "c", "o"]
    cases: list[tuple[dict[str, object], str]] = [
        ({"devices": {"a": {}, "b": {}}}, "enrolled.json: more than 3 identities"),
        ({"collectors": ["c", "d"]}, "enrolled.json: more than 3 identities"),
        ({"operators": ["o", "p"]}, "enrolled.json: more than 3 identities"),
        (
            {"devices": {k: {} for k in "abcd"}},
            "enrolled.json: devices must be an object of at most 3 entries",
        ),
        ({"collectors": list("abcd")}, "enrolled.json: collectors: 4 entries, at most 3"),
    ]
    for extra, msg in cases:
        with pytest.raises(EnrollError) as err:
            parse_enrolled(json.dumps({**three, **extra}))
        assert str(err.value) == msg
    text = json.dumps(three)
    monkeypatch.setattr(identity, "MAX_ENROLLED_BYTES", len(text))
    assert parse_enrolled(text).collectors == ["c"]
    with pytest.raises(EnrollError) as err:
        parse_enrolled(text + " ")
    assert str(err.value) == f"enrolled.json: {len(text) + 1} characters, at most {len(text)}"


@pytest.mark.parametrize("tail", ["X", "XX", " ", "\t"])
def test_passwd_matches_strips_one_line_end_only(tail: str) -> None:
    # only line-end characters go (any run of them): anything else after the hash is not base64
    assert not passwd_matches(_line() + tail, "pw")


def test_a_second_colon_is_not_a_user_with_a_colon() -> None:
    # mosquitto splits at the first ':' as well; "a:b" is no user of ours
    assert not passwd_matches("a:" + _line(), "pw")
    with pytest.raises(EnrollError, match="line 1: not 'user"):
        parse_passwd("a:b:$7$x")


def test_the_prefix_and_dir_lose_slashes_only() -> None:
    acl = acl_text(Enrollment({"a": []}, ["c"], ["o"]), "/XsX/")
    for line in ["topic write XsX/a/detections", "topic read XsX/+/+", "topic write XsX/+/model/#"]:
        assert line in acl.splitlines()
    assert "password_file /etc/mX/passwd\n" in conf_text("/etc/mX/", 1883)


def test_lists_exactly_at_the_bound_are_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(identity, "MAX_IDENTITIES", 3)
    assert parse_enrolled('{"version": 1, "collectors": ["a", "b", "c"]}').collectors == ["a", "b", "c"]
    three = {"version": 1, "devices": {"a": {}, "b": {}, "c": {}}}
    assert sorted(parse_enrolled(json.dumps(three)).devices) == ["a", "b", "c"]


def test_a_long_version_is_cut_in_the_message() -> None:
    with pytest.raises(EnrollError) as err:
        parse_enrolled(json.dumps({"version": "v" * 30}))
    assert str(err.value) == f"enrolled.json: version {'v' * 20!r}, expected 1"


def test_identity_users_lists_each_roles_user() -> None:
    e = Enrollment({"cam": []}, ["coll"], ["op"])
    assert e.identity_users("cam") == ["cam", "cam-model", "cam-doctor"]
    assert e.identity_users("op") == ["op", "op-watch"]
    assert e.identity_users("coll") == ["coll"]
    assert e.identity_users("cam-model") == [] and e.identity_users("nobody") == []
    assert e.names() == ["cam", "coll", "op"]
