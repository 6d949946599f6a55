"""MOTChallenge detection files line by line: comments, empty boxes, the class column, the bounds
at their edges and the one-line error for each bad line."""

from __future__ import annotations

import pytest

from edge_agent.core.objects.mot import MAX_COORD, MAX_FRAME, parse_detections
from edge_agent.errors import EdgeAgentError


def test_comments_empty_boxes_and_the_lines_after_them() -> None:
    lines = [
        "# frame,id,x,y,w,h,conf",
        "1,-1,0,0,0,10,0.9",  # no width: skipped, not an error
        "1,-1,0,0,10,0,0.9",  # no height
        "1,-1,5,6,0.5,1,0.9",  # thin but real
        "2,-1,5,6,1,1,0.8",
        f"{MAX_FRAME},-1,{MAX_COORD:g},0,1,1,0.5",
    ]
    got = parse_detections(lines, "d.txt")
    assert got == {
        1: [(5.0, 6.0, 5.5, 7.0, 0.9, 0)],
        2: [(5.0, 6.0, 6.0, 7.0, 0.8, 0)],
        MAX_FRAME: [(MAX_COORD, 0.0, MAX_COORD + 1, 1.0, 0.5, 0)],
    }


@pytest.mark.parametrize(
    ("col", "cls"),
    [("2", 2), ("0", 0), ("999999", 999_999), ("1000000", 0), ("-1", 0), ("2.5", 0), ("car", 0), ("3.0", 3)],
)
def test_the_class_column(col: str, cls: int) -> None:
    assert parse_detections([f"1,-1,0,0,5,5,0.9,{col}"], "d")[1][0][5] == cls


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("0,-1,0,0,5,5,0.9", "d.txt:1: frame '0' is not a whole number from 1 to 10000000"),
        (
            f"{MAX_FRAME + 1},-1,0,0,5,5,0.9",
            "d.txt:1: frame '10000001' is not a whole number from 1 to 10000000",
        ),
        ("1.5,-1,0,0,5,5,0.9", "d.txt:1: frame '1.5' is not a whole number from 1 to 10000000"),
        (
            "1,-1,2000000,0,5,5,0.9",
            "d.txt:1: a value is not finite or beyond 1e+06: '1,-1,2000000,0,5,5,0.9'",
        ),
        (
            "1,-1,1000001,0,5,5,0.9",
            "d.txt:1: a value is not finite or beyond 1e+06: '1,-1,1000001,0,5,5,0.9'",
        ),
        ("1,-1,0,inf,5,5,0.9", "d.txt:1: a value is not finite or beyond 1e+06: '1,-1,0,inf,5,5,0.9'"),
        ("1,-1,0,0,5,5", "d.txt:1: 6 columns, expected at least 7 (frame,id,x,y,w,h,conf)"),
    ],
)
def test_a_bad_line_is_named(line: str, message: str) -> None:
    with pytest.raises(EdgeAgentError) as exc:
        parse_detections([line], "d.txt")
    assert str(exc.value) == message


def test_a_long_bad_line_is_quoted_to_80_characters() -> None:
    line = "1,-1,x," + "9" * 100 + ",5,5,0.9"
    with pytest.raises(EdgeAgentError) as exc:
        parse_detections(["", line], "d.txt")
    assert str(exc.value) == f"d.txt:2: {line[:80]!r} is not numbers (frame,id,x,y,w,h,conf)"
    big = "1,-1,0,0,5,5,0.9," + "0" * 80 + ",2e6"
    far = "1,-1,2e6,0,5,5,0.9" + ",0" * 40
    with pytest.raises(EdgeAgentError) as exc:
        parse_detections([far], "d.txt")
    assert str(exc.value) == f"d.txt:1: a value is not finite or beyond 1e+06: {far[:80]!r}"
    assert parse_detections([big], "d.txt")[1][0][5] == 0  # columns past the class are ignored
