"""The confirmation format: range arithmetic, the bounds the collector applies, and decode()'s
refusal of anything not a well-formed, bounded confirmation (it is outside input on the device)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from edge_agent.core.messages.confirm import (
    MAX_BOOTS,
    MAX_PAYLOAD,
    MAX_RANGES,
    ConfirmError,
    RangeSet,
    bound,
    confirm_topic,
    covers,
    decode,
    encode,
    is_confirm_topic,
    merge,
    ranges_of,
)

seqs = st.sets(st.integers(1, 400), max_size=120)


@given(seqs)
def test_ranges_of_cover_exactly_the_seqs_and_are_disjoint_and_not_adjacent(s: set[int]) -> None:
    rs = ranges_of(s)
    assert {q for lo, hi in rs for q in range(lo, hi + 1)} == s
    assert all(a[1] + 1 < b[0] for a, b in zip(rs, rs[1:]))
    for q in range(0, 402):
        assert covers(rs, q) == (q in s)


@given(st.lists(st.tuples(st.integers(1, 300), st.integers(0, 20)), max_size=40))
def test_merge_covers_the_union(pairs: list[tuple[int, int]]) -> None:
    ranges = [(lo, lo + w) for lo, w in pairs]
    want = {q for lo, hi in ranges for q in range(lo, hi + 1)}
    got = merge(ranges)
    assert {q for lo, hi in got for q in range(lo, hi + 1)} == want
    assert got == sorted(got)


@given(
    st.dictionaries(st.integers(0, 30), seqs, max_size=12),
    st.dictionaries(st.integers(0, 30), seqs, max_size=12),
)
def test_bound_keeps_the_round_and_never_invents_a_seq(
    stored_s: dict[int, set[int]], round_s: dict[int, set[int]]
) -> None:
    stored = {b: ranges_of(s | round_s.get(b, set())) for b, s in stored_s.items()}
    for b, s in round_s.items():
        stored.setdefault(b, ranges_of(s))
    # the round's islands: the stored islands that hold a seq of the round
    keep = {b: [r for r in stored[b] if any(r[0] <= q <= r[1] for q in s)] for b, s in round_s.items()}
    out = bound(stored, keep)
    assert len(out) <= MAX_BOOTS and all(len(r) <= MAX_RANGES for r in out.values())
    for b, rs in out.items():  # never a seq that is not stored
        assert all(covers(stored[b], q) for lo, hi in rs for q in (lo, hi)) and set(rs) <= set(stored[b])
    for b in sorted(round_s, reverse=True)[:MAX_BOOTS]:  # every seq of the round's newest boots
        assert all(covers(out[b], q) for q in sorted(round_s[b])[-MAX_RANGES:])
    assert decode(encode(out)) == out


def test_bound_prefers_the_highest_islands_and_the_newest_boots() -> None:
    stored = {b: [(10 * i + 1, 10 * i + 5) for i in range(MAX_RANGES + 5)] for b in range(MAX_BOOTS + 3)}
    out = bound(stored, {0: [(1, 5)]})
    assert sorted(out) == [0, *range(4, MAX_BOOTS + 3)]  # the round's boot, then the newest
    assert out[5] == stored[5][-MAX_RANGES:]
    assert out[0][0] == (1, 5) and len(out[0]) == MAX_RANGES


def test_encode_is_compact_and_decodes_back() -> None:
    msg = encode({3: [(1, 500), (502, 900)], 2: [(7, 7)]})
    assert msg == b'{"v":1,"c":[[2,[[7,7]]],[3,[[1,500],[502,900]]]]}'
    assert decode(msg) == {2: [(7, 7)], 3: [(1, 500), (502, 900)]}


@pytest.mark.parametrize(
    ("payload", "why"),
    [
        (b"x" * (MAX_PAYLOAD + 1), "bytes, at most"),
        (b"\xff", "not ASCII JSON"),
        (b"[1]", "expected an object"),
        (b'{"v":2,"c":[]}', "v = '2', expected 1"),
        (b'{"v":true,"c":[]}', "expected 1"),
        (b'{"v":1}', "c is NoneType, expected a list"),
        (b'{"v":1,"c":[[1]]}', "c[0] has 1 entries, expected [boot, ranges]"),
        (b'{"v":1,"c":[[-1,[]]]}', "c[0][0] (boot) = '-1'"),
        (b'{"v":1,"c":[[1.5,[]]]}', "c[0][0] (boot)"),
        (b'{"v":1,"c":[[true,[]]]}', "c[0][0] (boot)"),
        (b'{"v":1,"c":[[1,[]],[1,[]]]}', "boot 1 twice"),
        (b'{"v":1,"c":[[1,[[0,3]]]]}', "c[0][1][0][0] (lo) = '0'"),
        (b'{"v":1,"c":[[1,[[5,3]]]]}', "c[0][1][0][1] (hi) = '3', expected an integer 5.."),
        (b'{"v":1,"c":[[1,[[1,4611686018427387905]]]]}', "(hi)"),
        (b'{"v":1,"c":[[1,[[1,2,3]]]]}', "c[0][1][0] has 3 entries"),
        (b'{"v":1,"c":[[1,[[1]]]]}', "expected [lo, hi]"),
        (b'{"v":1,"c":[[1,{"a":1}]]}', "c[0][1] is dict, expected a list"),
    ],
)
def test_decode_refuses_each_bad_field_by_name(payload: bytes, why: str) -> None:
    with pytest.raises(ConfirmError, match=None) as err:
        decode(payload)
    assert why in str(err.value)


def test_decode_bounds_the_counts() -> None:
    many_boots = json.dumps({"v": 1, "c": [[b, []] for b in range(MAX_BOOTS + 1)]}).encode()
    with pytest.raises(ConfirmError, match=f"at most {MAX_BOOTS} taken"):
        decode(many_boots)
    many_ranges = json.dumps({"v": 1, "c": [[1, [[i, i] for i in range(1, MAX_RANGES + 2)]]]}).encode()
    with pytest.raises(ConfirmError, match=f"at most {MAX_RANGES} taken"):
        decode(many_ranges)


@given(st.binary(max_size=300))
def test_decode_never_raises_anything_but_confirm_error(data: bytes) -> None:
    try:
        out = decode(data)
    except ConfirmError:
        return
    assert all(isinstance(b, int) and all(1 <= lo <= hi for lo, hi in r) for b, r in out.items())


def test_the_topic_is_recognised_only_one_level_under_the_prefix() -> None:
    assert confirm_topic("edge/", "cam-1") == "edge/cam-1/confirm"
    assert is_confirm_topic("edge", "edge/cam-1/confirm")
    assert not is_confirm_topic("edge", "edge/cam-1/detections")
    assert not is_confirm_topic("edge", "other/cam-1/confirm")
    assert not is_confirm_topic("edge", "edge/a/b/confirm")
    assert not is_confirm_topic("edge", "edge/confirm")


def test_the_range_set_merges_and_stays_bounded() -> None:
    rs = RangeSet(limit=3)
    rs.add({1: [(1, 5)]})
    rs.add({1: [(6, 9), (20, 20), (30, 30), (40, 40)]})
    assert rs.covers(1, 40) and rs.covers(1, 20) and not rs.covers(1, 7)  # (1, 9) fell off: lowest
    assert not rs.covers(2, 1)
    for b in range(2, MAX_BOOTS + 3):
        rs.add({b: [(1, 1)]})
    assert len(rs.boots) == MAX_BOOTS and not rs.covers(1, 40)  # the oldest boots go first


def test_topic_edges() -> None:
    assert confirm_topic("/edge/", "cam-1") == "edge/cam-1/confirm"
    assert is_confirm_topic("/edge/", "edge/cam-1/confirm")  # the prefix as the config may give it
    assert not is_confirm_topic("edge", "edge/cam-1/unconfirm")  # the whole last level
    assert not is_confirm_topic("edge", "edge/cam-1/confirm/x")
    assert not is_confirm_topic("edge", "edgecam/x/confirm")
    assert not is_confirm_topic("edge", "xedge/cam-1/confirm")


def _msg(c: object, v: object = 1) -> bytes:
    return json.dumps({"v": v, "c": c}).encode()


def test_the_bounds_are_inclusive_and_named() -> None:
    from edge_agent.core.messages.confirm import MAX_BOOT, MAX_SEQ

    assert decode(_msg([[0, [[1, 1]]], [MAX_BOOT, [[MAX_SEQ, MAX_SEQ]]]])) == {
        0: [(1, 1)],
        MAX_BOOT: [(MAX_SEQ, MAX_SEQ)],
    }
    cases = [
        (
            _msg([[MAX_BOOT + 1, [[1, 1]]]]),
            f"c[0][0] (boot) = '{MAX_BOOT + 1}', expected an integer 0..{MAX_BOOT}",
        ),
        (_msg([[-1, [[1, 1]]]]), "c[0][0] (boot) = '-1'"),
        (_msg([[1, [[0, 1]]]]), f"c[0][1][0][0] (lo) = '0', expected an integer 1..{MAX_SEQ}"),
        (_msg([[1, [[5, 4]]]]), "c[0][1][0][1] (hi) = '4', expected an integer 5.."),
        (_msg([[1, [[1, MAX_SEQ + 1]]]]), "(hi) ="),
        (_msg([[True, [[1, 1]]]]), "(boot) = 'True'"),
        (_msg([[1, [[1, 1]]]], v=True), "v = 'True', expected 1"),
        (_msg([[1, [[1, 1]]]], v=2), "v = '2', expected 1"),
        (_msg([[1]]), "c[0] has 1 entries, expected [boot, ranges]"),
        (_msg([[1, [[1]]]]), "c[0][1][0] has 1 entries, expected [lo, hi]"),
        (_msg([[1, [[1, 1]]], [1, [[2, 2]]]]), "c[1]: boot 1 twice"),
        (_msg("x"), "c is str, expected a list"),
        (b"[1]", "list, expected an object"),
        ("\u00e9".encode(), "not ASCII JSON"),
    ]
    for payload, why in cases:
        with pytest.raises(ConfirmError) as e:
            decode(payload)
        assert why in str(e.value), (payload, str(e.value))


def test_the_size_limit_is_exact() -> None:
    body = _msg([[1, [[1, 1]]]])
    pad = MAX_PAYLOAD - len(body)
    assert decode(body[:-1] + b" " * pad + b"}") == {1: [(1, 1)]}  # exactly MAX_PAYLOAD bytes
    with pytest.raises(ConfirmError, match=f"{MAX_PAYLOAD + 1} bytes, at most {MAX_PAYLOAD}"):
        decode(body[:-1] + b" " * (pad + 1) + b"}")
