"""The per-message guard of the collector's writer, in process on a real SQLite file (the
subscriber is built, never connected; its ack is recorded): made-up device ids are capped or
refused by the enrolled list, refusal logs are throttled, and no random payload or topic gets past
the guard (hypothesis: parse AND store)."""

from __future__ import annotations

import json
import logging
import queue
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edge_agent.adapters.collector.subscriber import Inbound, Inbox
from edge_agent.app.collector.admission import Admission, Deliveries
from edge_agent.app.collector.loop import Collector
from edge_agent.core.config.collector import parse_collector_config
from edge_agent.errors import ConfigError


def collector(tmp_path: Path, **settings_: object) -> tuple[Collector, list[Inbound]]:
    return collector_at(f"sqlite:///{tmp_path / 'c.db'}", **settings_)


def collector_at(url: str, **settings_: object) -> tuple[Collector, list[Inbound]]:
    cfg = parse_collector_config(
        "", "flags", {"db": url, "broker": "mqtt://127.0.0.1:1", "client_id": "t", **settings_}
    )
    col = Collector(cfg, None, None)
    col.db.migrate()
    acked: list[Inbound] = []
    col.sub.ack = lambda msgs: acked.extend(msgs) or len(msgs)  # type: ignore[method-assign,func-returns-value]
    return col, acked


def msg(device: str, seq: int = 1, mid: int = 1) -> Inbound:
    body = {"id": f"{device}-{seq}", "seq": seq, "boot": 1, "device_id": device, "ts": 1796000000.0}
    return Inbound(f"edge/{device}/detections", json.dumps(body).encode(), mid, 1, 1)


def count(col: Collector, table: str) -> int:
    return int(col.db._x(f"SELECT COUNT(*) FROM {table}").fetchone()[0])


@pytest.mark.parametrize("cap", [100, 250])
def test_ten_thousand_made_up_device_ids_make_at_most_the_cap_of_device_rows(
    tmp_path: Path, cap: int
) -> None:
    col, acked = collector(tmp_path, new_devices_max=cap)
    batch = [msg(f"fake-{i}", mid=i) for i in range(10_000)]
    for i in range(0, len(batch), 500):
        col._round(batch[i : i + 500], threading.Event())
    assert acked == batch  # every one acknowledged: none comes back
    assert count(col, "devices") == cap and count(col, "messages") == cap
    assert count(col, "rejected") == 10_000 - cap
    assert col.metrics.new_devices_refused == 10_000 - cap
    # a known device is still taken
    col._round([msg("fake-0", seq=2)], threading.Event())
    assert count(col, "messages") == cap + 1
    col.db.close()


def test_the_new_device_cap_is_per_interval() -> None:
    now = [0.0]
    adm = Admission(None, 2, 60, clock=lambda: now[0])
    assert [adm.refuse(d) for d in ("a", "b")] == [None, None]
    assert "2 new device ids were already taken in 60 s" in str(adm.refuse("c"))
    assert adm.refuse("a") is None  # known
    now[0] = 60.0
    assert adm.refuse("c") is None and adm.refused == 1


def test_only_enrolled_devices_are_taken_and_the_list_is_reread_when_it_changes(tmp_path: Path) -> None:
    path = tmp_path / "enrolled.json"
    path.write_text(json.dumps({"version": 1, "devices": {"cam-1": {"groups": ["a"]}}, "collectors": []}))
    col, acked = collector(tmp_path, enrolled_file=str(path))
    col._round([msg("cam-1"), msg("cam-2")], threading.Event())
    assert count(col, "messages") == 1
    (reason,) = col.db._x("SELECT reason FROM rejected").fetchone()
    assert "device 'cam-2' is not enrolled" in reason
    path.write_text(json.dumps({"version": 1, "devices": {"cam-1": {}, "cam-2": {}}}))
    import os

    os.utime(path, ns=(1, 10**18))  # a new mtime even within the clock's resolution
    col._round([msg("cam-2", seq=1, mid=3)], threading.Event())
    assert count(col, "messages") == 2 and len(acked) == 3
    # a broken file while running: the last good list stays
    path.write_text("{broken")
    os.utime(path, ns=(1, 2 * 10**18))
    col._round([msg("cam-2", seq=2, mid=4)], threading.Event())
    assert count(col, "messages") == 3
    col.db.close()


@pytest.mark.parametrize(
    "text, why",
    [
        ("{broken", "not JSON"),
        ('{"version": 1, "devices": []}', 'expected {"version": 1, "devices"'),
        ('{"devices": {"bad/id": {}}}', "device id 'bad/id' is not 1-64"),
    ],
)
def test_a_bad_enrolled_file_is_one_clear_error_at_start(tmp_path: Path, text: str, why: str) -> None:
    path = tmp_path / "enrolled.json"
    path.write_text(text)
    with pytest.raises(ConfigError, match=r"enrolled_file .*enrolled\.json") as err:
        Admission(str(path), 100, 3600)
    assert why in str(err.value)
    with pytest.raises(ConfigError, match="cannot read it"):
        Admission(str(tmp_path / "missing.json"), 100, 3600)


@pytest.mark.parametrize("every", [100, 7])
def test_refusal_logs_are_throttled_with_a_count(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, every: int
) -> None:
    col, acked = collector(tmp_path, log_every=every)
    caplog.set_level(logging.WARNING, "edge_agent.collector")
    bad = [Inbound("edge/cam-1/detections", b"not json", i, 1, 1) for i in range(327)]
    col._round(bad, threading.Event())
    lines = [r.getMessage() for r in caplog.records if "rejected" in r.getMessage()]
    assert len(lines) == 1 + 327 // every
    assert count(col, "rejected") == 327 and len(acked) == 327
    if every == 100:
        assert "(300 refused for 'cam-1' so far; every 100th is logged)" in lines[-1]
    col.db.close()


