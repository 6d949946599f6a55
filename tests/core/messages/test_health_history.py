"""core.messages.health_history: the health fields a status gives (bounded, None when not reported,
never the text "None"), how old rows are thinned (a state change or a verdict survives), --since,
and the `fleet history` table."""

from __future__ import annotations

import math
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edge_agent.core.messages.fleet import device_status, model_version
from edge_agent.core.messages.health_history import Row, health, model_of, parse_since, table, thin

BODY = {
    "device_id": "cam-1",
    "state": "running",
    "ts": 1796000000.0,
    "fps": 9.5,
    "errors": 2,
    "provider": "CPUExecutionProvider",
    "link": 3,
    "queue": {
        "pending": 0,
        "sent": 4,
        "oldest_unconfirmed_s": 1.5,
        "disk_free_bytes": 7 * 2**30,
        "disk_full": False,
        "crashes": 1,
    },
    "broker": {"state": "connected"},
    "models": {"detector": {"id": "yolo-int8"}},
    "model_update": {
        "current": {"id": None, "model": "models/x.onnx"},
        "last": {"outcome": "refused", "at": 1795999000.0, "detail": "gate: recall 0.41 < 0.9"},
    },
}


def test_every_field_an_operator_asks_about_is_taken() -> None:
    h = health(BODY)
    assert (h.fps, h.backlog, h.sent, h.oldest_unconfirmed_s) == (9.5, 0, 4, 1.5)
    assert (h.disk_free_bytes, h.disk_full, h.crashes, h.errors) == (7 * 2**30, False, 1, 2)
    assert (h.provider, h.link, h.broker) == ("CPUExecutionProvider", 3, "connected")
    assert (h.update_outcome, h.update_at, h.update_detail) == (
        "refused",
        1795999000.0,
        "gate: recall 0.41 < 0.9",
    )


def test_the_config_model_reads_as_the_detector_id_not_the_text_none() -> None:
    # issue 33: `fleet status` showed MODEL None for an agent on its config's model
    assert model_of(BODY) == ("yolo-int8", "")
    assert model_version(BODY) == "yolo-int8"
    s = device_status("cam-1", BODY, 1796000000.0, "edge/cam-1/status")
    assert s.model_version == "yolo-int8" and s.health is not None and s.health.model_id == "yolo-int8"
    installed = {**BODY, "model_update": {"current": {"id": "v7", "version": "1.2.0"}}}
    assert model_of(installed) == ("v7", "1.2.0")
    assert model_of({"model_update": {"current": {"id": None}}, "models": None}) == ("", "")


@pytest.mark.parametrize(
    "bad",
    [None, "x", True, -1, 2**70, float("nan"), float("inf"), [1], {"a": 1}],
)
def test_a_wrong_typed_field_reads_as_not_reported(bad: object) -> None:
    body = {"fps": bad, "errors": bad, "link": bad, "queue": {"pending": bad, "disk_free_bytes": bad}}
    h = health(body)
    assert h.backlog is None and h.disk_free_bytes is None and h.link is None and h.errors is None
    assert h.fps is None or (isinstance(bad, (int, float)) and h.fps == float(bad))
    assert health({"queue": bad, "model_update": bad, "broker": bad}).broker == ""


VALUES = st.recursive(
    st.none() | st.integers() | st.floats() | st.text(max_size=300),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c, max_size=3),
    max_leaves=8,
)


@given(st.dictionaries(st.sampled_from([*BODY, "x"]), VALUES))
@settings(max_examples=300, deadline=None)
def test_any_body_gives_bounded_fields(body: dict[str, object]) -> None:
    h = health(body)
    for text in (h.model_id, h.model_version, h.provider, h.broker):
        assert isinstance(text, str) and len(text) <= 128 and (text.isprintable() or text == "")
    for v in (h.fps, h.oldest_unconfirmed_s, h.update_at):
        assert v is None or (math.isfinite(v) and v >= 0)


def _rows(spec: list[tuple[str, float, str]]) -> list[Row]:
    return [Row(i + 1, d, t, s, None) for i, (d, t, s) in enumerate(spec)]


