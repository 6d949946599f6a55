"""The collector's round when its store fails (app/collector/loop.py), what the mutation run of
issue 36 found unpinned: one error line per failed round / database error / dead letter, the
one-by-one retry's own backoff and stop, a dead letter the database refuses too, and the per-message
guard's rejection lines (one per device, enrolment refusals under one key) and their text. In
process, on SQLite; the subscriber is built, never connected, its acks recorded."""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
from support.collector import Stop

from edge_agent.adapters.collector.subscriber import Inbound
from edge_agent.app.collector import loop as loop_mod
from edge_agent.app.collector.loop import Collector
from edge_agent.core.config.collector import CollectorConfig


def make(tmp_path: Path, **cfg: Any) -> tuple[Collector, list[list[int]]]:
    col = Collector(CollectorConfig(db=f"sqlite:///{tmp_path / 'fleet.db'}", **cfg), None, None)
    col.db.migrate()
    acked: list[list[int]] = []
    col.sub.ack = lambda msgs: acked.append([m.mid for m in msgs]) or len(msgs)  # type: ignore[method-assign,func-returns-value]
    return col, acked


def inbound(seq: int, device: str = "cam-1") -> Inbound:
    body = {"id": f"{device}-{seq}", "seq": seq, "boot": 1, "device_id": device, "ts": 1796000000.0 + seq}
    return Inbound(f"edge/{device}/detections", json.dumps(body).encode(), seq, 1, 1)


class Script:
    """db.store raising the scripted errors in turn (None: the real store), then the real one."""

    def __init__(self, col: Collector, errors: list[BaseException | None]) -> None:
        self.real, self.errors = col.db.store, list(errors)
        self.sizes: list[int] = []

    def __call__(self, records: Any, *a: Any, **k: Any) -> int:
        self.sizes.append(len(records))
        exc = self.errors.pop(0) if self.errors else None
        if exc is not None:
            raise exc
        return self.real(records, *a, **k)


def messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "edge_agent.collector"]


