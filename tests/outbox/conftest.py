"""Fixtures for the outbox/sync tests: a real mosquitto per test, TLS material per session."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers_mqtt import Broker, Collector, TlsFiles, make_tls, require_mosquitto
from helpers_outbox import big_limits

from edge_agent.adapters.outbox import Outbox


@pytest.fixture(scope="session")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    require_mosquitto()
    return make_tls(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def tls_broker(tmp_path: Path, tls_files: TlsFiles) -> Iterator[Broker]:
    b = Broker(tmp_path / "tls-broker", tls=tls_files)
    b.start()
    try:
        yield b
    finally:
        b.stop()


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
