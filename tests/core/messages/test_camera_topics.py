"""The camera level at the collector (pure): ``<prefix>/<device>/<camera>/<kind>`` and the body's
``camera`` must agree, a camera is a topic level, and the legacy single [camera] stays camera-less.
Every refusal is the one line the collector stores for it."""

from __future__ import annotations

import json
import zlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edge_agent.core.messages.batch import batch_topic, pack
from edge_agent.core.messages.builders import (
    CAMERA_KINDS,
    camera_base,
    counts_message,
    object_message,
    object_topics,
    result_message,
    stamp,
)
from edge_agent.core.messages.cameras import (
    MAX_CAMERAS,
    RESERVED_CAMERA_IDS,
    camera_rows,
    summary,
)
from edge_agent.core.messages.fleet import DEVICE_RE, IngestError, parse, split_topic

NOW = 1796000000.0
GATE = "edge/cam-1/gate"


def body(**kw: Any) -> dict[str, Any]:
    b: dict[str, Any] = {"id": "r1", "seq": 7, "boot": 2, "device_id": "cam-1", "camera": "gate", "ts": NOW}
    b.update(kw)
    return {k: v for k, v in b.items() if v is not None}


def raw(b: Any) -> bytes:
    return json.dumps(b).encode()


def refused(topic: str, payload: Any) -> str:
    with pytest.raises(IngestError) as err:
        parse("edge", topic, payload if isinstance(payload, bytes) else raw(payload), NOW)
    text = str(err.value)
    assert "\n" not in text
    return text


def test_the_builders_camera_messages_are_stored_with_their_camera() -> None:
    res = result_message(
        {"image": "f.jpg", "width": 4, "height": 4, "detections": []},
        device_id="cam-1",
        ts=NOW,
        camera="gate",
    )
    obj = object_message(
        {"event": "appeared", "object_id": 1}, device_id="cam-1", ts=NOW, captured_at=NOW, camera="gate"
    )
    cnt = counts_message(
        {"from": NOW - 60, "to": NOW, "lines": {}, "zones": {}},
        device_id="cam-1",
        ts=NOW,
        interval_s=60,
        camera="gate",
    )
    objects, counts = object_topics("edge", "cam-1", "gate")
    for seq, (topic, msg) in enumerate(
        [(f"{camera_base('edge', 'cam-1', 'gate')}/detections", res), (objects, obj), (counts, cnt)], 1
    ):
        stamp(msg, seq=seq, boot=1)
        assert list(msg)[:6] == ["schema", "id", "seq", "boot", "device_id", "camera"]
        (r,) = parse("edge", topic, raw(msg), NOW).records
        assert (r.device, r.camera, r.kind, r.seq) == ("cam-1", "gate", topic.rsplit("/", 1)[1], seq)


def test_a_legacy_message_has_no_camera() -> None:
    res = result_message(
        {"image": "f.jpg", "width": 4, "height": 4, "detections": []}, device_id="cam-1", ts=NOW
    )
    stamp(res, seq=1, boot=1)
    assert "camera" not in res
    (r,) = parse("edge", "edge/cam-1/detections", raw(res), NOW).records
    assert r.camera is None
    assert object_topics("edge", "cam-1") == ("edge/cam-1/objects", "edge/cam-1/counts")


def test_the_body_must_name_the_topics_camera() -> None:
    assert refused(f"{GATE}/objects", body(camera="yard")) == (
        f"{GATE}/objects: camera 'yard' is not the topic's camera 'gate'"
    )
    assert refused(f"{GATE}/counts", body(camera=None)) == (
        f"{GATE}/counts: body names no camera, the topic's is 'gate'"
    )
    assert (
        refused(f"{GATE}/detections", body(camera=7))
        == f"{GATE}/detections: camera 7 is not 1-64 of A-Za-z0-9_.-"
    )
    assert refused(f"{GATE}/detections", b'{"seq":1,"boot":1,"camera":null}') == (
        f"{GATE}/detections: camera None is not 1-64 of A-Za-z0-9_.-"
    )
    # without a seq (an event) the camera rule holds too; a body that is no object names no camera
    assert refused(f"{GATE}/objects", {"camera": "yard"}).endswith(
        "camera 'yard' is not the topic's camera 'gate'"
    )
    assert (
        refused(f"{GATE}/objects", [1, 2]) == f"{GATE}/objects: body names no camera, the topic's is 'gate'"
    )
    ev = parse("edge", f"{GATE}/objects", raw({"camera": "gate", "note": 1}), NOW).event
    assert ev is not None and ev.kind == "objects"


