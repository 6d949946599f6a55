"""core.fleet on hand-made messages: what the collector stores, refuses and explains (pure).

Every field here comes from a device over MQTT, so each bound is checked at and past its edge, and
each refusal is the one line the collector stores for it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edge_agent.core.messages.batch import pack
from edge_agent.core.messages.fleet import (
    LOSS_COUNTERS,
    MAX_BOOT,
    MAX_PAYLOAD,
    MAX_SEQ,
    TS_MAX,
    IngestError,
    explain,
    model_version,
    parse,
    split_topic,
    subscriptions,
)

NOW = 1796000000.0
TOPIC = "edge/cam-1/detections"


def result(**kw: Any) -> dict[str, Any]:
    b: dict[str, Any] = {"id": "r1", "seq": 7, "boot": 2, "device_id": "cam-1", "ts": NOW - 3}
    b.update(kw)
    return {k: v for k, v in b.items() if v is not None}


def refused(topic: str, payload: Any) -> str:
    raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    with pytest.raises(IngestError) as err:
        parse("edge", topic, raw, NOW)
    text = str(err.value)
    assert "\n" not in text
    return text


def one(payload: Any, topic: str = TOPIC) -> Any:
    raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return parse("edge", topic, raw, NOW).records[0]


def test_subscriptions_strip_slashes_and_share_only_with_a_group() -> None:
    cams = ["site/a/+/+/detections", "site/a/+/+/objects", "site/a/+/+/counts", "site/a/+/+/sensor_results"]
    assert subscriptions("/site/a/", None) == ["site/a/+/+", *cams]
    assert subscriptions("edge", "") == [
        "edge/+/+",
        "edge/+/+/detections",
        "edge/+/+/objects",
        "edge/+/+/counts",
        "edge/+/+/sensor_results",
    ]
    assert subscriptions("site/a", "g") == [f"$share/g/{f}" for f in ["site/a/+/+", *cams]]


def test_topic_levels_are_checked_one_by_one() -> None:
    assert split_topic("edge/", "edge/a.b_c-1/sensors") == ("a.b_c-1", "sensors", None)
    assert split_topic("edge", "edge/" + "d" * 64 + "/x") == ("d" * 64, "x", None)
    with pytest.raises(IngestError, match=r"^topic 'edgeX/cam/detections': not under the prefix 'edge'$"):
        split_topic("edge", "edgeX/cam/detections")
    levels = "expected edge/<device>/<kind> or edge/<device>/<camera>/<kind>"
    with pytest.raises(IngestError, match=rf"^topic 'edge/cam/a/b/c': {levels}$"):
        split_topic("edge", "edge/cam/a/b/c")
    with pytest.raises(IngestError, match=rf"^topic 'edge/cam': {levels}$"):
        split_topic("edge", "edge/cam")
    long = "edge/" + "d" * 65 + "/x"
    with pytest.raises(IngestError) as err:
        split_topic("edge", long)
    assert str(err.value) == f"topic {long!r}: device id {'d' * 65!r} is not 1-64 of A-Za-z0-9_.-"
    with pytest.raises(IngestError, match=r"^topic 'edge//x': device id '' is not 1-64"):
        split_topic("edge", "edge//x")
    with pytest.raises(IngestError, match=r"^topic 'edge/cam/Det': kind 'Det' is not a message kind$"):
        split_topic("edge", "edge/cam/Det")
    huge = "edge/" + "d" * 500 + "/x"
    with pytest.raises(IngestError) as err:
        split_topic("edge", huge)
    assert str(err.value) == f"topic {huge[:200]!r}: device id {'d' * 80!r} is not 1-64 of A-Za-z0-9_.-"


def test_a_body_is_stored_as_sent_when_it_parses_and_re_dumped_only_when_it_must_be() -> None:
    # as sent: spaces, key order and UTF-8 kept (no parse-and-dump per body)
    sent = '{"seq": 7, "boot": 2, "id": "r1",  "label": "caf\u00e9", "x": 1.5e3}\n'.encode()
    assert parse("edge", TOPIC, sent, NOW).records[0].body == sent.decode()
    # a \u escape may hide a lone surrogate or a NUL: re-dumped (and checked) as before
    esc = b'{"seq": 7, "boot": 2, "label": "caf\\u00e9"}'
    assert parse("edge", TOPIC, esc, NOW).records[0].body == '{"seq":7,"boot":2,"label":"caf\u00e9"}'
    assert "surrogate" in refused(TOPIC, b'{"seq": 7, "boot": 2, "x": "\\ud800"}')
    assert "NUL" in refused(TOPIC, b'{"seq": 7, "boot": 2, "x": "\\u0000"}')
    # a number that reads as an infinite float, and not-UTF-8 / BOM payloads: as before
    assert "not storable JSON" in refused(TOPIC, b'{"seq": 7, "boot": 2, "x": 1e400}')
    bom = b"\xef\xbb\xbf" + b'{"seq": 7, "boot": 2}'
    assert parse("edge", TOPIC, bom, NOW).records[0].body == '{"seq":7,"boot":2}'
    assert "not JSON" in refused(TOPIC, b'{"seq": 7, "boot": 2, "x": "\xff"}')


def test_only_a_body_whose_numbers_all_read_as_finite_floats_is_stored_as_sent() -> None:
    """The C float parser takes a body where no number can overflow (no 3-digit exponent, under
    210 digits); any other body goes through the checking decoder. Each case sits at a border."""

    def body(x: str, pad: int = 0) -> bytes:
        return ('{"seq": 7, "boot": 2, "pad": [' + ", ".join(["12345"] * pad) + '], "x": ' + x + "}").encode()

    for x in ("1" + "0" * 309 + ".5", "9" * 210 + "e99", "1e309", "1E+400", "-1e0400", "0.5e999"):
        assert "not storable JSON" in refused(TOPIC, body(x)), x[-12:]
        assert "not storable JSON" in refused(TOPIC, body(x, pad=50)), x[-12:]  # 250 digits: runs read
    for x in ("1" + "0" * 300, "9" * 209 + "e99", "1e99", "1e-999", "1.5E+30"):
        for pad in (0, 50):
            sent = body(x, pad)
            assert parse("edge", TOPIC, sent, NOW).records[0].body == sent.decode(), x[-12:]


_NUMBER = st.from_regex(r"\A-?(0|[1-9][0-9]{0,3})(\.[0-9]{1,3})?([eE][+-]?[0-9]{1,4})?\Z")


@given(st.lists(st.one_of(_NUMBER, st.text("e0123456789:,[ .E+-x", max_size=12).map(json.dumps)), max_size=8))
@settings(max_examples=300, deadline=None)
def test_as_sent_exactly_when_every_number_is_a_finite_float(tokens: list[str]) -> None:
    text = '{"seq": 7, "boot": 2, "v": [' + ", ".join(tokens) + "]}"
    overflow = any(float(t) in (float("inf"), float("-inf")) for t in tokens if not t.startswith('"'))
    if overflow:
        assert "not storable JSON" in refused(TOPIC, text.encode())
    else:
        r = parse("edge", TOPIC, text.encode(), NOW).records[0]
        assert r.body == text and json.loads(r.body) == json.loads(text)


def test_seq_and_boot_are_taken_at_their_bounds_and_refused_past_them() -> None:
    assert (one(result(seq=1, boot=0)).seq, one(result(seq=1, boot=0)).boot) == (1, 0)
    r = one(result(seq=MAX_SEQ, boot=MAX_BOOT))
    assert (r.seq, r.boot) == (MAX_SEQ, MAX_BOOT)
    assert refused(TOPIC, result(seq=MAX_SEQ + 1)) == (
        f"{TOPIC}: seq = {MAX_SEQ + 1}, expected an integer 1..{MAX_SEQ}"
    )
    assert refused(TOPIC, result(boot=MAX_BOOT + 1)) == (
        f"{TOPIC}: boot = {MAX_BOOT + 1}, expected an integer 0..{MAX_BOOT}"
    )
    assert refused(TOPIC, result(seq=7.0)).endswith("seq = 7.0, expected an integer 1..4611686018427387904")
    assert refused(TOPIC, result(boot="2")).endswith("boot = '2', expected an integer 0..2147483648")
    assert refused(TOPIC, result(boot=False)).endswith("boot = False, expected an integer 0..2147483648")
    assert refused(TOPIC, result(seq="9" * 100)).endswith(
        f"seq = {repr('9' * 100)[:40]}, expected an integer 1..{MAX_SEQ}"
    )
    assert refused(TOPIC, b'{"seq":null,"boot":1}').endswith(
        "seq = None, expected an integer 1..4611686018427387904"
    )


def test_the_device_time_is_used_only_when_it_is_a_clock_reading() -> None:
    assert one(result(ts=0)).time == 0.0
    assert one(result(ts=TS_MAX)).time == TS_MAX
    assert isinstance(one(result(ts=1796000000)).time, float)
    for bad in (TS_MAX * 1.01, -0.001, True, None, [1]):
        assert one(result(ts=bad)).time == NOW, bad
    # Infinity/NaN are JSON to Python's reader, not to the databases: refused as a whole
    assert "not storable JSON" in refused(TOPIC, b'{"id":"r1","seq":7,"boot":2,"ts":Infinity}')


def test_a_record_keeps_the_body_as_compact_json_and_its_id() -> None:
    r = one(result(label="caf\u00e9", n=[1, 2]))
    assert r == (
        "cam-1",
        2,
        7,
        "detections",
        "r1",
        NOW - 3,
        '{"id":"r1","seq":7,"boot":2,"device_id":"cam-1","ts":1795999997.0,"label":"caf\u00e9","n":[1,2]}',
        None,  # no camera: the single [camera]
    )
    no_id = one(result(id=None, device_id=None))
    assert no_id.msg_id is None and no_id.device == "cam-1"  # both optional
    assert one(result(id="a:b.c_d-" + "e" * 56)).msg_id == "a:b.c_d-" + "e" * 56  # 64 characters


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (
            result(id="x" * 65),
            "id 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx' is not 1-64 of A-Za-z0-9_.:-",
        ),
        (result(id=5), "id '5' is not 1-64 of A-Za-z0-9_.:-"),
        (result(id=""), "id '' is not 1-64 of A-Za-z0-9_.:-"),
        (result(device_id="cam-2"), "device_id 'cam-2' is not the topic's device 'cam-1'"),
        (result(device_id=None) | {"device_id": None}, "device_id 'None' is not the topic's device 'cam-1'"),
        (result(label="a\u0000b"), "contains a NUL character"),
    ],
)
def test_a_bad_record_is_refused_with_the_field(body: dict[str, Any], why: str) -> None:
    assert refused(TOPIC, body) == f"{TOPIC}: {why}"


def test_json_the_databases_cannot_store_is_refused() -> None:
    text = refused(TOPIC, b'{"id":"r1","seq":7,"boot":2,"x":NaN}')
    assert text.startswith(f"{TOPIC}: not storable JSON (")
    assert refused(TOPIC, b"\xff\xfe").startswith(f"{TOPIC}: not JSON (")
    assert refused("edge/cam-1/model_progress", b'{"step":"a\\u0000"}') == (
        "edge/cam-1/model_progress: contains a NUL character"
    )


def test_a_message_over_the_size_cap_is_refused_before_it_is_read() -> None:
    assert (
        refused(TOPIC, b" " * (MAX_PAYLOAD + 1))
        == f"{TOPIC}: {MAX_PAYLOAD + 1} bytes, at most {MAX_PAYLOAD} taken"
    )
    # at the cap it is read (and here refused only for what it holds)
    assert refused(TOPIC, b" " * MAX_PAYLOAD).startswith(f"{TOPIC}: not JSON (")


def test_a_batch_line_is_refused_with_its_line_number() -> None:
    rows = [("detections", json.dumps(result(seq=s)).encode()) for s in (1, 0)]
    topic = "edge/cam-1/batch.zlib"
    assert refused(topic, pack(rows, 1 << 20).payload) == (
        f"{topic} line 2: seq = 0, expected an integer 1..{MAX_SEQ}"
    )
    assert refused(topic, b"x").startswith(f"{topic}: ")


def test_what_is_not_sequenced_is_an_event_and_a_status_is_never_a_record() -> None:
    p = parse("edge", "edge/cam-1/model_progress", b'[1,"x"]', NOW)
    assert (p.records, p.status, p.event) == ([], None, ("cam-1", "model_progress", '[1,"x"]'))
    p = parse("edge", "edge/cam-1/alerts", b'{"level":"high"}', NOW)
    assert p.event == ("cam-1", "alerts", '{"level":"high"}') and p.records == []
    p = parse("edge", "edge/cam-1/status", json.dumps({"seq": 5, "state": "running"}).encode(), NOW)
    assert p.records == [] and p.event is None and p.status is not None and p.status.state == "running"


def status(body: Any) -> Any:
    s = parse("edge", "edge/cam-1/status", json.dumps(body).encode(), NOW).status
    assert s is not None
    return s


def test_a_status_snapshot_fills_the_device_row() -> None:
    body = {
        "device_id": "cam-1",
        "state": "running",
        "ts": NOW - 1,
        "version": "0.9.1",
        "models": {"detector": {"id": "yolo-n"}},
        "queue": {"pending": 12, "dropped": 3, "expired": 1, "lost": 2, "crashes": 1, "disk_full": True},
    }
    s = status(body)
    assert (s.device, s.state, s.ts, s.version, s.model_version, s.backlog, s.disk_full) == (
        "cam-1",
        "running",
        NOW - 1,
        "0.9.1",
        "yolo-n",
        12,
        True,
    )
    assert s.counters == {
        "dropped": 3,
        "expired": 1,
        "rejected": 0,
        "lost": 2,
        "crashes": 1,
        "seq_skipped": 0,
        "salvaged": 0,
    }
    assert list(s.counters) == list(LOSS_COUNTERS)
    assert s.body == json.dumps(body, separators=(",", ":"))


def test_a_hostile_status_is_bounded_field_by_field() -> None:
    s = status(
        {
            "state": "\x1b[31m" + "x" * 100,
            "version": "v" * 100,
            "ts": -5,
            "queue": {"pending": -3, "dropped": 10**30, "lost": 2.5, "crashes": True, "disk_full": 1},
        }
    )
    assert s.state == "[31m" + "x" * 27  # cut to 32, then the escape character dropped
    assert s.version == "v" * 64 and s.ts == NOW
    assert (s.backlog, s.counters["dropped"], s.counters["lost"], s.counters["crashes"]) == (0, MAX_SEQ, 0, 0)
    assert s.disk_full is False  # only true is true
    bare = status({})
    assert (bare.state, bare.version, bare.model_version, bare.backlog, bare.disk_full) == (
        "unknown",
        "",
        "",
        0,
        False,
    )
    assert status({"state": "", "queue": [1]}).state == "unknown"
    assert status({"state": None}).state == "unknown"
    assert status({"state": 5}).state == "5"


def test_a_status_for_another_device_is_refused() -> None:
    assert (
        refused("edge/cam-1/status", {"device_id": "cam-9"})
        == "edge/cam-1/status: device_id 'cam-9' is not 'cam-1'"
    )
    assert refused("edge/cam-1/status", [1]) == "edge/cam-1/status: body is list, expected an object"


def test_the_model_version_is_the_installed_package_else_the_detector() -> None:
    assert (
        model_version({"model_update": {"current": {"id": "v7"}}, "models": {"detector": {"id": "y"}}})
        == "v7"
    )
    assert model_version({"model_update": {"current": None}, "models": {"detector": {"id": "y"}}}) == "y"
    assert model_version({"model_update": "v7", "models": {"detector": {"id": 3}}}) == "3"
    assert model_version({"model_update": {"current": {}}}) == ""
    assert model_version({"models": {"detector": {}}}) == ""
    assert model_version({"models": {"detector": "y"}}) == ""
    assert model_version({"models": ["y"]}) == ""
    assert status({"models": {"detector": {"id": "m" * 200}}}).model_version == "m" * 128


@settings(deadline=None)  # mutmut's stats run traces every call: slow on a busy machine
@given(
    st.dictionaries(
        st.sampled_from(["state", "version", "ts", "queue", "models", "model_update", "x"]),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=40),
            lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=8), c, max_size=3),
            max_leaves=8,
        ),
    )
)
def test_any_status_object_gives_a_bounded_row_or_one_refusal(body: dict[str, Any]) -> None:
    try:
        s = parse("edge", "edge/cam-1/status", json.dumps(body).encode(), NOW).status
    except IngestError as exc:
        assert "\n" not in str(exc) and str(exc).startswith("edge/cam-1/status: ")
        return
    assert s is not None and len(s.state) <= 32 and len(s.version) <= 64 and len(s.model_version) <= 128
    assert all(c.isprintable() for c in s.state + s.version + s.model_version)
    assert 0 <= s.backlog <= MAX_SEQ and all(0 <= v <= MAX_SEQ for v in s.counters.values())
    assert 0 <= s.ts <= TS_MAX


ROWS = [(1, 4, None, 1), (10, 12, 1, 2), (20, 21, 2, 2)]


def test_a_gap_before_the_first_message_is_never_blamed_on_the_device() -> None:
    (g, *_) = explain(ROWS, {"crashes": 3, "dropped": 2})
    assert g == (1, 4, None, 1, "before the first message received", False)


def test_a_gap_at_a_new_boot_is_the_crash_window_when_the_device_counted_one() -> None:
    for counters, told in (
        ({"crashes": 1}, "1 crashes, 0 seq skipped"),
        ({"seq_skipped": 4}, "0 crashes, 4 seq skipped"),
        ({"crashes": 2, "seq_skipped": 5}, "2 crashes, 5 seq skipped"),
    ):
        g = explain(ROWS, counters)[1]
        assert g == (10, 12, 1, 2, f"crash window: boot 1 -> 2 (device reports {told})", True), counters
    for counters in ({}, {"crashes": 0, "seq_skipped": 0, "dropped": 9}):
        assert explain(ROWS, counters)[1] == (
            10,
            12,
            1,
            2,
            "boot 1 -> 2, no crash reported: not received",
            False,
        )


def test_a_gap_within_a_boot_is_a_drop_only_when_the_device_counted_drops() -> None:
    g = explain(ROWS, {"lost": 2, "dropped": 5, "expired": 0, "rejected": 1, "crashes": 1, "salvaged": 4})[2]
    # in the counters' own order, zeros and non-drop counters left out
    assert g == (20, 21, 2, 2, "dropped on the device (device reports dropped 5, rejected 1, lost 2)", True)
    for counters in ({}, {"crashes": 3, "seq_skipped": 1, "salvaged": 2}, {"dropped": 0}):
        assert explain(ROWS, counters)[2] == (
            20,
            21,
            2,
            2,
            "not received (still queued, in flight, or lost after the broker)",
            False,
        )
    assert explain([], {"dropped": 1}) == []


def test_long_topics_and_ids_are_named_cut_short() -> None:
    prefix = "p" * 150
    with pytest.raises(IngestError) as err:
        parse(prefix, "x" * 300, b"{}", NOW)
    assert str(err.value) == f"topic {'x' * 200!r}: not under the prefix {prefix!r}"
    deep = f"{prefix}/cam-1/" + "a/" * 40 + "k"
    with pytest.raises(IngestError) as err:
        parse(prefix, deep, b"{}", NOW)
    assert str(err.value) == (
        f"topic {deep[:200]!r}: expected {prefix}/<device>/<kind> or {prefix}/<device>/<camera>/<kind>"
    )
    kind_topic = f"{prefix}/cam-1/" + "k" * 100
    with pytest.raises(IngestError) as err:
        parse(prefix, kind_topic, b"{}", NOW)
    assert str(err.value) == f"topic {kind_topic[:200]!r}: kind {'k' * 80!r} is not a message kind"
    long_topic = f"{prefix}/{'d' * 64}/{'k' * 32}"  # 248 characters, every level valid
    with pytest.raises(IngestError) as err:
        parse(prefix, long_topic, json.dumps(result(device_id="x" * 100)).encode(), NOW)
    assert (
        str(err.value) == f"{long_topic[:200]}: device_id {'x' * 80!r} is not the topic's device {'d' * 64!r}"
    )
    with pytest.raises(IngestError) as err:
        parse(prefix, long_topic, json.dumps(result(device_id=None, id="i" * 100)).encode(), NOW)
    assert str(err.value) == f"{long_topic[:200]}: id {'i' * 80!r} is not 1-64 of A-Za-z0-9_.:-"
    status_topic = f"{prefix}/{'d' * 64}/status"
    with pytest.raises(IngestError) as err:
        parse(prefix, status_topic, json.dumps({"device_id": "y" * 100}).encode(), NOW)
    assert str(err.value) == f"{status_topic[:200]}: device_id {'y' * 80!r} is not {'d' * 64!r}"


def test_a_prefix_is_stripped_of_slashes_only() -> None:
    assert subscriptions("X/", None)[0] == "X/+/+"
    assert split_topic("/Xsite/", "Xsite/cam/k") == ("cam", "k", None)
    assert split_topic("/Xsite/", "Xsite/cam/gate/counts") == ("cam", "counts", "gate")


def test_a_batch_line_without_a_device_time_gets_the_receive_time() -> None:
    rows = [("detections", json.dumps(result(ts=None, seq=s)).encode()) for s in (1, 2)]
    got = parse("edge", "edge/cam-1/batch.zlib", pack(rows, 1 << 20).payload, NOW).records
    assert [r.time for r in got] == [NOW, NOW]


def test_one_skipped_seq_or_one_expired_message_is_enough_to_explain_a_gap() -> None:
    assert explain(ROWS, {"seq_skipped": 1})[1].reported
    g = explain(ROWS, {"expired": 3})[2]
    assert g.reason == "dropped on the device (device reports expired 3)" and g.reported


def test_a_lone_surrogate_is_refused_in_a_message_an_event_a_status_and_a_batch_line() -> None:
    # json.loads takes "\ud800"; the drivers' UTF-8 encode did not, outside the guard (a crash loop)
    lone = b'{"id":"r1","seq":7,"boot":2,"device_id":"cam-1","label":"\\ud800"}'
    why = "holds a lone UTF-16 surrogate (\\ud800-\\udfff), not storable text"
    assert refused(TOPIC, lone) == f"{TOPIC}: {why}"
    assert refused("edge/cam-1/model_progress", b'["\\udfff"]') == f"edge/cam-1/model_progress: {why}"
    assert refused("edge/cam-1/status", b'{"state":"running","\\udc00":1}') == f"edge/cam-1/status: {why}"
    topic = "edge/cam-1/batch.zlib"
    rows = [("detections", json.dumps(result(seq=1)).encode()), ("detections", lone)]
    assert refused(topic, pack(rows, 1 << 20).payload) == f"{topic} line 2: {why}"
    # a surrogate PAIR is a real character: stored (as UTF-8)
    pair = parse("edge", TOPIC, b'{"id":"r1","seq":7,"boot":2,"e":"\\ud83d\\ude00"}', NOW).records[0]
    assert "\U0001f600" in pair.body


def test_json_nesting_is_bounded_in_messages_and_in_batch_lines() -> None:
    deep = b'{"id":"r1","seq":7,"boot":2,"x":' + b"[" * 64 + b"]" * 64 + b"}"
    assert refused(TOPIC, deep) == f"{TOPIC}: JSON nested deeper than 64"
    ok = b'{"id":"r1","seq":7,"boot":2,"x":' + b"[" * 63 + b"]" * 63 + b"}"
    assert parse("edge", TOPIC, ok, NOW).records[0].seq == 7  # 64 levels with the body: taken
    assert refused(TOPIC, b"[" * 100_000).startswith(f"{TOPIC}: not JSON (maximum recursion depth")
    # brackets inside strings are not nesting
    many = json.dumps(result(x="[" * 500)).encode()
    assert parse("edge", TOPIC, many, NOW).records[0].seq == 7
    topic = "edge/cam-1/batch.zlib"
    body = json.dumps(
        result(
            x=[
                [
                    [
                        [
                            [
                                [
                                    [
                                        [
                                            [
                                                [
                                                    [
                                                        [
                                                            [
                                                                [
                                                                    [
                                                                        [
                                                                            [
                                                                                [
                                                                                    [
                                                                                        [
                                                                                            [
                                                                                                [
                                                                                                    [
                                                                                                        [
                                                                                                            [
                                                                                                                [
                                                                                                                    [
                                                                                                                        [
                                                                                                                            [
                                                                                                                                [
                                                                                                                                    [
                                                                                                                                        [
                                                                                                                                            [
                                                                                                                                                [
                                                                                                                                                    [
                                                                                                                                                        [
                                                                                                                                                            [
                                                                                                                                                                [
                                                                                                                                                                    [
                                                                                                                                                                        [
                                                                                                                                                                            [
                                                                                                                                                                                [
                                                                                                                                                                                    [
                                                                                                                                                                                        [
                                                                                                                                                                                            [
                                                                                                                                                                                                [
                                                                                                                                                                                                    [
                                                                                                                                                                                                        [
                                                                                                                                                                                                            [
                                                                                                                                                                                                                [
                                                                                                                                                                                                                    [
                                                                                                                                                                                                                        [
                                                                                                                                                                                                                            [
                                                                                                                                                                                                                                [
                                                                                                                                                                                                                                    [
                                                                                                                                                                                                                                        [
                                                                                                                                                                                                                                            [
                                                                                                                                                                                                                                                [
                                                                                                                                                                                                                                                    [
                                                                                                                                                                                                                                                        [
                                                                                                                                                                                                                                                            [
                                                                                                                                                                                                                                                                [
                                                                                                                                                                                                                                                                    [
                                                                                                                                                                                                                                                                        [
                                                                                                                                                                                                                                                                            [
                                                                                                                                                                                                                                                                                1
                                                                                                                                                                                                                                                                            ]
                                                                                                                                                                                                                                                                        ]
                                                                                                                                                                                                                                                                    ]
                                                                                                                                                                                                                                                                ]
                                                                                                                                                                                                                                                            ]
                                                                                                                                                                                                                                                        ]
                                                                                                                                                                                                                                                    ]
                                                                                                                                                                                                                                                ]
                                                                                                                                                                                                                                            ]
                                                                                                                                                                                                                                        ]
                                                                                                                                                                                                                                    ]
                                                                                                                                                                                                                                ]
                                                                                                                                                                                                                            ]
                                                                                                                                                                                                                        ]
                                                                                                                                                                                                                    ]
                                                                                                                                                                                                                ]
                                                                                                                                                                                                            ]
                                                                                                                                                                                                        ]
                                                                                                                                                                                                    ]
                                                                                                                                                                                                ]
                                                                                                                                                                                            ]
                                                                                                                                                                                        ]
                                                                                                                                                                                    ]
                                                                                                                                                                                ]
                                                                                                                                                                            ]
                                                                                                                                                                        ]
                                                                                                                                                                    ]
                                                                                                                                                                ]
                                                                                                                                                            ]
                                                                                                                                                        ]
                                                                                                                                                    ]
                                                                                                                                                ]
                                                                                                                                            ]
                                                                                                                                        ]
                                                                                                                                    ]
                                                                                                                                ]
                                                                                                                            ]
                                                                                                                        ]
                                                                                                                    ]
                                                                                                                ]
                                                                                                            ]
                                                                                                        ]
                                                                                                    ]
                                                                                                ]
                                                                                            ]
                                                                                        ]
                                                                                    ]
                                                                                ]
                                                                            ]
                                                                        ]
                                                                    ]
                                                                ]
                                                            ]
                                                        ]
                                                    ]
                                                ]
                                            ]
                                        ]
                                    ]
                                ]
                            ]
                        ]
                    ]
                ]
            ]
        )
    )
    assert refused(topic, pack([("detections", body.encode())], 1 << 20).payload) == (
        f"{topic} line 1: JSON nested deeper than 64"
    )


def test_a_batch_line_of_another_device_is_refused() -> None:
    topic = "edge/cam-1/batch.zlib"
    rows = [
        ("detections", json.dumps(result(seq=1)).encode()),
        ("detections", json.dumps(result(seq=2, device_id="cam-9")).encode()),
    ]
    assert refused(topic, pack(rows, 1 << 20).payload) == (
        f"{topic} line 2: device_id 'cam-9' is not the topic's device 'cam-1'"
    )


def test_a_status_ts_from_the_future_is_the_receive_time_and_its_order_needs_every_counter() -> None:
    def status(**kw: Any) -> Any:
        body = {"device_id": "cam-1", "state": "running", "ts": 9e10, "queue": {"boot": 3, "seq": 41}, **kw}
        got = parse("edge", "edge/cam-1/status", json.dumps(body).encode(), NOW).status
        assert got is not None
        return got

    s = status(link=2, status_seq=9)
    assert s.ts == NOW and s.order == (3, 2, 0, 9) and s.seq == 41
    assert parse(
        "edge",
        "edge/cam-1/status",
        json.dumps(
            {"state": "offline", "ts": NOW - 5, "link": 2, "status_seq": 1, "queue": {"boot": 3}}
        ).encode(),
        NOW,
    ).status.order == (3, 2, 1, 1)  # type: ignore[union-attr]
    assert status().order is None  # an old agent: ordered by ts
    assert status(link=2).order is None and status(link=-1, status_seq=1).order is None
    assert status(link=2, status_seq=True).order is None and status(link=2, status_seq=2**63).order is None


def test_a_sensor_models_results_are_a_kind_under_the_models_level() -> None:
    assert split_topic("edge", "edge/cam/activity/sensor_results") == ("cam", "sensor_results", None)
    with pytest.raises(IngestError, match="sensor model 'a b'"):
        split_topic("edge", "edge/cam/a b/sensor_results")
    with pytest.raises(IngestError, match="not a camera kind"):
        split_topic("edge", "edge/cam/activity/sensor_resultz")
