"""The objects step of the loop in-process: best-confidence snapshot on "ended", the counters
(continued from a real outbox, the old checkpoint imported once, a corrupt one refused with one
log line, a refused event or counts message taking nothing along), counts on their topic."""

from __future__ import annotations

import base64
import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Optional

import cv2
import numpy as np
import pytest
from support.clip import real_photo
from support.outbox import big_limits

from edge_agent.adapters.outbox.outbox import Outbox
from edge_agent.app.agent import objects_step
from edge_agent.app.agent.objects_step import ObjectsStep, tracker_params
from edge_agent.core.camera.source_spec import Frame
from edge_agent.core.config.schema import parse_config
from edge_agent.core.objects.count_keys import Op
from edge_agent.core.objects.tracker import TrackerParams
from edge_agent.core.vision.results import Detection

SCHEMAS = Path(__file__).resolve().parents[3] / "edge_agent" / "schemas"


def cfg_for(state: Path, snapshot: bool = False) -> Any:
    return parse_config(
        f"""[device]
state_dir = "{state}"
[output]
mode = "objects"
snapshot = {str(snapshot).lower()}
[tracker]
min_hits = 1
anchor = "center"
[[lines]]
name = "gate"
points = [[0.5, 0.0], [0.5, 1.0]]
in_side = "left"
"""
    )


def walk_across(
    step: ObjectsStep, sent: list[tuple[str, dict[str, Any]]], confs: list[float], put: Any = None
) -> None:
    img = real_photo("sample_0.jpg")
    for k, conf in enumerate(confs):
        x = 20 + 20 * k
        det = Detection(box=(x, 80.0, x + 50.0, 130.0), label="square", class_id=1, confidence=conf)
        frame = Frame(image=img, ts_mono=time.monotonic(), ts_wall=time.time(), seq=k, source="t")
        step.on_frame(frame, [det], put or (lambda t, b, _=None: sent.append((t, b)) is None))


def test_ended_carries_the_best_confidence_crop_and_validates(tmp_path: Path) -> None:
    jsonschema = pytest.importorskip("jsonschema", reason="dev extra")
    step = ObjectsStep(cfg_for(tmp_path, snapshot=True))
    sent: list[tuple[str, dict[str, Any]]] = []
    confs = [0.6, 0.7, 0.95, 0.8, 0.7, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6]
    walk_across(step, sent, confs)
    step.stop(lambda t, b, _=None: sent.append((t, b)) is None)
    objects = [b for t, b in sent if t.endswith("/objects")]
    assert [b["event"] for b in objects] == ["appeared", "line_crossed", "ended"]
    ended = objects[-1]
    assert ended["best_confidence"] == 0.95
    crop = cv2.imdecode(
        np.frombuffer(base64.b64decode(ended["snapshot_jpeg_b64"]), np.uint8), cv2.IMREAD_COLOR
    )
    assert crop is not None and 45 <= crop.shape[1] <= 60 and 45 <= crop.shape[0] <= 60
    validator = jsonschema.Draft202012Validator(json.loads((SCHEMAS / "object.json").read_text()))
    counts_validator = jsonschema.Draft202012Validator(json.loads((SCHEMAS / "counts.json").read_text()))
    for b in objects:
        validator.validate({**b, "id": "a" * 32, "seq": 1, "boot": 1})
    (counts,) = [b for t, b in sent if t.endswith("/counts")]
    counts_validator.validate({**counts, "id": "a" * 32, "seq": 1, "boot": 1})
    assert counts["lines"]["gate"] == {"in": 1, "out": 0, "total_in": 1, "total_out": 0}


class QueueSink:
    """A real outbox as the step's sink and count store; every message is also kept in ``sent``."""

    def __init__(
        self, path: Path, refuse: Callable[[str, dict[str, Any]], bool] = lambda t, b: False
    ) -> None:
        self.ob = Outbox(path, big_limits(), flush_interval_s=60)
        self.refuse = refuse
        self.sent: list[tuple[str, dict[str, Any], Optional[Sequence[Op]]]] = []

    def put(self, topic: str, body: dict[str, Any], tally: Optional[Sequence[Op]] = None) -> bool:
        if self.refuse(topic, body):
            return False
        self.sent.append((topic, body, tally))
        self.ob.put(topic, body, tally)
        return True

    def tallies(self) -> Mapping[str, int]:
        return self.ob.tallies()

    def store_tallies(self, ops: Sequence[Op]) -> None:
        self.ob.store_tallies(ops)


