"""Fixtures for the outbox/sync tests: a real mosquitto per test, TLS material per session."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from edge_agent.adapters.outbox.outbox import Outbox
from support.mqtt import Broker, Collector
from support.outbox import big_limits


@pytest.fixture
def collector(broker: Broker) -> Iterator[Collector]:
    c = Collector(broker.port)
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
def outbox(tmp_path: Path) -> Iterator[Outbox]:
    ob = Outbox(tmp_path / "outbox.db", big_limits(), flush_interval_s=0.05, flush_batch=500)
    try:
        yield ob
    finally:
        ob.close()
