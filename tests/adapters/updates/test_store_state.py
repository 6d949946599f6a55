"""The store's state (active.json) as typed data: a damaged file is one line naming the field,
outcomes keep their wire values, and every durable write goes through one helper."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edge_agent.adapters.host import durable
from edge_agent.adapters.updates.store import ModelStore
from edge_agent.core.updates.store_state import Highest, Outcome, StoreState, Trial, TrialWatch, event
from edge_agent.errors import ModelError

VID = "demo-2.0-0123abcd"


def full_state() -> StoreState:
    return StoreState(
        current=VID,
        history=[None, "demo-1.0-89abcdef"],
        trial=Trial(vid=VID, since=1.5e9, running=True, baseline_rate=2.5, forced=True),
        highest=Highest(version="2.0", vid=VID),
        last=event(Outcome.SWITCHED, "gate passed", "cli", 1.5e9, {"name": "demo"}),
        updated_at=1.5e9,
        extra={"from_a_newer_agent": [1, 2]},
    )


def test_the_state_round_trips_through_json_unknown_keys_included() -> None:
    s = full_state()
    back = StoreState.from_json(json.loads(json.dumps(s.to_json())), "active.json")
    assert back == s
    assert back.to_json()["from_a_newer_agent"] == [1, 2]  # a downgrade of the agent keeps them


def test_a_pointer_from_before_the_dataclasses_reads_as_it_did() -> None:
    # as PR #17's code wrote it: dict insertion order, no "highest" yet, trial as a plain object
    old = {
        "current": VID,
        "history": [None],
        "trial": {"vid": VID, "since": 1.0, "running": False, "baseline_rate": None, "forced": False},
        "last": {"outcome": "switched", "detail": "x", "version": None, "origin": "cli", "at": 1.0},
        "updated_at": 2.0,
    }
    s = StoreState.from_json(old, "active.json")
    assert s.current == VID and s.history == [None] and s.highest is None
    assert s.trial == Trial(vid=VID, since=1.0)
    assert s.on_trial(VID) is s.trial and s.on_trial("other-1-00000000") is None
    assert s.kept() == [VID, None]
    assert s.to_json() == {**old, "updated_at": 2.0}


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ([], "expected a JSON object"),
        ({"current": 5}, "current"),
        ({"current": "../../etc"}, "current"),
        ({"current": ".."}, "current"),
        ({"history": "v1"}, "history"),
        ({"history": [None, 3]}, "history[1]"),
        ({"trial": "yes"}, "trial"),
        ({"trial": {"since": 1.0}}, "trial.vid"),
        ({"trial": {"vid": VID, "since": "now"}}, "trial.since"),
        ({"trial": {"vid": VID, "since": 1.0, "running": "no"}}, "trial.running"),
        ({"trial": {"vid": VID, "since": 1.0, "baseline_rate": True}}, "trial.baseline_rate"),
        ({"highest": {"vid": VID}}, "highest.version"),
        ({"highest": {"version": "2", "vid": "a/b"}}, "highest.vid"),
        ({"last": [1]}, "last"),
        ({"updated_at": "yesterday"}, "updated_at"),
    ],
)
def test_a_damaged_state_is_one_error_naming_the_field(data: Any, field: str) -> None:
    with pytest.raises(ModelError) as err:
        StoreState.from_json(data, "/s/models/active.json")
    msg = str(err.value)
    assert msg.startswith("/s/models/active.json: ") and field in msg and "\n" not in msg, msg


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=8), kids, max_size=3),
    max_leaves=12,
)
_keys = st.sampled_from(["current", "history", "trial", "highest", "last", "updated_at", "x"])


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(_keys, _json | st.just(VID) | st.just({"vid": VID, "since": 1}), max_size=6))
def test_any_json_is_a_state_or_a_model_error_never_a_crash(data: dict[str, Any]) -> None:
    try:
        s = StoreState.from_json(data, "active.json")
    except ModelError:
        return
    assert StoreState.from_json(json.loads(json.dumps(s.to_json())), "active.json") == s


def test_the_store_reads_a_damaged_pointer_as_no_pointer_in_one_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = ModelStore(str(tmp_path)).ensure()
    store.pointer.write_text(json.dumps({"current": VID, "trial": {"vid": 7}}))
    with caplog.at_level(logging.ERROR):
        state = store.state()
    assert state == StoreState()  # the config's model runs
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and "trial.vid" in errors[0] and str(store.pointer) in errors[0], errors
    assert store.pointer.with_suffix(".corrupt").exists() and not store.pointer.exists()


def test_the_store_saves_what_it_reads(tmp_path: Path) -> None:
    store = ModelStore(str(tmp_path))
    s = full_state()
    store.save(s)
    assert store.state() == s and s.updated_at is not None
    assert oct(store.pointer.stat().st_mode & 0o777) == oct(durable.FILE_MODE)


def test_outcomes_keep_their_wire_values() -> None:
    # docs/model-updates.md, result.json, the status topic and `model push` read these strings
    assert {o.value for o in Outcome} == {"switched", "refused", "unchanged", "rolled_back"}
    for o in Outcome:
        assert o == o.value and str(o) == o.value and f"{o}" == o.value and json.dumps(o) == f'"{o.value}"'
    ev = event(Outcome.ROLLED_BACK, "d", "agent", 3.0)
    assert json.dumps(ev) == (
        '{"outcome": "rolled_back", "detail": "d", "version": null, "origin": "agent", "at": 3.0, '
        '"gate": null, "signed_by_key": null}'
    )


def test_a_trial_is_confirmed_after_its_time_and_frames_once() -> None:
    w = TrialWatch(Trial(vid=VID, since=0.0, baseline_rate=2.0), started=100.0)
    verdicts = [w.observe(2, 100.0 + i, trial_s=10, min_frames=5, collapse_ratio=0.3) for i in range(20)]
    assert [i for i, v in enumerate(verdicts) if v is not None] == [10]  # 10 s and >= 5 frames
    v = verdicts[10]
    assert v is not None and v.passed and w.done and w.frames == 11


def test_a_collapsed_trial_is_rolled_back_with_the_figures_once() -> None:
    w = TrialWatch(Trial(vid=VID, since=0.0, baseline_rate=4.0), started=0.0)
    verdicts = [w.observe(0, 1.0, trial_s=600, min_frames=30, collapse_ratio=0.3) for _ in range(40)]
    got = [(i, v) for i, v in enumerate(verdicts) if v is not None]
    assert len(got) == 1 and got[0][0] == 29 and not got[0][1].passed  # at trial_min_frames
    assert "0.00/frame over 30 frames, the previous model had 4.00/frame" in got[0][1].reason


def test_no_baseline_means_no_collapse_verdict() -> None:
    w = TrialWatch(Trial(vid=VID, since=0.0, baseline_rate=None), started=0.0)
    assert all(w.observe(0, 1.0, trial_s=600, min_frames=3, collapse_ratio=0.3) is None for _ in range(50))


def test_a_failed_durable_write_leaves_the_old_file_and_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "f.json"
    durable.write_durable(target, b"old")
    with pytest.raises(RuntimeError), durable.durable_file(target) as f:
        f.write(b"half of the new")
        raise RuntimeError("disk gone")
    assert target.read_bytes() == b"old" and sorted(os.listdir(tmp_path)) == ["f.json"]


def test_copy_and_move_durable(tmp_path: Path) -> None:
    src = tmp_path / "a.pkg"
    src.write_bytes(b"x" * 3_000_000)
    (tmp_path / "in").mkdir()
    durable.copy_durable(src, tmp_path / "in" / "b.pkg", 0o600)
    assert (tmp_path / "in" / "b.pkg").read_bytes() == src.read_bytes() and src.exists()
    assert (tmp_path / "in" / "b.pkg").stat().st_mode & 0o777 == 0o600
    durable.move_durable(src, tmp_path / "in" / "c.pkg")
    assert not src.exists() and sorted(os.listdir(tmp_path / "in")) == ["b.pkg", "c.pkg"]


def test_no_write_then_rename_outside_the_durable_helper() -> None:
    """Model updates and the count checkpoint write through adapters/host/durable.py only; a module
    that renames a temp file into place must say why it needs no fsync (or use the helper)."""
    root = Path(__file__).resolve().parents[3] / "edge_agent"
    allowed = {
        "adapters/host/durable.py",
        "adapters/host/statusfile.py",  # on /run (tmpfs): no fsync on purpose (its docstring)
        "adapters/updates/frame_ring.py",  # losing the newest gate frame costs nothing (its docstring)
        "adapters/updates/store.py",  # renames a staged *directory*, then fsyncs versions/
        "adapters/updates/package_file.py",  # `model pack` output (an operator's file, not the device's state)
        "adapters/outbox/db.py",  # moves a damaged queue aside, no new content
        "app/cli/queue_cmd.py",  # `queue export` output: its own fsync+rename (issue 22 point 7 area)
        "tools/quantize.py",  # a quantized model written by the operator's tool
    }
    offenders = []
    for p in sorted(root.rglob("*.py")):
        rel = p.relative_to(root).as_posix()
        text = p.read_text(encoding="utf-8")
        if rel not in allowed and ("os.replace(" in text or "os.rename(" in text):
            offenders.append(rel)
    assert offenders == [], f"write through edge_agent/adapters/host/durable.py: {offenders}"


@pytest.mark.parametrize("vid", [f"{VID}\n", ".", "...", "a" * 201, "a b", ""])
def test_a_version_id_that_is_not_one_safe_path_part_is_refused(vid: str) -> None:
    with pytest.raises(
        ModelError, match=r"current: expected a version id \(letters, digits, _\.\+-\) or null"
    ):
        StoreState.from_json({"current": vid}, "active.json")


def test_required_fields_do_not_offer_null_and_optional_ones_do() -> None:
    with pytest.raises(ModelError) as err:
        StoreState.from_json({"trial": {"since": 1.0}}, "a.json")
    assert str(err.value) == "a.json: trial.vid: expected a version id (letters, digits, _.+-), got None"
    with pytest.raises(ModelError) as err:
        StoreState.from_json({"trial": {"vid": VID}}, "a.json")
    assert str(err.value) == "a.json: trial.since: expected a number, got None"
    with pytest.raises(ModelError) as err:
        StoreState.from_json({"updated_at": True}, "a.json")
    assert str(err.value) == "a.json: updated_at: expected a number or null, got True"
    with pytest.raises(ModelError) as err:
        StoreState.from_json({"trial": {"vid": VID, "since": 1, "forced": 1}}, "a.json")
    assert str(err.value) == "a.json: trial.forced: expected true or false, got 1"
    with pytest.raises(ModelError) as err:
        StoreState.from_json({"highest": {"version": ""}}, "a.json")
    assert str(err.value) == "a.json: highest.version: expected a version string, got ''"
    with pytest.raises(ModelError) as err:
        StoreState.from_json({"history": {"a": 1}}, "a.json")
    assert str(err.value) == "a.json: history: expected a list of version ids, got {'a': 1}"


def test_a_long_bad_value_is_shown_shortened() -> None:
    with pytest.raises(ModelError) as err:
        StoreState.from_json({"last": "x" * 500}, "a.json")
    assert str(err.value) == f"a.json: last: expected an object or null, got '{'x' * 59}"


def test_a_trial_ends_exactly_at_its_time_and_its_frame_count() -> None:
    w = TrialWatch(Trial(vid=VID, since=0.0), started=100.0)
    assert w.observe(1, 109.9, trial_s=10, min_frames=2, collapse_ratio=0.3) is None  # 1 frame, 9.9 s
    v = w.observe(3, 110.0, trial_s=10, min_frames=2, collapse_ratio=0.3)  # 2 frames, 10 s: both met
    assert v is not None and v.passed and v.reason == "2 frames in 10s, 2.00 detections/frame"
    assert w.observe(1, 200.0, trial_s=10, min_frames=2, collapse_ratio=0.3) is None  # one verdict
    assert (w.frames, w.detections) == (2, 4)  # nothing counted after the verdict


def test_a_collapse_verdict_names_the_ratio() -> None:
    w = TrialWatch(Trial(vid=VID, since=0.0, baseline_rate=2.0), started=0.0)
    v = w.observe(0, 0.0, trial_s=600, min_frames=1, collapse_ratio=0.25)
    assert v is not None and not v.passed
    assert v.reason == (
        "detection rate collapsed: 0.00/frame over 1 frames, the previous model had 2.00/frame "
        "(collapse_ratio 0.25)"
    )


def test_the_state_json_names_every_field_and_leaves_out_an_unknown_highest() -> None:
    s = StoreState(current=VID, history=["demo-1.0-89abcdef"], updated_at=5.0)
    assert s.to_json() == {
        "current": VID,
        "history": ["demo-1.0-89abcdef"],
        "trial": None,
        "last": None,
        "updated_at": 5.0,
    }
    t = Trial(vid=VID, since=1.0, running=True, baseline_rate=0.5, forced=True)
    assert t.to_json() == {"vid": VID, "since": 1.0, "running": True, "baseline_rate": 0.5, "forced": True}
    assert Highest("2.0", None).to_json() == {"version": "2.0", "vid": None}
    ev = event(Outcome.SWITCHED, "ok", "mqtt", 1.0, {"name": "demo"}, {"recall": 1.0}, 2)
    assert (ev["version"], ev["gate"], ev["signed_by_key"]) == ({"name": "demo"}, {"recall": 1.0}, 2)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], "a.json: expected a JSON object, got list"),
        ({"current": 5}, "a.json: current: expected a version id (letters, digits, _.+-) or null, got 5"),
        ({"trial": "yes"}, "a.json: trial: expected an object or null, got 'yes'"),
        (
            {"trial": {"vid": VID, "since": 1, "running": "no"}},
            "a.json: trial.running: expected true or false, got 'no'",
        ),
        (
            {"trial": {"vid": VID, "since": 1, "baseline_rate": True}},
            "a.json: trial.baseline_rate: expected a number or null, got True",
        ),
        ({"highest": 3}, "a.json: highest: expected an object or null, got 3"),
        (
            {"highest": {"version": "2", "vid": "a/b"}},
            "a.json: highest.vid: expected a version id (letters, digits, _.+-) or null, got 'a/b'",
        ),
    ],
)
def test_each_damaged_field_has_its_exact_line(data: Any, message: str) -> None:
    with pytest.raises(ModelError) as err:
        StoreState.from_json(data, "a.json")
    assert str(err.value) == message


def test_missing_optional_trial_and_highest_fields_take_their_defaults() -> None:
    s = StoreState.from_json({"trial": {"vid": VID, "since": 1}, "highest": {"version": "2"}}, "a.json")
    assert s.trial == Trial(vid=VID, since=1.0, running=False, baseline_rate=None, forced=False)
    assert s.highest == Highest(version="2", vid=None)


def test_a_collapse_verdict_is_a_failed_verdict() -> None:
    w = TrialWatch(Trial(vid=VID, since=0.0, baseline_rate=2.0), started=0.0)
    v = w.observe(0, 0.0, trial_s=600, min_frames=1, collapse_ratio=0.25)
    assert v is not None and v.passed is False