def test_a_round_failing_for_its_data_is_one_line_then_stored_one_by_one(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    col, acked = make(tmp_path)
    col._round([inbound(1)], threading.Event())
    caplog.set_level(logging.WARNING, "edge_agent.collector")
    col.db.store = Script(col, [ValueError("bad \ud800 row " + "x" * 400)])  # type: ignore[method-assign]
    bad = Inbound("edge/cam-1/detections", b"{no", 3, 1, 1)
    col._round([inbound(1), inbound(2), bad], threading.Event())  # 1 again: a duplicate
    assert acked == [[1], [1, 2, 3]] and col.metrics.round_failures == 1
    m = col.metrics
    assert (m.records, m.duplicates, m.rejected, m.messages) == (2, 1, 1, 4)  # one by one, summed
    (line,) = [x for x in messages(caplog) if "a round of" in x]
    assert line.startswith("collector: a round of 3 messages failed (ValueError: bad \\ud800 row xx")
    assert line.endswith("): storing them one by one") and len(line) < 400  # the error cut to 300
    col.db.store.errors = [ValueError("again")]  # type: ignore[attr-defined]
    col._round([inbound(4)], threading.Event())
    assert col.metrics.round_failures == 2  # a counter (_total on /metrics): each failed round adds 1
    assert acked[-1] == [4] and col.metrics.records == 3
    col.db.close()


def test_a_database_error_while_storing_one_by_one_backs_off_and_is_retried(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    col, acked = make(tmp_path)
    caplog.set_level(logging.ERROR, "edge_agent.collector")
    locked = sqlite3.OperationalError("database is locked")
    script = Script(col, [ValueError("bad"), None, locked, locked, None])
    col.db.store = script  # type: ignore[method-assign]
    stop = Stop()
    col._round([inbound(1), inbound(2)], stop)
    assert script.sizes == [2, 1, 1, 1, 1]  # the round, the first alone, the second three times
    assert stop.waits == [1.0, 2.0] and col.metrics.db_errors == 2
    assert acked == [[1, 2]] and col.metrics.records == 2 and col.metrics.dead_letters == 0
    assert (
        messages(caplog)[1:]
        == ["collector: database error (round of 1 messages not acknowledged): database is locked"] * 2
    )
    col.db.close()


def test_a_stop_while_storing_one_by_one_leaves_the_round_unacked(tmp_path: Path) -> None:
    col, acked = make(tmp_path)
    locked = sqlite3.OperationalError("database is locked")
    col.db.store = Script(col, [ValueError("bad"), locked, locked])  # type: ignore[method-assign]
    col._round([inbound(1), inbound(2)], Stop(stop_after=1))
    assert acked == [] and col.metrics.messages == 0
    col.db.close()


def test_a_message_stored_after_a_failure_starts_its_count_afresh(tmp_path: Path) -> None:
    """deliveries_max = 2: one failure, then stored; redelivered later and failing once more, it
    is not dead-lettered at once (its earlier failure was forgotten when it was stored)."""
    col, acked = make(tmp_path, deliveries_max=2)
    script = Script(col, [ValueError("round"), ValueError("one"), None])
    col.db.store = script  # type: ignore[method-assign]
    col._round([inbound(1)], threading.Event())
    assert col.metrics.dead_letters == 0 and col.metrics.records == 1
    script.errors = [ValueError("round"), ValueError("one"), None]
    col._round([inbound(1)], threading.Event())
    assert col.metrics.dead_letters == 0 and acked == [[1], [1]]
    col.db.close()


LONG = "edge/" + "d" * 300 + "/detections"  # refused by the parser: a rejection row to store


def test_a_dead_letter_is_one_line_naming_the_topic_and_the_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    col, acked = make(tmp_path, deliveries_max=1)
    caplog.set_level(logging.ERROR, "edge_agent.collector")
    long_error = ValueError("refused " + "y" * 400)
    col.db.store = Script(col, [ValueError("round"), ValueError("refused"), long_error])  # type: ignore[method-assign]
    col._round([inbound(1), Inbound(LONG, b"{}", 2, 1, 1)], threading.Event())
    assert acked == [[1, 2]] and col.metrics.dead_letters == 2
    assert [x for x in messages(caplog) if "dead letter after" in x] == [
        "collector: dead letter after 1 failed stores: edge/cam-1/detections (ValueError: refused)",
        f"collector: dead letter after 1 failed stores: {LONG[:200]} ({('ValueError: ' + str(long_error))[:300]})",
    ]
    rows = col.db._x("SELECT topic, reason FROM dead_letters ORDER BY length(topic)").fetchall()
    assert [tuple(r) for r in rows] == [
        ("edge/cam-1/detections", "ValueError: refused"),
        (LONG, f"ValueError: {long_error}"[:300]),  # the reason cut to 300
    ]
    col.db.close()


def test_a_dead_letter_the_database_refuses_too_is_logged_and_acked(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    col, acked = make(tmp_path, deliveries_max=1)
    caplog.set_level(logging.ERROR, "edge_agent.collector")
    col.db.store = Script(col, [ValueError("round"), ValueError("refused")])  # type: ignore[method-assign]

    def refuse(*a: Any) -> None:
        raise ValueError("no room")

    col.db.dead_letter = refuse  # type: ignore[method-assign,assignment]
    col._round([Inbound(LONG, b"{}", 1, 1, 1)], threading.Event())
    assert acked == [[1]] and col.metrics.dead_letters == 1  # never a crash loop
    assert f"collector: could not dead-letter {LONG[:200]}: no room" in messages(caplog)
    col.db.close()


def test_a_dead_letter_waits_out_a_database_error_or_a_stop(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    col, acked = make(tmp_path, deliveries_max=1)
    caplog.set_level(logging.ERROR, "edge_agent.collector")
    col.db.store = Script(col, [ValueError("round"), ValueError("refused")])  # type: ignore[method-assign]
    real = col.db.dead_letter
    fails = [sqlite3.OperationalError("database is locked")] * 2

    def flaky(*a: Any) -> None:
        if fails:
            raise fails.pop()
        real(*a)

    col.db.dead_letter = flaky  # type: ignore[method-assign,assignment]
    stop = Stop()
    col._round([inbound(1)], stop)
    assert stop.waits == [1.0, 2.0] and acked == [[1]] and col.metrics.dead_letters == 1
    assert [x for x in messages(caplog) if "database error" in x] == [
        "collector: database error (round of 1 messages not acknowledged): database is locked"
    ] * 2
    assert col.db._x("SELECT COUNT(*) FROM dead_letters").fetchone()[0] == 1
    # stopped while the database is locked: neither counted nor acked (the broker sends it again)
    col.db.store = Script(col, [ValueError("round"), ValueError("refused")])  # type: ignore[method-assign]
    fails.extend([sqlite3.OperationalError("database is locked")] * 3)
    col._round([inbound(2)], Stop(stop_after=1))
    assert acked == [[1]] and col.metrics.dead_letters == 1
    col.db.close()


def test_rejections_are_logged_per_device_and_enrolment_refusals_under_one_key(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "enrolled.json"
    path.write_text(json.dumps({"version": 1, "devices": {"cam-1": {}}}))
    col, _ = make(tmp_path, log_every=2, enrolled_file=str(path))
    caplog.set_level(logging.WARNING, "edge_agent.collector")
    bad = [Inbound(f"edge/{d}/detections", b"{no", i, 1, 1) for i, d in enumerate(["cam-1", "cam-2"] * 3)]
    col._round(bad, threading.Event())
    lines = messages(caplog)
    # each device's first refusal, then every 2nd of that device, counted under its own id
    assert [x.split(": ")[2] for x in lines] == ["edge/cam-1/detections", "edge/cam-2/detections"] * 2
    assert lines[-1].endswith("(2 refused for 'cam-2' so far; every 2th is logged)")
    caplog.clear()
    col._round([inbound(1, f"cam-x{i}") for i in range(5)], threading.Event())
    lines = messages(caplog)  # five devices not enrolled: one key, not one line per made-up id
    assert len(lines) == 3 and "(4 refused for 'new device ids' so far" in lines[-1]
    assert lines[0].startswith("collector: rejected: edge/cam-x0/detections: device 'cam-x0' is not enrolled")
    caplog.clear()
    col._round([Inbound("edge/cam-9", b"{", 9, 1, 1)] * 2, threading.Event())  # one level: the id
    assert "(2 refused for 'cam-9' so far" in messages(caplog)[-1]
    caplog.clear()
    col._round([Inbound("nolevels", b"{", 9, 1, 1)] * 2, threading.Event())  # no level: the topic
    assert "(2 refused for 'nolevels' so far" in messages(caplog)[-1]
    col.db.close()


def test_long_topics_are_cut_in_the_rejection_reason(tmp_path: Path) -> None:
    col, _ = make(tmp_path, message_max_kib=64)
    topic = "edge/" + "d" * 300 + "/detections"
    col._round([Inbound(topic, b"", 1, 1, 1, size=70000)], threading.Event())
    ((reason,),) = col.db._x("SELECT reason FROM rejected").fetchall()
    assert reason == f"{topic[:200]}: 70000 bytes, at most 65536 taken (message_max_kib)"
    col.db.close()


def test_a_parser_bug_with_unencodable_text_is_still_one_rejection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    col, acked = make(tmp_path)

    def broken(*a: object) -> None:
        raise RuntimeError("bad \ud800\x00 text")

    monkeypatch.setattr(loop_mod, "parse", broken)
    col._round([inbound(1)], threading.Event())
    assert acked == [[1]] and col.metrics.round_failures == 0
    ((reason,),) = col.db._x("SELECT reason FROM rejected").fetchall()
    assert reason == "unexpected RuntimeError: bad \\ud800\\x00 text"
    col.db.close()
