"""core.batch and core.fleet meet outside data: round trips, bounds, and one clear error each."""

from __future__ import annotations

import contextlib
import json
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edge_agent.core.messages.batch import BATCH_KIND, MAX_INFLATED, BatchError, batch_topic, pack, unpack
from edge_agent.core.messages.fleet import IngestError, explain, parse, split_topic, subscriptions

NOW = 1796000000.0
bodies = st.dictionaries(
    st.text(min_size=1, max_size=8),
    st.one_of(st.integers(-10, 10**12), st.text(max_size=20), st.booleans()),
    max_size=5,
)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["detections", "sensors", "objects"]), bodies), min_size=1, max_size=40
    )
)
def test_pack_unpack_round_trip(rows: list[tuple[str, dict[str, object]]]) -> None:
    raw = [(k, json.dumps(b, separators=(",", ":")).encode()) for k, b in rows]
    packed = pack(raw, 1 << 20)
    assert packed.rows == len(rows)
    assert unpack(packed.payload) == rows


def test_pack_stops_at_the_byte_budget_but_takes_at_least_one() -> None:
    raw = [("detections", b'{"x":"' + b"a" * 100 + b'"}')] * 10
    assert pack(raw, 350).rows == 2  # 124 bytes a line
    assert pack(raw, 10).rows == 1  # one over-size row still goes (alone)


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=300))
def test_unpack_of_garbage_raises_only_batch_error(data: bytes) -> None:
    for payload in (data, zlib.compress(data)):
        with contextlib.suppress(BatchError):
            unpack(payload)


@pytest.mark.parametrize(
    "lines, why",
    [
        (b'["detections",{"a":1}', "not JSON"),
        (b'["detections",[1]]', "expected an object"),
        (b'["Bad Kind",{}]', "not a message kind"),
        (b'["batch.zlib",{}]', "not a message kind"),
        (b'{"a":1}', "expected [kind, body]"),
    ],
)
def test_unpack_names_the_bad_line(lines: bytes, why: str) -> None:
    with pytest.raises(BatchError, match="line 1") as err:
        unpack(zlib.compress(lines))
    assert why in str(err.value)


def test_unpack_refuses_a_zip_bomb_and_a_truncated_stream() -> None:
    bomb = zlib.compress(b"\n" * (MAX_INFLATED + 10), 9)
    assert len(bomb) < MAX_INFLATED // 500
    with pytest.raises(BatchError, match="inflates to more than"):
        unpack(bomb)
    with pytest.raises(BatchError, match="truncated"):
        unpack(zlib.compress(b'["detections",{}]\n')[:-3])


def test_topics_and_subscriptions() -> None:
    assert batch_topic("edge/", "cam-1") == f"edge/cam-1/{BATCH_KIND}"
    assert subscriptions("edge", None)[0] == "edge/+/+"
    assert subscriptions("site/a", "g1")[0] == "$share/g1/site/a/+/+"
    assert split_topic("site/a", "site/a/cam-1/detections") == ("cam-1", "detections", None)
    for bad in ("other/cam-1/detections", "edge/cam 1/detections", "edge/cam-1/model/begin", "edge/cam-1/UP"):
        with pytest.raises(IngestError):
            split_topic("edge", bad)


def body(**kw: object) -> bytes:
    b: dict[str, object] = {
        "id": "a" * 32,
        "seq": 7,
        "boot": 2,
        "device_id": "cam-1",
        "ts": NOW,
        "detections": [],
    }
    b.update(kw)
    return json.dumps({k: v for k, v in b.items() if v is not None}).encode()


def test_parse_a_result_a_batch_a_status_and_an_event() -> None:
    rec = parse("edge", "edge/cam-1/detections", body(), NOW + 5).records[0]
    assert (rec.device, rec.boot, rec.seq, rec.kind, rec.time) == ("cam-1", 2, 7, "detections", NOW)
    rows = [("detections", body(seq=s)) for s in (1, 2)] + [("sensors", body(seq=3))]
    got = parse("edge", f"edge/cam-1/{BATCH_KIND}", pack(rows, 1 << 20).payload, NOW).records
    assert [(r.seq, r.kind) for r in got] == [(1, "detections"), (2, "detections"), (3, "sensors")]
    snap = {
        "device_id": "cam-1",
        "state": "offline",
        "ts": NOW,
        "version": "0.4",
        "queue": {"pending": 12, "crashes": 2, "dropped": True},
        "model_update": {"current": {"id": "v7"}},
        "models": {"detector": {"id": "yolo"}},
    }
    s = parse("edge", "edge/cam-1/status", json.dumps(snap).encode(), NOW).status
    assert s is not None and (s.state, s.backlog, s.model_version) == ("offline", 12, "v7")
    assert s.counters["crashes"] == 2 and s.counters["dropped"] == 0  # a bool is not a count
    ev = parse("edge", "edge/cam-1/model_progress", b'{"step":"verify"}', NOW).event
    assert ev is not None and ev.kind == "model_progress"


@pytest.mark.parametrize(
    "topic, payload, why",
    [
        ("edge/cam-1/detections", b"{", "not JSON"),
        ("edge/cam-1/detections", body(seq=0), "seq = 0"),
        ("edge/cam-1/detections", body(seq=2**70), "seq ="),
        ("edge/cam-1/detections", body(seq=True), "seq = True"),
        ("edge/cam-1/detections", body(boot=-1), "boot = -1"),
        ("edge/cam-1/detections", body(device_id="cam-2"), "not the topic's device"),
        ("edge/cam-1/detections", body(id="x" * 65), "id"),
        ("edge/cam-1/detections", body(label="a\u0000b"), "NUL"),
        ("edge/cam-1/status", b"[1]", "expected an object"),
        ("edge/cam-1/batch.zlib", b"not zlib", "not zlib"),
    ],
)
def test_parse_refuses_with_one_line_naming_the_topic(topic: str, payload: bytes, why: str) -> None:
    with pytest.raises(IngestError) as err:
        parse("edge", topic, payload, NOW)
    text = str(err.value)
    assert topic in text and why in text and "\n" not in text


