"""Host probes: clock state from a fake root (and cached), per-thread priority."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from edge_agent.adapters import system


def test_timesyncd_flag_means_synchronised_and_is_cached(tmp_path: Path) -> None:
    flag = tmp_path / "run/systemd/timesync/synchronized"
    flag.parent.mkdir(parents=True)
    flag.touch()
    assert system.clock_synchronised(tmp_path) is True
    flag.unlink()
    # cached for a few seconds: the loop asks per frame, the kernel is asked at most every 5 s
    assert system.clock_synchronised(tmp_path) is True
    system._clock_cache.clear()
    assert system.clock_synchronised(tmp_path) in (True, False, None)  # now from adjtimex


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
