"""Which decoder a body takes (core.messages.body): the C float parser unless a *number* may
overflow. A model hash's ``e117`` inside a string is not a number, and sent every such body to the
Python float hook (a third of a bench round's parse); a real exponent after any of JSON's
separators still is."""

from __future__ import annotations

import json
from typing import Any

import pytest

from edge_agent.core.messages import body, fleet

NOW = 1796000000.0
TOPIC = "edge/cam-1/detections"


class Refusing:
    def decode(self, text: str) -> Any:
        raise AssertionError(f"the checking decoder took {text!r}")


def test_a_string_holding_digit_e_digits_takes_the_fast_decoder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(body, "_FINITE", Refusing())
    for s in ("yolov8n-int8.onnx@d6e1178f", "x1e400", "a-1E+999", "6e123", "v.5e-100"):
        sent = json.dumps({"seq": 7, "boot": 2, "model": s}).encode()
        assert fleet.parse("edge", TOPIC, sent, NOW).records[0].body == sent.decode(), s


@pytest.mark.parametrize("before", [":", ": ", ":\t", ":\n", ":\r", ", ", "["])
@pytest.mark.parametrize("number", ["1e400", "-1e400", "1.5E+309", "0.5e-999", "12e0400"])
def test_a_number_with_a_3_digit_exponent_after_any_separator_is_checked(before: str, number: str) -> None:
    if before.startswith(":"):
        sent = ('{"seq": 7, "boot": 2, "x"' + before + number + "}").encode()
    else:  # inside an array: after its "[" or after ", "
        sent = (
            '{"seq": 7, "boot": 2, "x": [' + ("0" + before if before == ", " else "") + number + "]}"
        ).encode()
    if float(number) in (float("inf"), float("-inf")):
        with pytest.raises(fleet.IngestError, match="not storable JSON"):
            fleet.parse("edge", TOPIC, sent, NOW)
    else:  # an underflow reads as 0.0: finite, stored as sent (by the checking decoder)
        assert fleet.parse("edge", TOPIC, sent, NOW).records[0].body == sent.decode()


def test_a_top_level_number_is_checked_too() -> None:
    assert body._big_exponent(b"1e400".translate(body._FLAT))
    assert body._big_exponent(b"-1E+400".translate(body._FLAT))
    assert not body._big_exponent(b"e400".translate(body._FLAT))
    assert not body._big_exponent(b'"a1e400"'.translate(body._FLAT))


def test_many_short_numbers_take_the_fast_decoder(monkeypatch: pytest.MonkeyPatch) -> None:
    """300 digits, but no run of 210: no number can overflow (the run test, not the count alone)."""
    monkeypatch.setattr(body, "_FINITE", Refusing())
    sent = json.dumps({"seq": 7, "boot": 2, "pad": [12345] * 60}).encode()
    assert fleet.parse("edge", TOPIC, sent, NOW).records[0].body == sent.decode()


def test_a_number_before_a_hash_is_found_too() -> None:
    """Every occurrence is looked at, first to last: a real 1e400 before a model hash's e117."""
    for sent in (
        b'{"seq": 7, "boot": 2, "x": 1e400, "m": "d6e117"}',
        b'{"seq": 7, "boot": 2, "m": "d6e117", "x": 1e400}',
    ):
        with pytest.raises(fleet.IngestError, match="not storable JSON"):
            fleet.parse("edge", TOPIC, sent, NOW)
    assert body._big_exponent(b'[1e400, "d6e117"]'.translate(body._FLAT))
    assert body._big_exponent(b'["d6e117", "a1e400", 1e400]'.translate(body._FLAT))
