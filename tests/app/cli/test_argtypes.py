"""The CLI's number types (app.argtypes): any text either gives a number inside the stated range or
one argparse error naming it, never NaN and never another exception (hypothesis over any text and
over the floats' edges)."""

from __future__ import annotations

import argparse
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from edge_agent.app.cli.argtypes import (
    non_negative_float,
    non_negative_int,
    positive_float,
    positive_int,
    unit_interval,
)

TYPES = {
    "unit_interval": (unit_interval, 0.0, 1.0),
    "non_negative_float": (non_negative_float, 0.0, math.inf),
    "positive_float": (positive_float, 1e-9, math.inf),
    "positive_int": (positive_int, 1, 2**31 - 1),
    "non_negative_int": (non_negative_int, 0, 2**31 - 1),
}
EDGES = [
    "nan",
    "NaN",
    "-nan",
    "inf",
    "-inf",
    "0",
    "-0",
    "1",
    "1e-10",
    "2147483647",
    "2147483648",
    "-1",
    "1.0",
    "0x10",
    "",
]


def check(name: str, text: str) -> None:
    parse, lo, hi = TYPES[name]
    try:
        value = parse(text)
    except argparse.ArgumentTypeError as exc:
        assert repr(text) in str(exc) or text in str(exc)
        return
    assert not (isinstance(value, float) and math.isnan(value)), f"{name}({text!r}) gave NaN"
    assert lo <= value <= hi


@pytest.mark.parametrize("name", sorted(TYPES))
@pytest.mark.parametrize("text", EDGES)
def test_the_edges_are_in_range_or_one_error(name: str, text: str) -> None:
    check(name, text)


@pytest.mark.parametrize("name", sorted(TYPES))
@given(text=st.one_of(st.text(max_size=20), st.floats().map(repr), st.integers().map(str)))
def test_any_text_is_in_range_or_one_error(name: str, text: str) -> None:
    check(name, text)


def test_nan_is_refused_with_the_range_and_the_bounds_are_included() -> None:
    with pytest.raises(
        argparse.ArgumentTypeError, match=r"nan is out of range: expected a number from 0 to 1"
    ):
        unit_interval("nan")
    assert (unit_interval("0"), unit_interval("1"), non_negative_int("0"), positive_int("1")) == (
        0.0,
        1.0,
        0,
        1,
    )
    assert positive_int("2147483647") == 2**31 - 1
    for parse, text in ((positive_int, "0"), (positive_int, "2147483648"), (unit_interval, "1.0000001")):
        with pytest.raises(argparse.ArgumentTypeError, match="out of range"):
            parse(text)
