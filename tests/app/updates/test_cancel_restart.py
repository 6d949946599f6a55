"""A cancel that arrives for a complete transfer (in the inbox, not yet installed) outlives a restart
(issue 36: it was a set in memory, so a kill -9 before the install still installed the package).
A real signed package goes through the receiver chunk by chunk into the inbox, its sender cancels
it, and a *new* agent side over the same state dir (what the next ``run`` builds) refuses it in one
line and installs nothing; a damaged or foreign mark is not believed (the package installs) and is
said so in one line."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from support.updates import INT8, SAMPLES, pack_in_process, trusted_key, with_keys, write_config

from edge_agent.adapters.updates.cancels import MARK
from edge_agent.adapters.updates.package_file import transfer_parts
from edge_agent.adapters.updates.receiver import ModelReceiver
from edge_agent.app.cli.configfile import load_config
from edge_agent.app.updates.agent_side import ModelUpdates, inbox_dir, release_run_lock
from edge_agent.core.config.schema import Config
from edge_agent.core.updates import cancel
from edge_agent.core.updates.binding import SignedBegin

BASE = "edge/cam-1/model"
TRIAL = "[model_update]\ntrial_s = 0\ntrial_min_frames = 3\ncollapse_ratio = 0.5\n"


@pytest.fixture
def cfg(tmp_path: Path) -> Config:
    return load_config(write_config(tmp_path, extra=with_keys(TRIAL)))


def deliver(cfg: Config, tmp_path: Path, tid: str) -> tuple[ModelReceiver, str]:
    """A signed package pushed as ``tid`` with a cancel commitment, all chunks in: in the inbox."""
    pkg = pack_in_process(
        tmp_path / f"{tid}.pkg",
        INT8,
        version="2.0",
        probe=sorted(SAMPLES.glob("*.jpg"))[:1],
        signature_key=trusted_key()[0],
    )
    plan, manifest, signature = transfer_parts(pkg)
    secret = cancel.new_secret()
    root = Path(cfg.device.state_dir) / "models"
    rec = ModelReceiver(cfg, root / "transfers", inbox_dir(cfg), lambda _: None)
    rec.load()
    rec.handle(f"{BASE}/begin", SignedBegin(tid, manifest, signature, cancel.commitment(secret)).to_json())
    body = pkg.read_bytes()[: plan.size]  # what `model push` sends: the body; the tar follows
    for i in range(plan.count):
        rec.handle(f"{BASE}/chunk/{tid}/{i}", body[i * plan.chunk_size : (i + 1) * plan.chunk_size])
    assert (inbox_dir(cfg) / f"{tid}.pkg").is_file(), rec.last_error
    return rec, secret


def restart_and_scan(cfg: Config) -> dict[str, Any]:
    """A new agent side over the same state dir (MQTT off: no receiver, no memory of the cancel)."""
    updates = ModelUpdates(cfg, lambda: None)
    try:
        updates.build_models(cfg)
        updates.scan_inbox()
        return updates.store.state().current, [
            json.loads(p.read_text()) for p in sorted(inbox_dir(cfg).glob("*.result.json"))
        ]
    finally:
        updates.stop()
        release_run_lock(cfg)


def test_a_cancel_of_a_complete_transfer_is_kept_on_disk_and_refused_after_a_restart(
    cfg: Config, tmp_path: Path
) -> None:
    rec, secret = deliver(cfg, tmp_path, "a1b2c3d4e5f60718")
    rec.handle(f"{BASE}/cancel/a1b2c3d4e5f60718", secret.encode())
    mark = inbox_dir(cfg) / f"a1b2c3d4e5f60718{MARK}"
    assert mark.read_bytes() == secret.encode() and rec.counts["refused"] == 0
    del rec  # kill -9: nothing of the receiver's memory reaches the next start
    current, results = restart_and_scan(cfg)
    assert current is None  # not installed
    assert [(r["outcome"], r["detail"]) for r in results] == [
        (
            "refused",
            "a1b2c3d4e5f60718.pkg: transfer a1b2c3d4e5f60718 was cancelled by its sender before the "
            "install: not installed",
        )
    ]
    assert sorted(p.name for p in inbox_dir(cfg).iterdir()) == ["a1b2c3d4e5f60718.result.json"]


@pytest.mark.parametrize(
    ("mark_bytes", "why"),
    [
        (lambda s: s.encode()[:31], "a damaged cancel mark (31 bytes, not a secret); not believed"),
        (
            lambda s: cancel.new_secret().encode(),
            "secret does not open the request's commitment; not believed",
        ),
    ],
)
def test_a_torn_or_foreign_mark_is_not_believed_and_said_in_one_line(
    cfg: Config, tmp_path: Path, caplog: pytest.LogCaptureFixture, mark_bytes: Any, why: str
) -> None:
    _, secret = deliver(cfg, tmp_path, "0011223344556677")
    (inbox_dir(cfg) / f"0011223344556677{MARK}").write_bytes(mark_bytes(secret))
    with caplog.at_level(logging.WARNING, logger="edge_agent.model_update"):
        current, results = restart_and_scan(cfg)
    assert [r["outcome"] for r in results] == ["switched"] and current is not None
    lines = [r.getMessage() for r in caplog.records if "cancel mark" in r.getMessage()]
    assert len(lines) == 1 and lines[0].endswith(why) and "\n" not in lines[0]
    assert not (inbox_dir(cfg) / f"0011223344556677{MARK}").exists()


def test_a_mark_left_after_its_package_went_is_removed_at_the_next_scan(cfg: Config) -> None:
    inbox_dir(cfg).mkdir(parents=True, exist_ok=True)
    stale = inbox_dir(cfg) / f"ffeeddccbbaa9988{MARK}"
    stale.write_bytes(cancel.new_secret().encode())
    restart_and_scan(cfg)
    assert not stale.exists()
