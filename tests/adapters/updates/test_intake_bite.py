"""The receiver's intake (adapters/updates/intake.py) beyond test_receiver_rules.py, from the first
mutation run's survivors (issue 36): the free-space floor to the byte for a begin, every refusal's
reason as the sender and the status see it (a bad cancel or chunk topic, an unparsable begin, a
begin signed by another key, no trusted keys, a package naming nobody, a chunk index one past the
plan), the transfer id of a refused begin of the largest size, and the log lines of a begin and of
a cancel."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import pytest
from support.updates import make_begin, signed_begin, with_keys, write_config

from edge_agent.adapters.updates import signing
from edge_agent.adapters.updates.intake import TransferIntake, transfer_floor
from edge_agent.app.cli.configfile import load_config
from edge_agent.core.updates import cancel
from edge_agent.core.updates.binding import MAX_SIGNED_BEGIN, parse_signed_begin
from edge_agent.core.updates.package import check_transfer_id
from edge_agent.errors import EdgeAgentError

BASE = "edge/cam-1/model"
DATA = os.urandom(2500)  # 3 chunks of 1024: 1024, 1024, 452
FS_SIZE = 1 << 34


def intake(tmp_path: Path, keys: bool = True, free: int | None = None) -> tuple[TransferIntake, list[Any]]:
    cfg = load_config(write_config(tmp_path, extra=with_keys("") if keys else ""))
    root = Path(cfg.device.state_dir)
    events: list[Any] = []
    if free is None:
        it = TransferIntake(cfg, root / "transfers", root / "inbox", events.append)
    else:
        it = TransferIntake(cfg, root / "transfers", root / "inbox", events.append, lambda p: (free, FS_SIZE))
    it.bases = [BASE]
    it.load()
    return it, events


def floor_of(tmp_path: Path) -> int:
    cfg = load_config(write_config(tmp_path, extra=with_keys("")))
    work = Path(cfg.device.state_dir) / "transfers"
    work.mkdir(parents=True, exist_ok=True)
    return transfer_floor(cfg, work, FS_SIZE)


@pytest.mark.parametrize("spare", [0, -1])
def test_a_begin_is_stored_only_while_the_floor_stays_free_to_the_byte(tmp_path: Path, spare: int) -> None:
    """free - (package + begin) == floor: stored; one byte less: refused as low_space, nothing kept,
    the status's last_error the whole reason."""
    begin = make_begin(DATA, "t1", 1024)
    need = len(DATA) + len(begin)
    floor = floor_of(tmp_path)
    it, events = intake(tmp_path, free=floor + need + spare)
    it.handle(f"{BASE}/begin", begin)
    work = Path(it.dir)
    if spare == 0:
        assert it.counts["refused"] == 0 and (work / "t1" / "begin.json").is_file()
        return
    assert (it.counts["refused"], it.counts["low_space"]) == (1, 1) and not (work / "t1").exists()
    free = floor + need - 1
    assert events == []  # refused after the signature check: only _verified's refusals go to the sender
    assert it.last_error == (
        f"message on '{BASE}/begin': transfer t1 ({len(DATA)} bytes): {free} bytes free on the state "
        f"filesystem, storing {need} more would leave less than the {floor}-byte floor kept for the "
        "queue (model_update.transfer_min_free_mb / _percent); re-push when there is room"
    )


def test_a_bad_cancel_or_chunk_topic_gives_its_reason(tmp_path: Path) -> None:
    it, _ = intake(tmp_path)
    with pytest.raises(ValueError) as why:
        check_transfer_id("t 1")
    it.handle(f"{BASE}/cancel/t 1", b"secret")
    assert it.last_error == f"message on '{BASE}/cancel/t 1': {why.value}"
    it.handle(f"{BASE}/chunk/t1", b"x")
    assert it.last_error == f"message on '{BASE}/chunk/t1': expected .../chunk/<transfer id>/<index>"
    assert it.counts["refused"] == 2


def test_an_unparsable_begin_is_unsigned_with_the_parsers_reason(tmp_path: Path) -> None:
    it, events = intake(tmp_path)
    with pytest.raises(ValueError) as why:
        parse_signed_begin(b"[1, 2]")
    it.handle(f"{BASE}/begin", b"[1, 2]")
    assert (it.counts["refused"], it.counts["unsigned"]) == (1, 1)
    assert it.last_error == f"message on '{BASE}/begin': {why.value}"
    assert events == [{"transfer_id": None, "refused": str(why.value)}]


