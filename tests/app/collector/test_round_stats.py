"""app.collector.round_stats: a round's Outcome adds up with the next one's (the writer sums the
batches of a round), and Metrics gives each counter under its own Prometheus name, the ingest rate
over the last 10 s only, and the figures rounded as /metrics shows them."""

from __future__ import annotations

from edge_agent.app.collector.round_stats import RATE_WINDOW_S, Metrics, Outcome


def test_outcomes_add_up_conflicts_per_kind_and_keep_the_newest_time() -> None:
    a = Outcome(3, 1, 2, {"results": 1, "counts": 2}, 100.0, {"cam-1": b"w1", "cam-2": b"w2"})
    b = Outcome(5, 4, 1, {"results": 3, "statuses": 1}, 90.0, {"cam-1": b"w3"})
    s = a.plus(b)
    assert s == Outcome(
        8, 5, 3, {"results": 4, "counts": 2, "statuses": 1}, 100.0, {"cam-1": b"w3", "cam-2": b"w2"}
    )
    assert a.conflicts == {"results": 1, "counts": 2}  # the operands are not changed
    assert b.plus(a).newest == 100.0 and b.plus(a).confirms["cam-1"] == b"w1"  # the latest store's watermark


def test_newest_ignores_a_batch_that_stored_nothing() -> None:
    none = Outcome(0, 0, 0, {}, None, {})
    some = Outcome(1, 0, 0, {}, 7.5, {})
    assert none.plus(some).newest == 7.5
    assert some.plus(none).newest == 7.5
    assert none.plus(none).newest is None


def test_a_fresh_metrics_reports_zero_everywhere() -> None:
    v = Metrics().values(0, False)
    assert v.pop("collector_broker_connected") == 0.0
    assert set(v.values()) == {0}
    assert len(v) == 19


def test_each_counter_under_its_own_name() -> None:
    m = Metrics()
    names = {
        "taken": "collector_taken_total",
        "messages": "collector_messages_total",
        "records": "collector_records_total",
        "duplicates": "collector_duplicates_dropped_total",
        "rejected": "collector_rejected_total",
        "db_errors": "collector_db_errors_total",
        "conflicts": "collector_conflicts_total",
        "dead_letters": "collector_dead_letters_total",
        "round_failures": "collector_round_failures_total",
        "new_devices_refused": "collector_new_devices_refused_total",
        "devices_known": "collector_devices_known",
        "devices_online": "collector_devices_online",
        "confirms": "collector_confirms_total",
        "inbox_bytes": "collector_inbox_bytes",
    }
    for i, attr in enumerate(names, start=11):
        setattr(m, attr, i)
    m.lag_s = 1.23456
    m.ingest_delay_s = 0.5004
    m.device_rows = [{"device": "a"}, {"device": "b"}]
    v = m.values(42, True)
    assert {names[a]: v[names[a]] for a in names} == {n: i for i, n in enumerate(names.values(), start=11)}
    assert v["collector_lag_seconds"] == 1.235
    assert v["collector_ingest_delay_seconds"] == 0.5
    assert v["collector_devices_exported"] == 2
    assert v["collector_inbox"] == 42
    assert v["collector_broker_connected"] == 1.0


def test_the_rate_counts_the_last_ten_seconds_only() -> None:
    m = Metrics()
    assert m.rate(0.0) == 0.0
    m.stored(100.0, 30)
    m.stored(105.0, 20)
    assert m.rate(105.0) == 50 / RATE_WINDOW_S
    assert m.rate(110.0) == 50 / RATE_WINDOW_S  # 100.0 is exactly 10 s old: still in
    assert m.rate(110.5) == 20 / RATE_WINDOW_S
    m.stored(115.0, 4)  # 100 and 105 are no longer needed ... 105 is exactly 10 s old
    assert m.rate(115.0) == 24 / RATE_WINDOW_S
    assert len(m._window) == 2
    m.stored(200.0, 1)
    assert len(m._window) == 1 and m.rate(200.0) == 0.1
    assert RATE_WINDOW_S == 10.0


def test_the_rate_in_values_is_rounded_to_a_tenth() -> None:
    import time

    m = Metrics()
    m.stored(time.monotonic(), 7)
    assert m.values(0, True)["collector_ingest_rate_per_second"] == 0.7
    m.stored(time.monotonic(), 4)
    assert m.values(0, True)["collector_ingest_rate_per_second"] == 1.1


def test_exposition_carries_labels_the_purged_rows_and_the_device_rows() -> None:
    m = Metrics()
    m.records = 5
    m.purged = {"results": 3}
    m.device_rows = [{"device": "cam-9", "state": "running", "last_seen": 12.0, "crashes": 0, "health": None}]
    text = m.exposition(2, True, {"collector": "c1"})
    assert 'edge_agent_collector_records_total{collector="c1"} 5' in text
    assert 'edge_agent_collector_inbox{collector="c1"} 2' in text
    assert 'edge_agent_collector_expired_rows_total{collector="c1",kind="results"} 3' in text
    assert 'edge_agent_device_last_seen_seconds{device="cam-9"} 12' in text
    assert (
        text.index("collector_taken_total")
        < text.index("collector_expired_rows_total")
        < text.index("device_online")
    )
