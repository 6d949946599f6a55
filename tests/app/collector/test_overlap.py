"""The collector's two threads (app.collector.overlap): jobs done in order on the writer, at most one
waiting, a writer's error raised in the caller, a waiting job dropped (never half done) at close."""

from __future__ import annotations

import threading

import pytest

from edge_agent.app.collector.overlap import Overlap


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
    gate = threading.Event()
    started = threading.Event()
    done: list[int] = []

    def work(j: int) -> None:
        started.set()
        gate.wait(10)
        done.append(j)

    ov: Overlap[int] = Overlap(work)
    ov.start()
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
    gate = threading.Event()
    started = threading.Event()
    done: list[int] = []

    def work(j: int) -> None:
        started.set()
        gate.wait(10)
        done.append(j)

    ov: Overlap[int] = Overlap(work)
    ov.start()
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