def test_the_camera_level_is_a_camera_id_before_a_camera_kind() -> None:
    assert split_topic("edge", f"{GATE}/detections") == ("cam-1", "detections", "gate")
    assert split_topic("edge", "edge/cam-1/" + "c" * 64 + "/counts")[2] == "c" * 64
    for kind in ("status", "sensors", "batch.zlib", "confirm", "made-up"):
        assert refused(f"{GATE}/{kind}", body()) == (
            f"topic '{GATE}/{kind}': kind {kind!r} is not a camera kind (detections, objects, counts)"
        )
    for cam, why in [
        ("c" * 65, f"camera {'c' * 65!r} is not 1-64 of A-Za-z0-9_.-"),
        ("ga te", "camera 'ga te' is not 1-64 of A-Za-z0-9_.-"),
        ("", "camera '' is not 1-64 of A-Za-z0-9_.-"),
        ("model", "camera 'model' is reserved (<prefix>/<device>/model/ is the model receiver's)"),
    ]:
        topic = f"edge/cam-1/{cam}/objects"
        assert refused(topic, body(camera=cam)) == f"topic {topic!r}: {why}"
    assert refused("edge/cam 1/gate/objects", body()).endswith(
        "device id 'cam 1' is not 1-64 of A-Za-z0-9_.-"
    )


def test_a_batch_carries_each_lines_camera_and_refuses_one_that_is_no_camera_id() -> None:
    rows = [
        ("detections", raw(body(seq=1, camera="gate"))),
        ("objects", raw(body(seq=2, camera="yard"))),
        ("detections", raw(body(seq=3, camera=None))),  # the single [camera]'s, in the same outbox
    ]
    got = parse("edge", batch_topic("edge", "cam-1"), pack(rows, 1 << 20).payload, NOW).records
    assert [(r.seq, r.kind, r.camera) for r in got] == [
        (1, "detections", "gate"),
        (2, "objects", "yard"),
        (3, "detections", None),
    ]
    bad = pack([rows[0], ("objects", raw(body(seq=2, camera="a/b")))], 1 << 20).payload
    assert refused("edge/cam-1/batch.zlib", bad) == (
        "edge/cam-1/batch.zlib line 2: camera 'a/b' is not 1-64 of A-Za-z0-9_.-"
    )
    bad = zlib.compress(b'["counts",' + raw(body(camera="")) + b"]\n")
    assert refused("edge/cam-1/batch.zlib", bad).endswith("line 1: camera '' is not 1-64 of A-Za-z0-9_.-")
    # a batch is never a camera's own topic
    assert "not a camera kind" in refused(f"{GATE}/batch.zlib", pack(rows, 1 << 20).payload)


def test_a_device_level_body_may_name_a_valid_camera_as_a_batch_line_does() -> None:
    (r,) = parse("edge", "edge/cam-1/detections", raw(body()), NOW).records
    assert r.camera == "gate"
    assert refused("edge/cam-1/detections", body(camera="model")).endswith(
        "camera 'model' is reserved (<prefix>/<device>/model/ is the model receiver's)"
    )


ids = st.from_regex(DEVICE_RE, fullmatch=True)
levels = st.text(st.sampled_from("ab-_.+#/$ \x00é"), max_size=6)


