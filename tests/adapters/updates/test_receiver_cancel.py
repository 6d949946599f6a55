"""Cancelling a transfer (core.updates.cancel, adapters.updates.cancels), fed directly to the
receiver: only the secret the transfer's own begin committed to cancels it; a transfer arriving is
deleted and its later chunks dropped quietly; a complete one is marked so it is never installed."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from support.updates import make_begin, with_keys, write_config

from edge_agent.adapters.updates.receiver import ModelReceiver
from edge_agent.adapters.updates.transfers import read_done
from edge_agent.app.cli.configfile import load_config
from edge_agent.core.updates import cancel

BASE = "edge/cam-1/model"
DATA = os.urandom(3000)


def _receiver(tmp_path: Path) -> tuple[ModelReceiver, Path, list[Any]]:
    cfg = load_config(write_config(tmp_path, extra=with_keys("")))
    root = Path(cfg.device.state_dir)
    events: list[Any] = []
    rec = ModelReceiver(cfg, root / "transfers", root / "inbox", events.append)
    rec.load()
    return rec, root, events


def _begin(commit: Any, tid: str = "t1") -> bytes:
    body = json.loads(make_begin(DATA, tid, 1024))
    if commit is not None:
        body["cancel_sha256"] = commit
    return json.dumps(body).encode()


def _chunks(rec: ModelReceiver, which: range, tid: str = "t1") -> None:
    for i in which:
        rec.handle(f"{BASE}/chunk/{tid}/{i}", DATA[i * 1024 : (i + 1) * 1024])


def test_the_senders_secret_cancels_a_transfer_arriving_and_its_late_chunks_are_dropped_quietly(
    tmp_path: Path,
) -> None:
    rec, root, events = _receiver(tmp_path)
    secret = cancel.new_secret()
    rec.handle(f"{BASE}/begin", _begin(cancel.commitment(secret)))
    _chunks(rec, range(1))
    assert (root / "transfers" / "t1").is_dir()
    rec.handle(f"{BASE}/cancel/t1", secret.encode())
    assert not (root / "transfers" / "t1").exists() and "t1" in read_done(root / "transfers")
    assert events[-1] == {"transfer_id": "t1", "cancelled": True}
    _chunks(rec, range(1, 3))  # still queued at the broker: acknowledged, not counted as strays
    assert rec.counts["unknown_transfer"] == 0 and rec.counts["refused"] == 0
    assert not list((root / "inbox").glob("*.pkg"))


@pytest.mark.parametrize("commit", ["ours", None])
def test_another_secret_or_a_begin_without_commitment_cancels_nothing(tmp_path: Path, commit: Any) -> None:
    rec, root, _ = _receiver(tmp_path)
    rec.handle(f"{BASE}/begin", _begin(cancel.commitment(cancel.new_secret()) if commit else None))
    rec.handle(f"{BASE}/cancel/t1", cancel.new_secret().encode())
    rec.handle(f"{BASE}/cancel/t1", b"not hex")
    assert rec.counts["refused"] == 2 and "cancel of transfer t1" in str(rec.last_error)
    _chunks(rec, range(3))
    assert (root / "inbox" / "t1.pkg").is_file() and rec.cancelled == set()


def test_a_replayed_begin_keeps_the_first_commitment(tmp_path: Path) -> None:
    rec, root, _ = _receiver(tmp_path)
    ours, theirs = cancel.new_secret(), cancel.new_secret()
    rec.handle(f"{BASE}/begin", _begin(cancel.commitment(ours)))
    rec.handle(f"{BASE}/begin", _begin(cancel.commitment(theirs)))  # same manifest: a resume
    rec.handle(f"{BASE}/cancel/t1", theirs.encode())
    assert (root / "transfers" / "t1").is_dir() and rec.counts["refused"] == 1
    rec.handle(f"{BASE}/cancel/t1", ours.encode())
    assert not (root / "transfers" / "t1").exists()


def test_a_complete_transfer_not_yet_installed_is_marked_cancelled(tmp_path: Path) -> None:
    rec, root, events = _receiver(tmp_path)
    secret = cancel.new_secret()
    rec.handle(f"{BASE}/begin", _begin(cancel.commitment(secret)))
    _chunks(rec, range(3))
    req = json.loads((root / "inbox" / "t1.request.json").read_text())
    assert req == {"origin": "mqtt:t1", "cancel_sha256": cancel.commitment(secret)}
    rec.handle(f"{BASE}/cancel/t1", secret.encode())
    assert rec.cancelled == {"t1"} and events[-1] == {"transfer_id": "t1", "cancelled": True}


def test_a_secret_opens_only_its_own_commitment() -> None:
    s = cancel.new_secret()
    assert cancel.honours(s, cancel.commitment(s))
    assert not cancel.honours(cancel.new_secret(), cancel.commitment(s))
    assert not cancel.honours(s, None)
    with pytest.raises(ValueError):
        cancel.parse_secret(s.upper().encode())