def gate(step: ObjectsStep) -> tuple[int, int]:
    g = step.events.totals["lines"]["gate"]
    return g["in"], g["out"]


def test_the_queue_continues_the_counts(tmp_path: Path) -> None:
    sink = QueueSink(tmp_path / "q.db")
    step = ObjectsStep(cfg_for(tmp_path))
    step.restore(sink)
    sent: list[tuple[str, dict[str, Any]]] = []
    walk_across(step, sent, [0.9] * 12)  # a put that is not the queue's: counted, never stored
    step.stop(sink.put)
    sink.ob.close()
    assert not (tmp_path / "object-counts.json").exists()  # no checkpoint file any more
    sink = QueueSink(tmp_path / "q.db")
    # the walk's crossing went elsewhere: the queue counted nothing (stop's counts reset the interval)
    assert '["totals","lines","gate","in"]' not in sink.tallies()
    step = ObjectsStep(cfg_for(tmp_path))
    step.restore(sink)
    walk_across(step, [], [0.9] * 12, sink.put)
    assert gate(step) == (1, 0)
    frame = Frame(
        image=real_photo("sample_0.jpg"), ts_mono=time.monotonic(), ts_wall=time.time(), seq=99, source="t"
    )
    step.on_frame(frame, [], sink.put)
    step.stop(sink.put)
    sink.ob.close()
    again = ObjectsStep(cfg_for(tmp_path))
    sink = QueueSink(tmp_path / "q.db")
    again.restore(sink)
    assert gate(again) == (1, 0)  # continued from the queue, not from zero
    assert again.events.interval["lines"]["gate"] == {"in": 0, "out": 0}  # stop's counts reset it
    sink.ob.close()


