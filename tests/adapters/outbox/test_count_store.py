"""The objects-mode count checkpoint of older versions, read once for the import: bounded on read,
and every bad file one error naming it."""

from __future__ import annotations

from pathlib import Path

import pytest

from edge_agent.adapters.outbox import count_store
from edge_agent.errors import QueueError


def test_the_module_only_reads_now() -> None:
    """The counters moved into the outbox (outbox.tallies): nothing writes this file any more."""
    assert not hasattr(count_store, "save")


def test_an_unreadable_checkpoint_is_one_queue_error(tmp_path: Path) -> None:
    d = tmp_path / "dir.json"
    d.mkdir()
    with pytest.raises(QueueError, match=r"dir.json: cannot read the count checkpoint"):
        count_store.load(d)


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


def test_an_imported_checkpoint_is_set_aside_and_never_read_again(tmp_path: Path) -> None:
    p = tmp_path / "counts.json"
    p.write_bytes(b'{"lines": {}}')
    done = count_store.set_aside(p)
    assert done == tmp_path / "counts.json.imported" and done.read_bytes() == b'{"lines": {}}'
    assert count_store.load(p) is None
    with pytest.raises(QueueError) as ei:
        count_store.set_aside(p)  # gone in the meantime
    assert str(ei.value) == f"{p}: cannot rename the imported count checkpoint: No such file or directory"


def test_an_unreadable_checkpoint_says_why(tmp_path: Path) -> None:
    d = tmp_path / "dir.json"
    d.mkdir()
    with pytest.raises(QueueError) as ei:
        count_store.load(d)
    assert str(ei.value) == f"{d}: cannot read the count checkpoint: Is a directory"