def test_a_future_or_absurd_ts_falls_back_to_the_receive_time() -> None:
    for ts in (1e300, -5, "soon"):
        assert parse("edge", "edge/d/detections", body(device_id="d", ts=ts), NOW).records[0].time == NOW


def test_explain_tells_crash_windows_device_drops_and_plain_losses_apart() -> None:
    rows = [(1, 4, None, 1), (10, 12, 1, 2), (20, 20, 2, 2)]
    plain = explain(rows, {})
    assert [g.reported for g in plain] == [False, False, False]
    assert "not received" in plain[2].reason
    told = explain(rows, {"crashes": 1, "seq_skipped": 3, "dropped": 5})
    assert "crash window" in told[1].reason and told[1].reported
    assert "dropped 5" in told[2].reason and told[2].reported
    assert "before the first" in told[0].reason and not told[0].reported


def test_pack_fills_the_budget_exactly_and_counts_raw_bytes() -> None:
    from edge_agent.core.messages.batch import kind_of

    line = b'["detections",{"a":1}]\n'
    raw = [("detections", b'{"a":1}')] * 5
    exact = pack(raw, 3 * len(line))
    assert (exact.rows, exact.raw_bytes) == (3, 3 * len(line))  # a line that fits exactly is taken
    assert zlib.decompress(exact.payload) == line * 3
    assert pack(raw, 3 * len(line) - 1).rows == 2
    assert pack([], 100) == (zlib.compress(b"", 1), 0, 0)
    assert kind_of("edge/cam-1/detections") == "detections" and kind_of("status") == "status"


def test_unpack_names_the_line_number_and_the_bad_kind_or_body() -> None:
    good = b'["detections",{}]\n'
    with pytest.raises(BatchError) as err:
        unpack(zlib.compress(good * 2 + b'["sensors",5]\n'))
    assert str(err.value) == "batch line 3: body is int, expected an object"
    with pytest.raises(BatchError) as err:
        unpack(zlib.compress(good + b"[7,{}]\n"))
    assert str(err.value) == "batch line 2: kind '7' is not a message kind"
    with pytest.raises(BatchError) as err:
        unpack(zlib.compress(b'["' + b"k" * 60 + b'",{}]'))
    assert str(err.value) == f"batch line 1: kind '{'k' * 40}' is not a message kind"
    with pytest.raises(BatchError, match=r"^batch line 1: expected \[kind, body\]$"):
        unpack(zlib.compress(b'["detections",{},1]'))
    with pytest.raises(BatchError, match=r"^batch line 1: not JSON \("):
        unpack(zlib.compress(b"\xff"))
    with pytest.raises(BatchError, match=r"^batch is not zlib data \("):
        unpack(b"not zlib")


@pytest.mark.parametrize("kind", ["detections\n", "a" * 33, "Detections", "9x", ""])
def test_a_kind_is_one_short_lowercase_topic_level(kind: str) -> None:
    with pytest.raises(BatchError, match="is not a message kind"):
        unpack(zlib.compress(json.dumps([kind, {}]).encode()))


def test_kinds_at_the_rules_edges_are_taken() -> None:
    for kind in ("a", "a" * 32, "x9_.-"):
        assert unpack(zlib.compress(json.dumps([kind, {}]).encode())) == [(kind, {})]


def test_the_line_cap_counts_lines_not_the_final_newline() -> None:
    from edge_agent.core.messages.batch import MAX_LINES

    line = b'["detections",{}]\n'
    assert len(unpack(zlib.compress(line * MAX_LINES))) == MAX_LINES
    with pytest.raises(BatchError) as err:
        unpack(zlib.compress(line * (MAX_LINES + 1)))
    assert str(err.value) == f"batch has {MAX_LINES + 1} lines, at most {MAX_LINES} allowed"
    assert unpack(zlib.compress(line.rstrip(b"\n"))) == [("detections", {})]  # no final newline


def test_a_batch_inflating_to_exactly_the_cap_is_read() -> None:
    line = b'["detections",{}]\n'
    data = line + b"x" * (MAX_INFLATED - len(line))
    with pytest.raises(BatchError, match="line 2: not JSON"):  # read whole, not refused as a bomb
        unpack(zlib.compress(data))
    with pytest.raises(BatchError, match="inflates to more than"):
        unpack(zlib.compress(data + b"x"))


def test_a_truncated_batch_says_so_and_the_topic_strips_only_slashes() -> None:
    with pytest.raises(BatchError, match=r"^batch is truncated \(zlib stream not complete\)$"):
        unpack(zlib.compress(b'["detections",{}]\n')[:-3])
    assert batch_topic("X/", "cam") == f"X/cam/{BATCH_KIND}"


@pytest.mark.parametrize(
    "topic, payload",
    [
        ("edge/cam-1\n/detections", body(device_id="cam-1\n")),
        ("edge/cam-1/detections\n", body()),
        ("edge/cam-1/detections", body(id="r1\n")),
    ],
)
def test_a_final_newline_is_not_part_of_a_valid_id(topic: str, payload: bytes) -> None:
    """``$`` matches before a final newline: ``cam-1\\n`` passed as a device id (and was stored)."""
    with pytest.raises(IngestError) as err:
        parse("edge", topic, payload, NOW)
    assert "\n" not in str(err.value)
