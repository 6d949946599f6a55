"""Expiry and a clock that was not set when the rows were made (no RTC battery, no NTP yet)."""

from __future__ import annotations

import json
import types
from pathlib import Path

import pytest
from support.outbox import TOPIC, big_limits

from edge_agent.adapters.outbox import outbox as outbox_mod
from edge_agent.adapters.outbox.outbox import Outbox
from edge_agent.core.queue.policy import CLOCK_FLOOR

JETPACK4_BOOT_CLOCK = 1517443200.0  # 2018-02-01: systemd 237's build date, where such a board's clock starts


def _put_at(ob: Outbox, monkeypatch: pytest.MonkeyPatch, when: float, n: int, start: int = 0) -> None:
    real_time = outbox_mod.time
    with monkeypatch.context() as m:
        m.setattr(outbox_mod, "time", types.SimpleNamespace(time=lambda: when, monotonic=real_time.monotonic))
        for i in range(start, start + n):
            ob.put(TOPIC, {"n": i})
        ob.flush()


def test_a_backlog_made_before_the_clock_was_set_survives_the_ntp_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Weeks offline on a board that booted in 2018: when NTP steps the clock to today, those rows
    looked eight years old and max_age_days expired the whole backlog at once."""
    with Outbox(tmp_path / "q.db", big_limits(max_age_s=90 * 86400), flush_interval_s=60) as ob:
        _put_at(ob, monkeypatch, JETPACK4_BOOT_CLOCK, 30)
        assert ob.expire() == 0
        st = ob.stats()
        assert (st["pending"], st["expired"], st["dropped"]) == (30, 0, 0)


def test_the_floor_is_a_boundary_rows_from_it_on_expire_as_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Outbox(tmp_path / "q.db", big_limits(max_age_s=60), flush_interval_s=60) as ob:
        _put_at(ob, monkeypatch, CLOCK_FLOOR - 1, 3)  # unknown age: kept
        _put_at(ob, monkeypatch, CLOCK_FLOOR, 4, start=3)  # known, and far older than 60 s
        ob.put(TOPIC, {"n": 99})  # made now
        ob.flush()
        assert ob.expire() == 4
        st = ob.stats()
        assert (st["pending"], st["expired"]) == (4, 4)
        kept = sorted(json.loads(m.payload)["n"] for m in ob.claim(10))
        assert kept == [0, 1, 2, 99]