@settings(max_examples=300, deadline=None)
@given(ids, ids, st.sampled_from(CAMERA_KINDS))
def test_every_built_camera_topic_parses_back_to_its_levels(device: str, camera: str, kind: str) -> None:
    topic = f"{camera_base('/edge/', device, camera)}/{kind}"
    if camera in RESERVED_CAMERA_IDS:
        with pytest.raises(IngestError, match="is reserved"):
            split_topic("edge", topic)
        return
    assert split_topic("edge", topic) == (device, kind, camera)
    (r,) = parse("edge", topic, raw(body(device_id=device, camera=camera)), NOW).records
    assert (r.device, r.camera, r.kind) == (device, camera, kind)


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.one_of(levels, ids, st.sampled_from([*CAMERA_KINDS, "status", "model"])), min_size=0, max_size=5
    )
)
def test_any_topic_is_parsed_into_valid_levels_or_refused_in_one_line(parts: list[str]) -> None:
    topic = "/".join(["edge", *parts])
    try:
        device, kind, camera = split_topic("edge", topic)
    except IngestError as exc:
        assert "\n" not in str(exc) and str(exc).startswith("topic ")
        return
    assert DEVICE_RE.match(device) and topic.endswith("/" + kind)
    # levels of the topic, not list items: a generated part may hold a "/" itself (parts=['_/a'])
    levels = topic.count("/")
    assert levels == (3 if camera is not None or kind == "sensor_results" else 2)
    if camera is not None:
        assert kind in CAMERA_KINDS and DEVICE_RE.match(camera) and camera not in RESERVED_CAMERA_IDS


@settings(max_examples=200, deadline=None)
@given(ids, st.one_of(st.none(), ids, st.text(max_size=70), st.integers()))
def test_a_camera_topic_takes_exactly_the_bodies_that_name_its_camera(camera: str, claimed: object) -> None:
    if camera in RESERVED_CAMERA_IDS:
        return
    b = body(camera=claimed) if claimed is not None else body(camera=None)
    try:
        (r,) = parse("edge", f"edge/cam-1/{camera}/objects", raw(b), NOW).records
    except IngestError as exc:
        assert claimed != camera and "\n" not in str(exc)
        return
    assert claimed == camera == r.camera


# ---- fleet status: the stored cameras map -------------------------------------------------------
def cam(state: str = "streaming", **kw: Any) -> dict[str, Any]:
    c: dict[str, Any] = {
        "source": "rtsp://x",
        "state": state,
        "fps_in": 10.0,
        "fps": 5.0,
        "processed": 100,
        "skipped_motion": 3,
        "dropped_stale": 0,
        "frame_age_ms": 80.0,
        "motion_ratio": None,
        "reconnects": 1,
    }
    c.update(kw)
    return c


def test_the_cameras_column_counts_the_cameras_down() -> None:
    rows, left = camera_rows(
        "d", "running", {"yard": cam(), "gate": cam("reconnecting"), "door": cam("failed")}
    )
    assert [r.camera for r in rows] == ["door", "gate", "yard"] and left == 0
    assert summary(rows, left) == "3 (2 down)"
    up, _ = camera_rows("d", "draining", {"a": cam(), "b": cam()})
    assert summary(up, 0) == "2"
    # an offline device (its last will carries the cameras of its connect): none of them is up
    gone, _ = camera_rows("d", "offline", {"a": cam(), "b": cam()})
    assert [r.state for r in gone] == ["offline", "offline"] and summary(gone, 0) == "2 (2 down)"
    assert camera_rows("d", "running", None) == ([], 0) and summary([], 0) == "-"
    assert camera_rows("d", "running", ["a"]) == ([], 0)


def test_a_cameras_map_is_outside_data_and_bounded() -> None:
    wild = {
        "ok": cam(
            fps="fast", processed=-1, frame_age_ms=True, reconnects=2**70, last_error="bad\x1b[31m\nline"
        ),
        "a/b": cam(),  # not a camera id: left out, counted
        "x": "not an object",
        "s": cam(state="\x1b[2Jup" * 20),
    }
    rows, left = camera_rows("d", "running", wild)
    assert left == 2 and [r.camera for r in rows] == ["ok", "s"]
    ok = rows[0]
    assert (ok.fps, ok.processed, ok.frame_age_ms, ok.reconnects) == (None, None, None, None)
    assert ok.fps_in == 10.0 and ok.last_error == "bad[31mline"
    assert all(c.isprintable() for c in rows[1].state) and len(rows[1].state) <= 32
    assert summary(rows, left) == "4 (3 down)"  # the left out cannot be shown up
    many, left = camera_rows("d", "running", {f"c{i:03d}": cam() for i in range(MAX_CAMERAS + 6)})
    assert len(many) == MAX_CAMERAS and left == 6