def test_the_old_checkpoint_is_imported_once_and_a_corrupt_one_refused(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ckpt = tmp_path / "object-counts.json"
    old = {
        "interval_start": 1_700_000_000.5,
        "interval": {"lines": {"gate": {"in": 2, "out": 1}}, "zones": {}},
        "totals": {"lines": {"gate": {"in": 7, "out": 4}}, "zones": {}},
    }
    ckpt.write_text(json.dumps(old))
    sink = QueueSink(tmp_path / "q.db")
    step = ObjectsStep(cfg_for(tmp_path))
    step.restore(sink)
    assert gate(step) == (7, 4) and step.events.interval_start == 1_700_000_000.5
    assert not ckpt.exists() and (tmp_path / "object-counts.json.imported").exists()
    assert sink.tallies()['["totals","lines","gate","in"]'] == 7  # stored in the queue at once
    sink.ob.close()
    ckpt.write_text(json.dumps({**old, "totals": {"lines": {"gate": {"in": 99, "out": 99}}}}))
    sink = QueueSink(tmp_path / "q.db")
    again = ObjectsStep(cfg_for(tmp_path))
    again.restore(sink)  # the queue holds counters: a checkpoint file is not read again
    assert gate(again) == (7, 4)
    assert again.events.interval["lines"]["gate"] == {"in": 2, "out": 1}
    sink.ob.close()

    fresh = tmp_path / "fresh"
    fresh.mkdir()
    (fresh / "object-counts.json").write_text('{"interval_start": 1, "totals": 7}')
    sink = QueueSink(fresh / "q.db")
    with caplog.at_level(logging.ERROR):
        step = ObjectsStep(cfg_for(fresh))
        step.restore(sink)
    assert gate(step) == (0, 0) and sink.tallies() == {}
    assert any(
        "counts start from zero" in r.getMessage() and "object-counts.json" in r.getMessage()
        for r in caplog.records
    )
    sink.ob.close()


def test_an_event_the_queue_refuses_takes_its_count_back(tmp_path: Path) -> None:
    sink = QueueSink(tmp_path / "q.db", refuse=lambda t, b: b.get("event") == "line_crossed")
    step = ObjectsStep(cfg_for(tmp_path))
    step.restore(sink)
    walk_across(step, [], [0.9] * 12, sink.put)
    walk = [b for _, b, _ in sink.sent]
    assert "appeared" in [b.get("event") for b in walk] and "line_crossed" not in [
        b.get("event") for b in walk
    ]
    assert gate(step) == (0, 0) and step.events.interval["lines"]["gate"]["in"] == 0
    step.stop(sink.put)
    (counts,) = [b for t, b, _ in sink.sent if t == step.counts_topic]
    assert counts["lines"]["gate"]["total_in"] == 0
    sink.ob.close()


def test_a_refused_counts_message_keeps_its_interval_for_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    monkeypatch.setattr(objects_step, "time", clock)
    refusing = [True]
    sink = QueueSink(tmp_path / "q.db", refuse=lambda t, b: "lines" in b and refusing[0])
    step = ObjectsStep(lost_fast(tmp_path, interval=60))
    step.restore(sink)
    start = step.events.interval_start
    img = real_photo("sample_0.jpg")
    for k, x in enumerate(WALK[:5]):
        step.on_frame(*at(k, x, img), sink.put)
    clock.wall += 60
    step.on_frame(*at(5, 200, img), sink.put)  # counts due, refused
    assert step.events.interval["lines"]["gate"]["in"] == 1 and step.events.interval_start == start
    refusing[0] = False
    step.on_frame(*at(6, None, img), sink.put)
    (counts,) = [b for t, b, _ in sink.sent if t == step.counts_topic]
    assert counts["lines"]["gate"]["in"] == 1 and counts["from"] == start
    sink.ob.close()


# ---- every [tracker] key, the topics, the message fields and the checkpoint timing ----------------


def test_every_tracker_key_reaches_the_tracker(tmp_path: Path) -> None:
    cfg = parse_config(
        f"""[device]
id = "cam-x"
state_dir = "{tmp_path}"
[mqtt]
topic_prefix = "plant"
[output]
mode = "objects"
[tracker]
high = 0.71
low = 0.12
new_track = 0.83
match_iou = 0.44
lost_frames = 7
per_class = true
fuse_score = false
"""
    )
    want = TrackerParams(
        high=0.71, low=0.12, new_track=0.83, match_iou=0.44, lost_frames=7, per_class=True, fuse_score=False
    )
    assert tracker_params(cfg) == want
    step = ObjectsStep(cfg)
    assert step.tracker.params == want
    assert (step.topic, step.counts_topic) == ("plant/cam-x/objects", "plant/cam-x/counts")
    assert step.checkpoint == tmp_path / "object-counts.json" and step.sent == 0
    assert ObjectsStep(cfg, tmp_path / "elsewhere.json").checkpoint == tmp_path / "elsewhere.json"


class Clock:
    """objects_step's ``time`` module: both clocks moved by the test."""

    def __init__(self) -> None:
        self.mono = 500.0
        self.wall = 1_700_000_000.0

    def monotonic(self) -> float:
        return self.mono

    def time(self) -> float:
        return self.wall


def lost_fast(state: Path, snapshot: bool = False, interval: int = 300) -> Any:
    return parse_config(
        f"""[device]
id = "cam-x"
state_dir = "{state}"
[output]
mode = "objects"
snapshot = {str(snapshot).lower()}
counts_interval_s = {interval}
[tracker]
min_hits = 1
anchor = "center"
lost_frames = 1
[[lines]]
name = "gate"
points = [[0.5, 0.0], [0.5, 1.0]]
in_side = "left"
"""
    )


def at(k: int, xs: Any, img: np.ndarray, offset: float = 1000.0) -> tuple[Frame, list[Detection]]:
    """Frame ``k`` (monotonic 10.1234 + k, wall = monotonic + offset) with squares centred at
    ``xs`` (one x or None, or a list: object i at y 80 + 90 i)."""
    mono = 10.1234 + k
    frame = Frame(image=img, ts_mono=mono, ts_wall=mono + offset, seq=100 + k, source="t")
    xs = xs if isinstance(xs, list) else [xs]
    dets = [
        Detection(
            box=(x - 25, 80.0 + 90 * i, x + 25, 130.0 + 90 * i), label="square", class_id=3, confidence=0.9
        )
        for i, x in enumerate(xs)
        if x is not None
    ]
    return frame, dets


WALK = [100, 120, 140, 160, 180, 200, None, None, None]  # appeared 0, crossed in 4 (x > 160 + margin)


def test_object_messages_carry_wall_times_frames_and_labels(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    monkeypatch.setattr(objects_step, "time", clock)
    step = ObjectsStep(lost_fast(tmp_path))
    img = real_photo("sample_0.jpg")  # 320 x 240: the line at x = 160
    sent: list[tuple[str, dict[str, Any]]] = []
    put = lambda t, b, _=None: sent.append((t, b)) is None  # noqa: E731
    for k, x in enumerate(WALK):
        frame, dets = at(k, x, img)
        step.on_frame(frame, dets, put)
    events = [b for t, b in sent if t == step.topic]
    assert [b["event"] for b in events] == ["appeared", "line_crossed", "ended"]
    appeared, crossed, ended = events
    assert appeared["captured_at"] == round(10.1234 + 1000, 3) and appeared["frame"] == 100
    assert crossed["frame"] == 104 and crossed["captured_at"] == round(14.1234 + 1000, 3)
    assert ended["first_seen"] == round(10.1234 + 1000, 3) and ended["last_seen"] == round(15.1234 + 1000, 3)
    assert ended["frame"] > 105 and ended["captured_at"] == round(10.1234 + ended["frame"] - 100 + 1000, 3)
    assert all(b["label"] == "square" and b["device_id"] == "cam-x" for b in events)
    assert "snapshot_jpeg_b64" not in ended  # snapshot = false: no crop kept, none sent
    assert step.sent == 3
    # stop: no frame, the wall-clock offset of now; counts go out (a line is configured)
    step.stop(put)
    (counts,) = [b for t, b in sent if t == step.counts_topic]
    assert counts["lines"]["gate"]["in"] == 1 and step.sent == 4


def test_nothing_crosses_a_line_that_is_only_crossed_on_a_square_frame(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(objects_step, "time", Clock())
    step = ObjectsStep(lost_fast(tmp_path))
    img = real_photo("sample_0.jpg")  # 320 x 240: the line at 160, not at 120 (0.5 x the height)
    sent: list[tuple[str, dict[str, Any]]] = []
    for k, x in enumerate([100, 115, 130, 145]):
        frame, dets = at(k, x, img)
        step.on_frame(frame, dets, lambda t, b, _=None: sent.append((t, b)) is None)
    assert [b["event"] for _, b in sent] == ["appeared"]


def test_messages_the_queue_refuses_are_not_counted_as_sent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(objects_step, "time", Clock())
    step = ObjectsStep(lost_fast(tmp_path))
    img = real_photo("sample_0.jpg")
    for k, x in enumerate(WALK):
        frame, dets = at(k, x, img)
        step.on_frame(frame, dets, lambda t, b, _=None: False)
    step.stop(lambda t, b, _=None: False)
    assert step.sent == 0


def test_counts_go_out_when_their_interval_ends_with_the_operations_they_carry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    monkeypatch.setattr(objects_step, "time", clock)
    step = ObjectsStep(lost_fast(tmp_path, interval=60))
    img = real_photo("sample_0.jpg")
    sent: list[tuple[str, dict[str, Any]]] = []
    carried: dict[str, Any] = {}

    def put(t: str, b: dict[str, Any], tally: Optional[Sequence[Op]] = None) -> bool:
        sent.append((t, b))
        carried[b.get("event", "counts")] = list(tally or [])
        return True

    for k, x in enumerate(WALK[:5]):
        step.on_frame(*at(k, x, img), put)
    assert not [b for t, b in sent if t == step.counts_topic]
    clock.wall += 60
    step.on_frame(*at(5, 200, img), put)
    (counts,) = [b for t, b in sent if t == step.counts_topic]
    assert (
        counts["lines"]["gate"]["in"] == 1 and counts["interval_s"] == 60 and counts["device_id"] == "cam-x"
    )
    assert step.sent == len(sent) == 3
    assert carried["appeared"] == []
    assert carried["line_crossed"] == [
        ("add", '["totals","lines","gate","in"]', 1),
        ("add", '["interval","lines","gate","in"]', 1),
    ]
    assert sorted(carried["counts"]) == [  # the interval restarts with its message, and only then
        ("set", '["interval","lines","gate","in"]', 0),
        ("set", '["interval","lines","gate","out"]', 0),
        ("set", '["interval_start_ms"]', 1_700_000_060_000),
    ]


def test_the_crop_of_a_reduced_decode_is_scaled_and_clipped() -> None:
    img = np.arange(100 * 200 * 3, dtype=np.uint32).reshape(100, 200, 3).astype(np.uint8)
    frame = Frame(image=img, ts_mono=0.0, ts_wall=0.0, seq=0, source="t", full_size=(400, 200))
    crop = ObjectsStep._cropper(frame)
    got = crop((20.0, 10.0, 60.0, 50.0))  # / 2: x 10..30, y 5..25, the last pixel included
    assert got is not None and got.shape == (21, 21, 3) and (got == img[5:26, 10:31]).all()
    edge = crop((-30.0, -30.0, 500.0, 500.0))
    assert edge is not None and edge.shape == (100, 200, 3)
    one = crop((0.0, 0.0, 0.0, 0.0))
    assert one is not None and one.shape == (1, 1, 3)
    assert crop((10.0, 10.0, 8.0, 40.0)) is None  # x: 5 .. 4 + 1: empty
    assert crop((10.0, 10.0, 40.0, 8.0)) is None  # y: empty
    assert crop((10.0, 500.0, 40.0, 600.0)) is None  # below the frame


def test_objects_ended_by_stop_carry_wall_times_from_the_clocks_at_stop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()  # wall - monotonic = 1_700_000_000 - 500
    monkeypatch.setattr(objects_step, "time", clock)
    step = ObjectsStep(lost_fast(tmp_path))
    img = real_photo("sample_0.jpg")
    sent: list[dict[str, Any]] = []
    for k in range(2):
        frame, dets = at(k, 100 + 20 * k, img, offset=5.0)  # the frames' own offset is not used at stop
        step.on_frame(frame, dets, lambda t, b, _=None: sent.append(b) is None)
    step.stop(lambda t, b, _=None: sent.append(b) is None)
    (ended,) = [b for b in sent if b.get("event") == "ended"]
    assert ended["first_seen"] == round(10.1234 + 1_700_000_000.0 - 500.0, 3)
    assert ended["last_seen"] == round(11.1234 + 1_700_000_000.0 - 500.0, 3) and "frame" not in ended


def test_a_classifier_in_objects_mode_is_warned_about_once_at_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger=objects_step.log.name)
    ObjectsStep(cfg_for(tmp_path))
    assert not [r for r in caplog.records if "[classifier]" in r.getMessage()]
    cfg = cfg_for(tmp_path)
    cfg.classifier = parse_config('[classifier]\nmodel = "c.onnx"\n').classifier
    ObjectsStep(cfg)
    said = [r.getMessage() for r in caplog.records if "[classifier]" in r.getMessage()]
    assert len(said) == 1 and said[0].startswith("[classifier] in objects mode: ")


def test_an_import_the_queue_cannot_store_keeps_the_file_and_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from edge_agent.errors import QueueError

    ckpt = tmp_path / "object-counts.json"
    ckpt.write_text(
        json.dumps(
            {
                "interval_start": 5.0,
                "interval": {"lines": {}, "zones": {}},
                "totals": {"lines": {"gate": {"in": 3}}, "zones": {}},
            }
        )
    )

    class Refusing:
        def tallies(self) -> Mapping[str, int]:
            return {}

        def store_tallies(self, ops: Sequence[Op]) -> None:
            raise QueueError("q.db: cannot store the tallies: disk I/O error")

    step = ObjectsStep(cfg_for(tmp_path))
    with caplog.at_level(logging.ERROR):
        step.restore(Refusing())
    assert gate(step) == (3, 0)  # this run continues from the file
    assert ckpt.exists() and not (tmp_path / "object-counts.json.imported").exists()
    assert [r.getMessage() for r in caplog.records] == [
        f"{ckpt}: counts continue from it in this run, the import is incomplete: "
        "q.db: cannot store the tallies: disk I/O error"
    ]
