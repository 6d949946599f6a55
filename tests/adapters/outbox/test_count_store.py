"""The objects-mode count checkpoint: replaced durably (a power cut leaves the old counts or the
new), bounded on read, and every bad file one error naming it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from edge_agent.adapters.host import durable
from edge_agent.adapters.outbox import count_store
from edge_agent.errors import QueueError


def test_save_replaces_the_file_through_the_durable_helper(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dirs: list[Path] = []
    real = durable.fsync_dir
    monkeypatch.setattr(durable, "fsync_dir", lambda p: (dirs.append(Path(p)), real(p))[1])
    path = tmp_path / "state" / "counts.json"
    count_store.save(path, {"zones": {"door": {"in": 3}}})
    count_store.save(path, {"zones": {"door": {"in": 4}}})
    assert dirs == [path.parent, path.parent]  # written beside, renamed, directory synced: twice
    assert count_store.load(path) == {"zones": {"door": {"in": 4}}}
    assert os.listdir(path.parent) == ["counts.json"]
    assert oct(path.stat().st_mode & 0o777) == oct(0o644)


def test_a_checkpoint_of_exactly_the_cap_is_read_one_byte_more_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(count_store, "MAX_BYTES", 10)
    p = tmp_path / "c.json"
    p.write_bytes(b"[1,2,3,45]")  # 10 bytes
    assert count_store.load(p) == [1, 2, 3, 45]
    p.write_bytes(b"[1,2,3,456]")  # 11 bytes
    with pytest.raises(QueueError, match=r"c.json: count checkpoint larger than 10 bytes; not ours"):
        count_store.load(p)


def test_a_missing_checkpoint_is_none_and_a_broken_one_names_the_file(tmp_path: Path) -> None:
    assert count_store.load(tmp_path / "none.json") is None
    bad = tmp_path / "bad.json"
    bad.write_bytes(b"{half")
    with pytest.raises(QueueError, match=r"bad.json: count checkpoint is not JSON"):
        count_store.load(bad)
    bad.write_bytes(b"\xff\xfe")
    with pytest.raises(QueueError, match=r"bad.json: count checkpoint is not JSON"):
        count_store.load(bad)


def test_an_unwritable_place_is_one_queue_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(QueueError, match=r"cannot write the count checkpoint"):
        count_store.save(blocker / "counts.json", {"a": 1})
    with pytest.raises(ValueError):
        count_store.save(tmp_path / "nan.json", {"a": float("nan")})  # never written as NaN
    assert not (tmp_path / "nan.json").exists()
