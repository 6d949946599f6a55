"""The collector's two threads (app.collector.overlap): jobs done in order on the writer, at most one
waiting, a writer's error raised in the caller, a waiting job dropped (never half done) at close."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from edge_agent.app.collector.overlap import Overlap

REPO = Path(__file__).resolve().parents[3]


def _env() -> dict[str, str]:
    """The child imports this tree's edge_agent (and a mutant's, under the mutation tool)."""
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    return dict(os.environ, PYTHONPATH=path)


def _blocked(ov_work: list[int]) -> tuple[Overlap[int], threading.Event, threading.Event]:
    """An Overlap whose writer holds job 1 until the returned gate is set."""
    gate, started = threading.Event(), threading.Event()

    def work(j: int) -> None:
        started.set()
        gate.wait(10)
        ov_work.append(j)

    ov: Overlap[int] = Overlap(work)
    ov.start()
    return ov, gate, started


def test_jobs_are_done_in_order_on_another_thread_and_idle_runs_after_each() -> None:
    done: list[tuple[int, str]] = []
    idles: list[int] = []
    ov: Overlap[int] = Overlap(
        lambda j: done.append((j, threading.current_thread().name)), lambda: idles.append(len(done)), 30.0
    )
    ov.start()
    for j in range(20):
        ov.put(j)
    assert ov.wait_idle(10)
    assert [j for j, _ in done] == list(range(20))
    assert {name for _, name in done} == {"collector-writer"}
    assert idles and idles[-1] == 20  # the periodic work also follows the last job
    assert not ov.busy()
    ov.close()


def test_idle_runs_every_idle_s_without_a_job() -> None:
    ticks = threading.Semaphore(0)
    ov: Overlap[int] = Overlap(lambda j: None, ticks.release, 0.01)
    ov.start()
    assert all(ticks.acquire(timeout=5) for _ in range(3))
    ov.close()


def test_at_most_one_job_waits_while_the_writer_works() -> None:
    done: list[int] = []
    ov, gate, started = _blocked(done)
    ov.put(1)
    assert started.wait(5)
    ov.put(2)  # waits in the slot
    third = threading.Thread(target=ov.put, args=(3,))
    third.start()
    third.join(0.3)
    assert third.is_alive()  # blocked: two rounds unacknowledged at most
    assert ov.busy() and done == []
    gate.set()
    third.join(5)
    assert ov.wait_idle(5) and done == [1, 2, 3]
    ov.close()


def test_a_put_blocked_when_stop_is_set_hands_nothing_over() -> None:
    gate = threading.Event()
    done: list[int] = []

    def work(j: int) -> None:
        gate.wait(10)
        done.append(j)

    ov: Overlap[int] = Overlap(work)
    ov.start()
    stop = threading.Event()
    assert ov.put(1, stop) and ov.put(2, stop)  # one in hand, one waiting (or both taken)
    threading.Timer(0.3, stop.set).start()
    ok = ov.put(3, stop)
    gate.set()
    ov.close()
    assert not ok and 3 not in done


def test_close_drops_the_waiting_job_and_lets_the_one_in_hand_finish() -> None:
    done: list[int] = []
    ov, gate, started = _blocked(done)
    ov.put(1)
    assert started.wait(5)
    ov.put(2)
    threading.Timer(0.2, gate.set).start()
    ov.close()
    assert done == [1]  # 2 never worked on: in the collector, never acked, so redelivered
    assert not ov.busy()


def test_a_writer_error_is_raised_in_the_callers_thread() -> None:
    def work(j: int) -> None:
        if j == 2:
            raise RuntimeError("disk on fire")

    ov: Overlap[int] = Overlap(work)
    ov.start()
    ov.put(1)
    ov.put(2)
    with pytest.raises(RuntimeError, match="disk on fire"):
        ov.wait_idle(5)
    with pytest.raises(RuntimeError, match="disk on fire"):
        ov.check()
    with pytest.raises(RuntimeError, match="disk on fire"):
        ov.put(3)  # a dead writer never takes it: said, not waited on for ever
    with pytest.raises(RuntimeError, match="disk on fire"):
        ov.close()


def test_an_error_in_the_periodic_work_is_raised_too() -> None:
    def idle() -> None:
        raise OSError("maintenance failed")

    ov: Overlap[int] = Overlap(lambda j: None, idle, 0.01)
    ov.start()
    with pytest.raises(OSError, match="maintenance failed"):
        for _ in range(500):  # the caller's loop asks between rounds, no job needed
            ov.check()
            threading.Event().wait(0.01)
    with pytest.raises(OSError, match="maintenance failed"):
        ov.close()


def test_busy_while_the_one_job_is_in_hand_and_wait_idle_times_out_meanwhile() -> None:
    done: list[int] = []
    ov, gate, started = _blocked(done)
    ov.put(1)
    assert started.wait(5)
    assert ov.busy()  # one job in hand, none waiting: still busy (leaving must wait for it)
    assert ov.wait_idle(timeout=0.1) is False  # the timeout is kept, not waited out for ever
    gate.set()
    assert ov.wait_idle(timeout=5) is True and done == [1]
    assert not ov.busy()
    ov.close()


def test_a_stopped_put_leaves_the_count_of_jobs_as_it_was() -> None:
    done: list[int] = []
    ov, gate, started = _blocked(done)
    stop = threading.Event()
    ov.put(1, stop)
    assert started.wait(5)
    ov.put(2, stop)  # waits in the slot: the next put would block
    stop.set()
    assert ov.put(3, stop) is False
    gate.set()
    assert ov.wait_idle(timeout=5) is True  # 2 jobs counted, 2 done: idle again
    assert not ov.busy() and done == [1, 2]
    ov.close()


def test_close_counts_a_dropped_job_as_done_once() -> None:
    """A job waiting while the writer is in its periodic work is dropped: nothing is busy after."""
    in_idle, release = threading.Event(), threading.Event()
    done: list[int] = []

    def idle() -> None:
        in_idle.set()
        release.wait(10)

    ov: Overlap[int] = Overlap(done.append, idle, 0.01)
    ov.start()
    assert in_idle.wait(5)
    ov.put(1)  # the writer is in idle(): the job waits in the slot
    closer = threading.Thread(target=ov.close)
    closer.start()
    threading.Timer(0.3, release.set).start()
    closer.join(10)
    assert not closer.is_alive() and done == []
    assert not ov.busy()
    assert ov.wait_idle(timeout=1) is True  # the count is 0, not below it


def test_a_writer_stuck_in_its_work_does_not_keep_the_process_alive(tmp_path: Path) -> None:
    """The writer is a daemon thread: a collector whose database hangs still exits when its main
    thread ends (the broker redelivers the round it held)."""
    ov: Overlap[int] = Overlap(lambda j: None)
    ov.start()
    writers = [t for t in threading.enumerate() if t.name == "collector-writer"]
    assert writers and all(t.daemon for t in writers)
    ov.close()
    script = tmp_path / "stuck.py"
    script.write_text(
        "import threading\n"
        "from edge_agent.app.collector.overlap import Overlap\n"
        "ov = Overlap(lambda j: threading.Event().wait())\n"
        "ov.start()\n"
        "ov.put(1)\n"
        "print('main done', flush=True)\n"
    )
    out = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=30, env=_env()
    )
    assert out.returncode == 0 and "main done" in out.stdout