def test_thinning_keeps_the_newest_per_device_bucket_and_state() -> None:
    rows = _rows(
        [
            ("a", 0, "running"),
            ("a", 100, "running"),
            ("a", 200, "offline"),  # a state change in the bucket survives
            ("a", 250, "running"),
            ("b", 10, "running"),
            ("a", 310, "running"),  # the next bucket
        ]
    )
    drop, keep = thin(rows, 300, complete=True)
    assert drop == [1, 2] and keep == [3, 4, 5, 6]


def test_an_incomplete_batch_leaves_its_newest_bucket_for_the_next() -> None:
    rows = _rows([("a", 0, "running"), ("a", 100, "running"), ("a", 400, "running"), ("a", 500, "running")])
    drop, keep = thin(rows, 300, complete=False)
    assert drop == [1] and keep == [2]  # 400 and 500 (bucket 1) may go on in the next batch
    # a single bucket larger than a batch is thinned anyway: bounded beats perfect
    drop, keep = thin(rows[2:], 300, complete=False)
    assert drop == [3] and keep == [4]


def test_a_new_verdict_inside_a_bucket_is_kept() -> None:
    rows = [Row(1, "a", 0, "running", None), Row(2, "a", 10, "running", 5.0), Row(3, "a", 20, "running", 5.0)]
    drop, keep = thin(rows, 300, complete=True)
    assert drop == [2] and keep == [1, 3]


@given(
    st.lists(
        st.tuples(st.sampled_from("abc"), st.floats(0, 10_000), st.sampled_from(["running", "offline"])),
        max_size=60,
    ),
    st.integers(1, 5000),
    st.booleans(),
)
@settings(max_examples=300, deadline=None)
def test_thinning_partitions_the_batch_and_keeps_one_per_group(
    spec: list[tuple[str, float, str]], bucket: int, complete: bool
) -> None:
    rows = _rows(sorted(spec, key=lambda r: r[1]))
    drop, keep = thin(rows, bucket, complete)
    assert not set(drop) & set(keep)
    by_id = {r.id: r for r in rows}
    groups = Counter((by_id[i].device, math.floor(by_id[i].time / bucket), by_id[i].state) for i in keep)
    assert all(n == 1 for n in groups.values())
    touched = {(by_id[i].device, math.floor(by_id[i].time / bucket), by_id[i].state) for i in drop + keep}
    assert touched <= set(groups)  # no group thinned away entirely
    if complete:
        assert len(drop) + len(keep) == len(rows)


def test_since_takes_durations_and_iso_times() -> None:
    now = 1796000000.0
    assert parse_since("90s", now) == now - 90
    assert parse_since("30m", now) == now - 1800
    assert parse_since("1.5h", now) == now - 5400
    assert parse_since("7d", now) == now - 7 * 86400
    assert parse_since("2026-12-01T00:00:00Z", now) == 1796083200.0
    assert parse_since("2026-12-01", now) == 1796083200.0  # no zone: UTC
    assert parse_since("2026-12-01T01:00:00+01:00", now) == 1796083200.0
    for bad in ("", "yesterday", "-5m", "5 parsecs", "2026-13-01"):
        with pytest.raises(ValueError, match=r"--since .*expected a duration"):
            parse_since(bad, now)


def test_the_table_shows_each_verdict_once() -> None:
    base = {"time": 1796000000.0, "state": "running", "fps": 9.51, "backlog": 3, "disk_free_bytes": 3 * 2**30}
    rows = [
        {**base, "model_id": "m1"},
        {**base, "update_outcome": "refused", "update_at": 5.0, "update_detail": "gate", "model_id": "m1"},
        {**base, "update_outcome": "refused", "update_at": 5.0, "update_detail": "gate", "model_id": "m1"},
    ]
    lines = table(rows)
    assert lines[0].split()[:3] == ["TIME", "(UTC)", "STATE"]
    assert "2026-11-30 00:53:20  running  9.5" in lines[1] and "3.0G" in lines[1]
    assert [ln.endswith("refused: gate") for ln in lines[1:]] == [False, True, False]
