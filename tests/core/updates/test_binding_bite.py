"""The edges of the binding rules a sender or an attacker reaches (issue 36, the survivors of the
core-binding mutation run): the agent version at the floor, a rolled-back record that does not
parse, the cancel hash carried and checked, a begin without its transfer id, the size bound."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from edge_agent.core.updates.binding import (
    MAX_SIGNED_BEGIN,
    SignedBegin,
    Target,
    parse_signed_begin,
    rolled_back_problem,
    target_problem,
)
from edge_agent.core.updates.package import Manifest, PackageFile
from edge_agent.core.updates.store_state import RolledBack, StoreState

ME = Target(device_id="cam-7", groups=("north",), board="rpi5", agent_version="0.3.0")
SIG = b"s" * 64
CANCEL = "0123456789abcdef" * 4


def _m(**over: Any) -> Manifest:
    fields: dict[str, Any] = {
        "name": "demo",
        "version": "2.0",
        "created_at": "2026-11-30T00:00:00Z",
        "files": {"detector": PackageFile(path="detector.onnx", sha256="a" * 64, size=1)},
        "for_devices": ["cam-7"],
        **over,
    }
    return Manifest(**fields)


def _begin(**over: object) -> bytes:
    body: dict[str, object] = {
        "transfer_id": "t-1",
        "manifest": base64.b64encode(b'{"m": 1}').decode(),
        "signature": base64.b64encode(SIG).decode(),
        **over,
    }
    return json.dumps({k: v for k, v in body.items() if v is not None}).encode()


def test_an_agent_exactly_at_the_packages_minimum_version_installs_it() -> None:
    # ">= 0.3" in the manifest: 0.3.0 is enough, 0.2.9 is not
    assert target_problem(_m(min_agent_version="0.3"), ME, network=True) is None
    assert target_problem(_m(min_agent_version="0.3.0"), ME, network=True) is None
    old = Target(device_id="cam-7", groups=(), board="rpi5", agent_version="0.2.9")
    assert target_problem(_m(min_agent_version="0.3"), old, network=True) is not None


def test_an_unreadable_rolled_back_entry_does_not_hide_the_entries_after_it() -> None:
    s = StoreState()
    for v in ("not-a-version", "2.0"):
        s.remember_rollback(RolledBack(version=v, vid=None, reason="trial: collapsed", at=1.0))
    assert rolled_back_problem(s, _m(version="2.0")) is not None
    assert rolled_back_problem(s, _m(version="2.1")) is None


def test_the_cancel_hash_survives_the_round_trip_and_reaches_the_receiver() -> None:
    b = SignedBegin("t-1", b'{"m": 1}', SIG, cancel_sha256=CANCEL)
    back = parse_signed_begin(b.to_json())
    assert back == b and back.cancel_sha256 == CANCEL
    assert json.loads(b.to_json())["cancel_sha256"] == CANCEL
    assert parse_signed_begin(_begin(cancel_sha256=CANCEL)).cancel_sha256 == CANCEL
    assert parse_signed_begin(_begin()).cancel_sha256 is None


@pytest.mark.parametrize("bad", [CANCEL.upper(), CANCEL[:-1], CANCEL + "0", 5, ["x"], "z" * 64])
def test_a_cancel_hash_that_is_not_64_lowercase_hex_digits_refuses_the_begin(bad: object) -> None:
    with pytest.raises(ValueError, match="begin field cancel_sha256"):
        parse_signed_begin(_begin(cancel_sha256=bad))


@pytest.mark.parametrize("tid", [None, ""])
def test_a_begin_without_a_transfer_id_is_refused(tid: object) -> None:
    # a missing id must not become a valid-looking one ("None"): two such pushes would share a transfer
    with pytest.raises(ValueError, match="transfer id"):
        parse_signed_begin(_begin(transfer_id=tid))


def test_a_begin_of_exactly_the_bound_is_read_one_byte_more_is_refused() -> None:
    body = _begin()
    at = body[:-1] + b" " * (MAX_SIGNED_BEGIN - len(body)) + b"}"
    assert len(at) == MAX_SIGNED_BEGIN and parse_signed_begin(at).transfer_id == "t-1"
    with pytest.raises(ValueError, match="bytes; expected at most"):
        parse_signed_begin(at + b" ")


@pytest.mark.parametrize(("n", "more"), [(5, False), (6, True)])
def test_the_reason_says_more_devices_exist_only_when_some_are_not_shown(n: int, more: bool) -> None:
    # the operator reads the refusal to see whom the package was for: a "..." after the 5th of 5
    # would send them looking for a sixth device
    problem = target_problem(_m(for_devices=[f"d{i}" for i in range(n)]), ME, network=True)
    assert problem is not None and "'d4'" in problem
    assert (", ...]" in problem) is more


@pytest.mark.parametrize(
    ("over", "shown"),
    [({"cancel_sha256": "ABC"}, "'ABC'"), ({"manifest": 12345}, "'12345'"), ({"signature": None}, "'None'")],
)
def test_a_refused_begin_field_shows_the_value_received(over: dict[str, object], shown: str) -> None:
    with pytest.raises(ValueError) as err:
        parse_signed_begin(_begin(**over))
    assert f"got {shown}" in str(err.value)
