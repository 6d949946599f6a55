"""The refusal-log throttle: the first line, then every Nth with the running count, keys bounded."""

from __future__ import annotations

import pytest

from edge_agent.core.messages.log_throttle import LogThrottle


def test_first_then_every_nth_with_the_count() -> None:
    t = LogThrottle(every=10)
    lines = [t.line("dev", f"bad {i}") for i in range(1, 31)]
    written = [(i + 1, s) for i, s in enumerate(lines) if s is not None]
    assert [i for i, _ in written] == [1, 10, 20, 30]
    assert written[0][1] == "bad 1"
    assert "20 refused for 'dev'" in written[2][1]
    assert t.total == 30 and t.count("dev") == 30


def test_keys_are_counted_apart() -> None:
    t = LogThrottle(every=5)
    assert t.line("a", "x") == "x"
    assert t.line("b", "y") == "y"
    assert t.line("a", "x") is None
    assert t.count("a") == 2 and t.count("b") == 1


def test_keys_are_bounded_oldest_forgotten() -> None:
    t = LogThrottle(every=100, max_keys=3)
    for k in "abcd":
        t.line(k, k)
    assert t.count("a") == 0 and t.count("d") == 1
    assert len(t._seen) == 3
    assert t.line("a", "again") == "again"  # forgotten: logged as a first refusal


def test_a_recent_key_stays() -> None:
    t = LogThrottle(every=100, max_keys=2)
    t.line("a", "a")
    t.line("b", "b")
    t.line("a", "a")  # a is now the newest
    t.line("c", "c")  # b goes
    assert t.count("a") == 2 and t.count("b") == 0


@pytest.mark.parametrize("every,keys", [(0, 1), (1, 0)])
def test_bad_settings_refused(every: int, keys: int) -> None:
    with pytest.raises(ValueError):
        LogThrottle(every, keys)


def test_the_defaults_and_the_smallest_settings() -> None:
    t = LogThrottle()
    assert (t.every, t.max_keys) == (100, 1024)
    lines = [t.line("k", "x") for _ in range(200)]
    assert [i + 1 for i, s in enumerate(lines) if s is not None] == [1, 100, 200]
    one = LogThrottle(every=1, max_keys=1)  # every refusal logged, one key remembered
    said = "x ({} refused for 'a' so far; every 1th is logged)"
    assert [one.line("a", "x") for _ in range(3)] == ["x", said.format(2), said.format(3)]
    one.line("b", "y")
    assert one.count("a") == 0 and one.count("b") == 1


def test_a_long_key_is_cut_in_the_line() -> None:
    t = LogThrottle(every=2)
    key = "k" * 500
    t.line(key, "x")
    line = t.line(key, "x")
    assert line is not None and repr("k" * 80) in line and "k" * 81 not in line
