"""core/messages/body.py's safe_text (the rejected table's and the log's text): bounded, NULs
shown, lone surrogates escaped, anything not ASCII replaced, so it always encodes."""

from __future__ import annotations

import pytest

from edge_agent.core.messages.body import MAX_DEPTH, IngestError, depth, loads, loads_as_sent, safe_text


def test_safe_text_is_bounded_shows_nuls_and_always_encodes() -> None:
    assert safe_text("plain/topic") == "plain/topic"
    assert len(safe_text("x" * 2000)) == 1024 and safe_text("abcdef", 3) == "abc"
    assert safe_text("a\x00b") == "a\\x00b"
    assert safe_text("\udcff") == "\\udcff"  # a lone surrogate from a non-UTF-8 topic
    assert safe_text("caf\u00e9") == "caf\ufffd\ufffd"  # each UTF-8 byte of a non-ASCII character
    assert safe_text("a\x00b", 2) == "a\\x00"  # bounded before the NUL is shown
    for text in ("\x00\udcff\u00e9", "x" * 5000):
        safe_text(text).encode("utf-8")


def test_depth_counts_containers_only() -> None:
    assert depth(1) == 0 and depth("x") == 0 and depth(None) == 0
    assert depth([]) == 1 and depth({}) == 1 and depth([[]]) == 2
    assert depth({"a": [{"b": 1}], "c": [1, 2]}) == 3
    assert depth([[[[]]], []]) == 4  # the deepest branch, not the first or the sum


@pytest.mark.parametrize("open_, close", [("[", "]"), ('{"a":', "}")])
def test_the_checking_path_bounds_the_nesting_too(open_: str, close: str) -> None:
    """A payload with a \\u escape (or not UTF-8) takes json.loads; its nesting is bounded alike."""

    def nested(n: int) -> bytes:
        return (open_ * n + '"\\u0041"' + close * n).encode()

    assert loads(nested(MAX_DEPTH), "t") is not None
    with pytest.raises(IngestError, match=f"^t: JSON nested deeper than {MAX_DEPTH}$"):
        loads(nested(MAX_DEPTH + 1), "t")
    with pytest.raises(IngestError, match="nested deeper"):
        loads_as_sent(nested(MAX_DEPTH + 1), "t")


def test_a_refusal_names_what_the_decoder_said() -> None:
    with pytest.raises(IngestError, match=r"^t: not JSON \(Expecting"):
        loads(b'{"a": \\u', "t")
    with pytest.raises(IngestError, match=r"^t: not JSON \(.*utf-8"):
        loads(b'{"a": "\xff"}', "t")
