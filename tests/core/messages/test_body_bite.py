"""core/messages/body.py's safe_text (the rejected table's and the log's text): bounded, NULs
shown, lone surrogates escaped, anything not ASCII replaced, so it always encodes."""

from __future__ import annotations

from edge_agent.core.messages.body import safe_text


def test_safe_text_is_bounded_shows_nuls_and_always_encodes() -> None:
    assert safe_text("plain/topic") == "plain/topic"
    assert len(safe_text("x" * 2000)) == 1024 and safe_text("abcdef", 3) == "abc"
    assert safe_text("a\x00b") == "a\\x00b"
    assert safe_text("\udcff") == "\\udcff"  # a lone surrogate from a non-UTF-8 topic
    assert safe_text("caf\u00e9") == "caf\ufffd\ufffd"  # each UTF-8 byte of a non-ASCII character
    assert safe_text("a\x00b", 2) == "a\\x00"  # bounded before the NUL is shown
    for text in ("\x00\udcff\u00e9", "x" * 5000):
        safe_text(text).encode("utf-8")