def test_a_begin_signed_by_another_key_is_unsigned_with_the_verifiers_reason(tmp_path: Path) -> None:
    it, events = intake(tmp_path)
    other = tmp_path / "other.key"
    signing.generate_key(other)
    payload = signed_begin(other, DATA, "t1", 1024)[0]
    begin = parse_signed_begin(payload)
    with pytest.raises(EdgeAgentError) as why:
        signing.verify(begin.manifest_data, begin.signature, it.cfg.model_update.trusted_keys, "transfer t1")
    it.handle(f"{BASE}/begin", payload)
    assert (it.counts["refused"], it.counts["unsigned"]) == (1, 1)
    assert it.last_error == f"message on '{BASE}/begin': {why.value}"
    assert events == [{"transfer_id": "t1", "refused": str(why.value)}]


def test_without_trusted_keys_every_begin_is_unsigned(tmp_path: Path) -> None:
    it, events = intake(tmp_path, keys=False)
    it.handle(f"{BASE}/begin", make_begin(DATA, "t1", 1024))
    assert (it.counts["refused"], it.counts["unsigned"]) == (1, 1)
    line = "transfer t1: no trusted_keys: nothing from MQTT is installed"
    assert it.last_error == f"message on '{BASE}/begin': {line}"
    assert events == [{"transfer_id": "t1", "refused": line}]
    assert not (Path(it.dir) / "t1").exists()


def test_a_package_naming_no_device_or_group_is_not_taken_over_mqtt(tmp_path: Path) -> None:
    it, events = intake(tmp_path)
    it.handle(f"{BASE}/begin", make_begin(DATA, "t1", 1024, for_devices=[]))
    assert (it.counts["refused"], it.counts["not_for_device"]) == (1, 1)
    assert (
        "names no device or group: a package sent over the network must say whom it is for"
        in (events[0]["refused"])
    )
    assert not (Path(it.dir) / "t1").exists()


def test_a_refused_begin_of_exactly_the_largest_size_still_names_its_transfer(tmp_path: Path) -> None:
    it, events = intake(tmp_path)
    body = json.dumps({"transfer_id": "t7"}).encode()  # no manifest: refused
    payload = body[:-1] + b" " * (MAX_SIGNED_BEGIN - len(body)) + b"}"
    assert len(payload) == MAX_SIGNED_BEGIN
    it.handle(f"{BASE}/begin", payload)
    assert it.counts["unsigned"] == 1 and events[0]["transfer_id"] == "t7"


@pytest.mark.parametrize("idx", [3, 7])
def test_a_chunk_past_the_plan_is_a_bad_chunk_saying_what_the_plan_has(tmp_path: Path, idx: int) -> None:
    """Index 3 of a 3-chunk plan with the last chunk's length: refused (not a failure), like 7."""
    it, _ = intake(tmp_path)
    it.handle(f"{BASE}/begin", make_begin(DATA, "t1", 1024))
    it.handle(f"{BASE}/chunk/t1/{idx}", DATA[2048:])
    assert (it.counts["refused"], it.counts["bad_chunk"], it.counts["failed"]) == (1, 1, 0)
    assert it.last_error == (
        f"message on '{BASE}/chunk/t1/{idx}': transfer t1: chunk {idx} of 452 bytes; the signed plan has 3 "
        "chunks, this one of 452 bytes"
    )


def test_a_begin_and_a_cancel_are_logged_by_name(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="edge_agent.model_mqtt")
    it, _ = intake(tmp_path)
    secret, late = cancel.new_secret(), cancel.new_secret()
    for tid, s in (("t1", secret), ("t2", late)):
        body = json.loads(make_begin(DATA, tid, 1024))
        body["cancel_sha256"] = cancel.commitment(s)
        it.handle(f"{BASE}/begin", json.dumps(body).encode())
    assert "model transfer t1: demo 9.0, 2500 bytes in 3 chunks" in caplog.messages
    it.handle(f"{BASE}/cancel/t1", secret.encode())
    assert "model transfer t1 dropped: cancelled by its sender" in caplog.messages
    for i in range(3):
        it.handle(f"{BASE}/chunk/t2/{i}", DATA[i * 1024 : (i + 1) * 1024])
    assert it.completed == ["t2"]
    it.handle(f"{BASE}/cancel/t2", late.encode())  # complete, in the inbox: marked, never installed
    assert "model transfer t2 cancelled by its sender: it will not be installed" in caplog.messages
    assert it.cancelled == {"t2"} and it.counts["refused"] == 0
