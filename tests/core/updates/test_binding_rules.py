"""What a signed package is for (devices, groups, boards, agent version), the rolled-back set, and
the signed begin's format: pure rules, each refusal naming what it expected."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from edge_agent.core.updates.binding import (
    MAX_SIGNED_BEGIN,
    SignedBegin,
    Target,
    parse_signed_begin,
    rolled_back_problem,
    target_problem,
)
from edge_agent.core.updates.package import Manifest, PackageFile
from edge_agent.core.updates.store_state import MAX_ROLLED_BACK, RolledBack, StoreState
from edge_agent.errors import ModelError

ME = Target(device_id="cam-7", groups=("north", "line-2"), board="rpi5", agent_version="0.3.0")


def _m(**over: Any) -> Manifest:
    fields: dict[str, Any] = {
        "name": "demo",
        "version": "2.0",
        "created_at": "2026-11-30T00:00:00Z",
        "files": {"detector": PackageFile(path="detector.onnx", sha256="a" * 64, size=1)},
        **over,
    }
    return Manifest(**fields)


@pytest.mark.parametrize(
    ("over", "network", "why"),
    [
        ({}, True, "names no device or group: a package sent over the network must say whom it is for"),
        ({"for_groups": ["south"]}, True, "is for devices [] and groups ['south'], not for device 'cam-7'"),
        ({"for_devices": ["cam-8"]}, False, "not for device 'cam-7' (groups ['north', 'line-2'])"),
        (
            {"for_devices": ["cam-7"], "boards": ["jetson"]},
            True,
            "is for boards ['jetson'], this device is 'rpi5'",
        ),
        ({"boards": ["rpi4"]}, False, "is for boards ['rpi4']"),
        (
            {"for_groups": ["north"], "min_agent_version": "0.4"},
            True,
            "needs edge-agent >= 0.4, this agent is 0.3.0",
        ),
    ],
)
def test_a_package_not_for_this_device_is_refused_naming_why(
    over: dict[str, Any], network: bool, why: str
) -> None:
    problem = target_problem(_m(**over), ME, network=network)
    assert problem is not None and why in problem


@pytest.mark.parametrize(
    ("over", "network"),
    [
        ({"for_devices": ["cam-7"]}, True),
        ({"for_groups": ["line-2"]}, True),  # one of its groups is enough
        ({"for_devices": ["cam-1"], "for_groups": ["north"]}, True),
        ({"for_devices": ["cam-7"], "boards": ["rpi4", "rpi5"], "min_agent_version": "0.3"}, True),
        ({}, False),  # locally an untargeted package is the operator's choice
        ({"boards": ["rpi5"]}, False),
    ],
)
def test_a_package_for_this_device_passes(over: dict[str, Any], network: bool) -> None:
    assert target_problem(_m(**over), ME, network=network) is None


def test_the_long_target_lists_are_shortened_in_the_reason() -> None:
    problem = target_problem(_m(for_devices=[f"d{i}" for i in range(900)]), ME, network=True)
    assert problem is not None and "'d4', ...]" in problem and "'d5'" not in problem and len(problem) < 300


@given(
    st.lists(st.sampled_from(["cam-1", "cam-7", "cam-9"]), max_size=3),
    st.lists(st.sampled_from(["north", "south", "line-2"]), max_size=3),
)
def test_the_target_check_is_exactly_named_or_in_a_named_group(devices: list[str], groups: list[str]) -> None:
    ok = target_problem(_m(for_devices=devices, for_groups=groups), ME, network=True) is None
    assert ok == ("cam-7" in devices or bool({"north", "line-2"} & set(groups)))


def test_target_fields_are_bounded_and_shaped_like_topic_levels() -> None:
    for bad in (
        {"for_devices": ["a/b"]},
        {"for_groups": ["g/#"]},
        {"for_groups": ["x\n"]},
        {"boards": ["RPi5"]},
    ):
        with pytest.raises(ValueError):
            _m(**bad)
    with pytest.raises(ValueError):
        _m(for_devices=[f"d{i}" for i in range(1001)])


def _state(*versions: str) -> StoreState:
    s = StoreState()
    for v in versions:
        s.remember_rollback(
            RolledBack(version=v, vid=f"demo-{v}-aaaaaaaa", reason="trial: collapsed", at=1.0)
        )
    return s


def test_a_rolled_back_version_is_refused_whatever_its_spelling() -> None:
    problem = rolled_back_problem(_state("2.0"), _m(version="2.0.0"))  # PEP 440: 2.0 == 2.0.0
    assert (
        problem is not None and "version 2.0.0 was rolled back on this device (trial: collapsed)" in problem
    )
    assert "--allow-rolled-back" in problem
    assert rolled_back_problem(_state("2.0"), _m(version="2.1")) is None
    assert rolled_back_problem(StoreState(), _m()) is None


def test_the_rolled_back_set_survives_json_and_is_bounded() -> None:
    s = _state(*(f"1.{i}" for i in range(MAX_ROLLED_BACK + 5)), "1.3")  # 1.3 again: moved to the end
    assert len(s.rolled_back) == MAX_ROLLED_BACK and s.rolled_back[-1].version == "1.3"
    back = StoreState.from_json(json.loads(json.dumps(s.to_json())), "active.json")
    assert [r.version for r in back.rolled_back] == [r.version for r in s.rolled_back]
    assert "rolled_back" not in StoreState().to_json()  # absent when empty: older agents read it as before
    for bad, field in (
        ("x", "rolled_back: expected a list"),
        ([{"version": 5}], "rolled_back[0].version"),
        ([{"version": "1.0", "vid": "../x"}], "rolled_back[0].vid"),
        ([{"version": "1.0", "at": "now"}], "rolled_back[0].at"),
    ):
        with pytest.raises(ModelError, match=field.replace("[", r"\[").replace("]", r"\]")):
            StoreState.from_json({"rolled_back": bad}, "active.json")


def test_a_signed_begin_round_trips_and_the_old_format_is_refused_by_name() -> None:
    b = SignedBegin("t-1", b'{"m": 1}', b"s" * 64)
    assert parse_signed_begin(b.to_json()) == b
    old = {"transfer_id": "t-1", "size": 10, "sha256": "a" * 64, "chunks": 1, "chunk_size": 1024}
    with pytest.raises(ValueError, match="begin carries no signed manifest"):
        parse_signed_begin(json.dumps(old).encode())


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        (b"\xff", "begin is not JSON"),
        (b"[]", "begin is not a JSON object"),
        (json.dumps({"transfer_id": "a/b", "manifest": "", "signature": ""}).encode(), "transfer id 'a/b'"),
        (
            json.dumps({"transfer_id": "t", "manifest": 5, "signature": ""}).encode(),
            "begin field manifest: expected",
        ),
        (
            json.dumps({"transfer_id": "t", "manifest": "%%", "signature": ""}).encode(),
            "begin field manifest: not base64",
        ),
        (
            json.dumps(
                {"transfer_id": "t", "manifest": "", "signature": base64.b64encode(b"s" * 63).decode()}
            ).encode(),
            "begin field signature: 63 bytes, expected 64",
        ),
        (b" " * (MAX_SIGNED_BEGIN + 1), f"begin is {MAX_SIGNED_BEGIN + 1} bytes; expected at most"),
    ],
)
def test_a_bad_signed_begin_is_refused_naming_the_field(raw: bytes, why: str) -> None:
    with pytest.raises(ValueError) as err:
        parse_signed_begin(raw)
    assert why in str(err.value)
