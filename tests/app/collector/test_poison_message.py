"""A message the parser chokes on is rejected and acknowledged, never the end of the collector.

Were it to raise out of the round, the collector would exit without an ack, and the broker would
hand the same message to the restarted collector (or the group's next member) for ever.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from edge_agent.adapters.collector.db import CollectorDb
from edge_agent.adapters.collector.subscriber import Inbound
from edge_agent.app.collector import loop as collector_mod
from edge_agent.app.collector.loop import Collector
from edge_agent.core.config.collector import parse_collector_config


def _inbound(seq: int, device: str = "cam-1") -> Inbound:
    body = {"id": f"r{seq}", "seq": seq, "boot": 1, "device_id": device, "ts": 1796000000.0 + seq}
    return Inbound(f"edge/{device}/detections", json.dumps(body).encode(), seq, 1, 1)


def test_a_parser_error_is_a_rejection_the_round_is_stored_and_everything_acked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = collector_mod.parse

    def parse(prefix: str, topic: str, payload: bytes, received: float) -> object:
        if topic.startswith("edge/poison/"):
            raise RecursionError("a bug in a parser")
        return real(prefix, topic, payload, received)

    monkeypatch.setattr(collector_mod, "parse", parse)
    url = f"sqlite:///{tmp_path / 'c.db'}"
    cfg = parse_collector_config("", "flags", {"db": url, "broker": "mqtt://127.0.0.1:1", "client_id": "t"})
    col = Collector(cfg, None, None)  # the subscriber is built, never connected
    col.db.migrate()
    acked: list[Inbound] = []
    col.sub.ack = lambda msgs: acked.extend(msgs) or len(msgs)  # type: ignore[method-assign,func-returns-value]
    batch = [_inbound(1), _inbound(7, device="poison"), _inbound(2)]
    col._round(batch, threading.Event())
    col.db.close()
    assert acked == batch
    assert (col.metrics.messages, col.metrics.records, col.metrics.rejected) == (3, 2, 1)
    db = CollectorDb(url)
    try:
        assert db._x("SELECT COUNT(*) FROM messages").fetchone()[0] == 2
        (topic, reason), *more = db._x("SELECT topic, reason FROM rejected").fetchall()
    finally:
        db.close()
    assert more == [] and topic == "edge/poison/detections"
    assert reason == "unexpected RecursionError: a bug in a parser"
