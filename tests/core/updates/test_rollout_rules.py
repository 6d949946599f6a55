"""The staged-rollout rules (core/updates/rollout.py): canary counts, stages, what a status says
about a rollout, and when a rollout moves on or halts."""

from __future__ import annotations

from typing import Any, Optional

import pytest
from hypothesis import given
from hypothesis import strategies as st

from edge_agent.core.updates.rollout import (
    CanarySpec,
    Verdict,
    decide,
    parse_canary,
    plan_stages,
    verdict_of,
    waiting,
)

VID = "demo-2.0-abcdef12"
TID = "r1-s0"


@pytest.mark.parametrize(
    ("text", "members", "n"),
    [("1", 5, 1), ("3", 2, 2), ("10%", 5, 1), ("20%", 5, 1), ("21%", 5, 2), ("100%", 7, 7), ("50%", 1, 1)],
)
def test_canary_count(text: str, members: int, n: int) -> None:
    assert parse_canary(text).how_many(members) == n


@pytest.mark.parametrize("text", ["0", "0%", "101%", "-1", "1.5", "%", "", "ten", "5 %", "1e3"])
def test_a_bad_canary_is_one_line_naming_it(text: str) -> None:
    with pytest.raises(ValueError, match=r"^--canary .*: expected "):
        parse_canary(text)


@given(st.text(max_size=12))
def test_parse_canary_never_raises_anything_else(text: str) -> None:
    try:
        spec = parse_canary(text)
    except ValueError:
        return
    assert spec.count >= 1 and (not spec.percent or spec.count <= 100)


@given(
    st.lists(st.from_regex(r"[a-z0-9-]{1,8}", fullmatch=True), min_size=1, max_size=30),
    st.integers(1, 120),
    st.booleans(),
    st.integers(0, 10),
)
def test_stages_cover_every_member_once_canaries_first_sorted(
    members: list[str], n: int, pct: bool, wave: int
) -> None:
    spec = CanarySpec(min(n, 100) if pct else n, pct)
    stages = plan_stages(members, spec, wave)
    flat = [d for s in stages for d in s]
    assert flat == sorted(set(members))  # deterministic: sorted ids, each once
    assert 1 <= len(stages[0]) == spec.how_many(len(set(members)))
    assert all(stages[1:])
    assert len(stages) <= 2 if wave == 0 else all(len(s) <= wave for s in stages[1:])
    assert plan_stages(list(reversed(members)), spec, wave) == stages  # the order given does not matter


def status(
    current: Optional[str] = None,
    trial: Optional[str] = None,
    last: Optional[dict[str, Any]] = None,
    transfer: Optional[dict[str, Any]] = None,
) -> dict[str, Any]:
    cur = {"id": current} if current else {"id": None, "model": "x.onnx"}
    tr = (
        {"vid": trial, "since": 1.0, "running": True, "baseline_rate": None, "forced": False}
        if trial
        else None
    )
    return {
        "device_id": "cam-1",
        "model_update": {"current": cur, "trial": tr, "last": last, "transfer": transfer},
    }


def ev(outcome: str, origin: str = f"mqtt:{TID}", name: str = VID) -> dict[str, Any]:
    return {"outcome": outcome, "detail": f"{outcome} because", "origin": origin, "version": {"name": name}}


def test_verdicts_from_a_status() -> None:
    assert verdict_of(status(VID, VID, ev("switched")), TID, VID) == (Verdict.SWITCHED, "switched because")
    assert verdict_of(status(VID), TID, VID) == (Verdict.PASSED, f"{VID} runs, its trial is over")
    assert verdict_of(status(VID, "other-1"), TID, VID)[0] is Verdict.PASSED  # type: ignore[index]
    assert verdict_of(status(last=ev("refused")), TID, VID) == (Verdict.REFUSED, "refused because")
    # a rollback of this version, whatever its origin (the trial: "agent"; `model rollback`: "cli")
    assert verdict_of(status(last=ev("rolled_back", "agent")), TID, VID) == (
        Verdict.ROLLED_BACK,
        "rolled_back because",
    )
    refused_at_begin = status(transfer={"transfer_id": TID, "refused": "bad signature"})
    assert verdict_of(refused_at_begin, TID, VID) == (Verdict.REFUSED, "bad signature")