def test_conflicts_are_logged_once_per_device_and_counted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    col, _ = collector(tmp_path)
    caplog.set_level(logging.WARNING, "edge_agent.collector")
    col._round([msg("cam-1", s, s) for s in range(1, 11)], threading.Event())
    forged = []
    for s in range(1, 11):
        body = {"id": f"forged-{s}", "seq": s, "boot": 1, "device_id": "cam-1", "ts": 1.0}
        forged.append(Inbound("edge/cam-1/detections", json.dumps(body).encode(), 100 + s, 1, 1))
    col._round(forged, threading.Event())
    col._round(forged[:3], threading.Event())  # redelivered: duplicates, not new conflicts
    lines = [r.getMessage() for r in caplog.records if "conflicts" in r.getMessage()]
    assert len(lines) == 1 and "cam-1: 10 message(s)" in lines[0]
    assert col.metrics.conflicts == 10 and col.metrics.duplicates == 3
    col.db.close()


def test_the_inbox_holds_the_reader_when_full_and_lets_it_go_when_the_writer_takes() -> None:
    inbox = Inbox(3000)
    big = Inbound("t", b"x" * 1000, 1, 1, 1)
    assert inbox.put(big) and inbox.put(big)  # 2 x (1000 + 1 + 256) bytes
    done = threading.Event()

    def reader() -> None:
        inbox.put(big)
        done.set()

    t = threading.Thread(target=reader)
    t.start()
    assert not done.wait(0.5) and inbox.waits == 1  # the third does not fit: paho's thread waits
    assert inbox.get(1.0) is big
    assert done.wait(10)
    t.join()
    assert inbox.qsize() == 2 and inbox.peak <= 3000
    # one message larger than the whole inbox still passes alone
    huge = Inbox(10)
    assert huge.put(big) and huge.get(0.1) is big
    with pytest.raises(queue.Empty):
        huge.get_nowait()
    # stop wakes a waiting reader
    full = Inbox(10)
    full.put(big)
    waiting = threading.Thread(target=lambda: full.put(big))
    waiting.start()
    full.close()
    waiting.join(10)
    assert not waiting.is_alive()


def test_the_inbox_and_message_sizes_come_from_the_config(tmp_path: Path) -> None:
    col, _ = collector(tmp_path, inbox_max_mib=3, message_max_kib=100)
    assert col.sub.inbox.max_bytes == 3 * 1024 * 1024 and col.sub.message_max == 100 * 1024
    col._round([Inbound("edge/cam-1/detections", b"", 1, 1, 1, size=200_000)], threading.Event())
    (reason,) = col.db._x("SELECT reason FROM rejected").fetchone()
    assert reason == "edge/cam-1/detections: 200000 bytes, at most 102400 taken (message_max_kib)"
    col.db.close()


def test_the_delivery_map_is_bounded() -> None:
    d = Deliveries(max_keys=3)
    keys = [Deliveries.key(f"t{i}", b"p") for i in range(5)]
    for k in keys:
        d.failed(k)
    assert d.failed(keys[4]) == 2 and d.failed(keys[0]) == 1  # the oldest was forgotten


JSONS = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | (
        st.text(alphabet=st.characters(exclude_categories=()))
        | st.sampled_from(["\ud800", "a\udfff", "\x00"])
    ),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


def as_payload(value: object, seq: object, device: str) -> bytes:
    body = {"id": "x", "seq": seq, "boot": 1, "device_id": device, "v": value}
    return json.dumps(body, ensure_ascii=True, allow_nan=True).encode()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    payloads=st.lists(
        st.one_of(
            st.binary(max_size=200),
            st.builds(
                as_payload, JSONS, st.integers() | st.floats() | st.none(), st.sampled_from(["cam-1", "x"])
            ),
            st.integers(0, 3000).map(lambda n: b"[" * n + b"]" * n),
            st.sampled_from(
                [b'{"seq":1,"boot":1,"v":"\\ud800"}', b'{"seq":1,"boot":1,"v":"\\u0000"}', b'{"a":1e999}']
            ),
        ),
        min_size=1,
        max_size=8,
    ),
    topics=st.lists(
        st.sampled_from(["edge/cam-1/detections", "edge/cam-1/status", "edge/cam-1/batch.zlib", "edge/x/y"])
        | st.text(max_size=40),
        min_size=8,
        max_size=8,
    ),
)
def test_no_payload_or_topic_gets_past_the_guard(url: str, payloads: list[bytes], topics: list[str]) -> None:
    """On SQLite and on PostgreSQL (jsonb refuses more than SQLite's text does)."""
    col = COLLECTORS.get(url)
    if col is None:
        col, _ = collector_at(url)
        COLLECTORS[url] = col
    acked: list[Inbound] = []
    col.sub.ack = lambda msgs: acked.extend(msgs) or len(msgs)  # type: ignore[method-assign,func-returns-value]
    batch = [Inbound(topics[i], p, i + 1, 1, 1) for i, p in enumerate(payloads)]
    before = col.metrics.round_failures
    col._round(batch, threading.Event())  # raises nothing
    assert acked == batch
    assert col.metrics.round_failures == before  # the guard normalised it: the store never failed


COLLECTORS: dict[str, Collector] = {}
