"""core/updates/rollout.py, the edges its mutation run left (issue 36): the canary as recorded,
percentages of large groups, a status without detail or with a damaged trial, bounded details."""

from __future__ import annotations

from typing import Any

import pytest

from edge_agent.core.updates.rollout import CanarySpec, Decision, Verdict, decide, parse_canary, verdict_of

VID = "demo-2.0-abcdef12"
TID = "r1-s0"


@pytest.mark.parametrize("text", ["1", "3", "10%", "100%"])
def test_the_canary_as_recorded_reads_back_the_same(text: str) -> None:
    # rollout_run.py stores str(canary) with the rollout; `model rollout --resume` reads it back
    spec = parse_canary(text)
    assert str(spec) == text and parse_canary(str(spec)) == spec


@pytest.mark.parametrize(("pct", "members", "n"), [(100, 500, 500), (50, 202, 101), (10, 1000, 100)])
def test_a_percentage_of_a_large_group(pct: int, members: int, n: int) -> None:
    assert CanarySpec(pct, True).how_many(members) == n


def _status(mu: dict[str, Any]) -> dict[str, Any]:
    return {"device_id": "cam-1", "model_update": mu}


def test_a_verdict_without_detail_reads_as_no_detail_never_the_text_none() -> None:
    on_trial = _status({"current": {"id": VID}, "trial": {"vid": VID}, "last": {"outcome": "switched"}})
    assert verdict_of(on_trial, TID, VID) == (Verdict.SWITCHED, f"{VID} on trial")
    rolled = _status({"current": {"id": None}, "last": {"outcome": "rolled_back", "version": {"name": VID}}})
    assert verdict_of(rolled, TID, VID) == (Verdict.ROLLED_BACK, "")


def test_a_damaged_trial_block_is_no_trial() -> None:
    for trial in ("yes", 3, [VID]):
        s = _status({"current": {"id": VID}, "trial": trial})
        assert verdict_of(s, TID, VID) == (Verdict.PASSED, f"{VID} runs, its trial is over")


def test_details_from_a_device_are_bounded() -> None:
    long = "x" * 5000
    last = {"outcome": "refused", "origin": f"mqtt:{TID}", "detail": long}
    assert verdict_of(_status({"last": last}), TID, VID) == (Verdict.REFUSED, "x" * 500)
    begin = {"transfer_id": TID, "refused": long}
    assert verdict_of(_status({"transfer": begin}), TID, VID) == (Verdict.REFUSED, "x" * 500)


def test_no_stages_is_done_at_stage_0() -> None:
    assert decide([], {}, 1) == Decision("done", 0)
    assert decide([], {"a": Verdict.REFUSED}, 1) == Decision("done", 0)  # not one of its devices