def test_no_verdict_from_what_is_not_this_rollout() -> None:
    assert verdict_of({"device_id": "cam-1"}, TID, VID) is None  # no model_update block
    assert verdict_of({"model_update": None}, TID, VID) is None
    assert verdict_of(status(), TID, VID) is None
    assert verdict_of(status(last=ev("refused", origin="mqtt:another")), TID, VID) is None
    assert verdict_of(status(last=ev("rolled_back", name="demo-1.0-00000000")), TID, VID) is None
    assert verdict_of(status(transfer={"transfer_id": "another", "refused": "x"}), TID, VID) is None
    assert verdict_of(status(transfer={"transfer_id": TID, "received": 3}), TID, VID) is None
    # a damaged block is no verdict, never an exception
    assert verdict_of({"model_update": {"current": "x", "last": 3, "transfer": []}}, TID, VID) is None


def test_a_device_already_running_the_version_passes_though_it_refuses_the_begin() -> None:
    s = status(
        VID, last=ev("switched", origin="mqtt:old"), transfer={"transfer_id": TID, "refused": "not newer"}
    )
    assert verdict_of(s, TID, VID) == (Verdict.PASSED, f"{VID} runs, its trial is over")


STAGES = [["a"], ["b", "c"], ["d", "e"]]
P, R, B, S = Verdict.PASSED, Verdict.REFUSED, Verdict.ROLLED_BACK, Verdict.SWITCHED


@pytest.mark.parametrize(
    ("verdicts", "k", "state", "stage", "reason"),
    [
        ({}, 1, "running", 0, ""),
        ({"a": S}, 1, "running", 0, ""),  # on trial: the rest waits
        ({"a": R}, 5, "halted", 0, "canary failed: a refused"),  # a failed canary halts whatever K
        ({"a": B}, 1, "halted", 0, "canary failed: a rolled_back"),
        ({"a": P}, 1, "running", 1, ""),
        ({"a": P, "b": P, "c": S}, 1, "running", 1, ""),
        ({"a": P, "b": P, "c": P}, 1, "running", 2, ""),
        ({"a": P, "b": R}, 2, "running", 1, ""),
        ({"a": P, "b": R, "c": P}, 2, "running", 2, ""),  # one failure, K 2: goes on
        ({"a": P, "b": R, "c": B}, 2, "halted", 1, "2 failed (--halt-after 2): b refused, c rolled_back"),
        ({"a": P, "b": R, "c": P, "d": P, "e": P}, 2, "done", 2, ""),
        ({"a": P, "b": P, "c": P, "d": P, "e": P}, 1, "done", 2, ""),
    ],
)
def test_decide(verdicts: dict[str, Verdict], k: int, state: str, stage: int, reason: str) -> None:
    d = decide(STAGES, verdicts, k)
    assert (d.state, d.stage, d.reason) == (state, stage, reason)


@given(
    st.dictionaries(st.sampled_from("abcde"), st.sampled_from(list(Verdict))),
    st.integers(1, 6),
)
def test_decide_never_goes_past_a_canary_that_did_not_pass(verdicts: dict[str, Verdict], k: int) -> None:
    d = decide(STAGES, verdicts, k)
    if verdicts.get("a") is not P:
        assert d.state == "halted" or (d.state == "running" and d.stage == 0)
    failed = sum(v in (R, B) for v in verdicts.values())
    if failed >= k:
        assert d.state == "halted"
    if d.state == "done":
        assert all(verdicts.get(x) in (P, R, B) for x in "abcde") and failed < k


def test_waiting_names_who_and_what() -> None:
    assert waiting(["a", "b", "c"], {"a": P, "b": S}) == {"b": "on trial", "c": "no answer"}
