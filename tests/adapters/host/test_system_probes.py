"""Host probes: clock state from a fake root (and cached), per-thread priority."""

from __future__ import annotations

import ctypes
import os
import threading
import time
from pathlib import Path
from typing import Optional

import pytest

from edge_agent.adapters.host import probes as system


def test_timesyncd_flag_means_synchronised_and_is_cached(tmp_path: Path) -> None:
    flag = tmp_path / "run/systemd/timesync/synchronized"
    flag.parent.mkdir(parents=True)
    flag.touch()
    assert system.clock_synchronised(tmp_path) is True
    flag.unlink()
    # cached for a few seconds: the loop asks per frame, the kernel is asked at most every 5 s
    assert system.clock_synchronised(tmp_path) is True
    system._clock_cache.clear()
    # now from adjtimex: the kernel's own answer, asked here directly (5 = TIME_ERROR: not synced)
    assert system.clock_synchronised(tmp_path) is kernel_clock_synchronised()


def kernel_clock_synchronised() -> Optional[bool]:
    state = int(ctypes.CDLL(None, use_errno=True).adjtimex(ctypes.create_string_buffer(512)))
    return None if state < 0 else state != 5


def test_a_clock_before_the_plausible_year_is_not_synchronised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A board without an RTC boots in 1970: whatever the flag or the kernel say, not synced."""
    (tmp_path / "run/systemd/timesync").mkdir(parents=True)
    (tmp_path / "run/systemd/timesync/synchronized").touch()
    system._clock_cache.clear()
    epoch = time.gmtime(0)
    monkeypatch.setattr(system.time, "gmtime", lambda *a: epoch)
    assert system.clock_synchronised(tmp_path) is False
    system._clock_cache.clear()


def test_lower_thread_priority_affects_only_the_calling_thread() -> None:
    main_before = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    seen: dict[str, int] = {}

    def worker() -> None:
        tid = threading.get_native_id()
        before = os.getpriority(os.PRIO_PROCESS, tid)
        assert system.lower_thread_priority(5)
        seen["delta"] = os.getpriority(os.PRIO_PROCESS, tid) - before

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert seen["delta"] == min(5, 19 - main_before)
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == main_before
