"""The one durable-write helper itself: the temp file's data is fsync'd before the rename, the
directory after it (a power cut then leaves the old file or the new, never an empty one), the mode
holds whatever the umask, and any interruption (Ctrl-C included) leaves the old file and no temp."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from edge_agent.adapters.host import durable


@pytest.fixture
def steps(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """The helper's fsync/replace/fsync_dir calls, in order, with what each one touched."""
    seen: list[tuple[str, str]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        seen.append(("fsync", os.path.basename(os.readlink(f"/proc/self/fd/{fd}"))))
        real_fsync(fd)

    def replace(src: str | Path, dst: str | Path) -> None:
        seen.append(("replace", f"{Path(src).name}->{Path(dst).name}"))
        real_replace(src, dst)

    def fsync_dir(path: Path) -> None:
        seen.append(("fsync_dir", Path(path).name))
        fd = os.open(str(path), os.O_RDONLY)  # the real thing, without the spied os.fsync
        try:
            real_fsync(fd)
        finally:
            os.close(fd)

    monkeypatch.setattr(durable.os, "fsync", fsync)
    monkeypatch.setattr(durable.os, "replace", replace)
    monkeypatch.setattr(durable, "fsync_dir", fsync_dir)
    return seen


@pytest.fixture
def umask() -> Iterator[None]:
    old = os.umask(0o077)
    try:
        yield
    finally:
        os.umask(old)


def test_write_durable_syncs_the_data_then_renames_then_syncs_the_directory(
    tmp_path: Path, steps: list[tuple[str, str]]
) -> None:
    target = tmp_path / "d" / "active.json"
    target.parent.mkdir()
    target.write_bytes(b"old")
    durable.write_durable(target, b"new")
    tmp = f".active.json.{os.getpid()}.tmp"
    assert steps == [("fsync", tmp), ("replace", f"{tmp}->active.json"), ("fsync_dir", "d")]
    assert target.read_bytes() == b"new" and os.listdir(target.parent) == ["active.json"]


def test_commit_durable_syncs_the_written_file_before_the_rename(
    tmp_path: Path, steps: list[tuple[str, str]]
) -> None:
    written = tmp_path / "model.onnx.part"
    written.write_bytes(b"model")
    durable.commit_durable(written, tmp_path / "model.onnx")
    assert steps == [
        ("fsync", "model.onnx.part"),
        ("replace", "model.onnx.part->model.onnx"),
        ("fsync_dir", tmp_path.name),
    ]


def test_move_durable_syncs_the_directory_after_a_rename(
    tmp_path: Path, steps: list[tuple[str, str]]
) -> None:
    (tmp_path / "in").mkdir()
    src = tmp_path / "a.pkg"
    src.write_bytes(b"pkg")
    durable.move_durable(src, tmp_path / "in" / "a.pkg")
    assert steps == [("replace", "a.pkg->a.pkg"), ("fsync_dir", "in")]


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o600])
def test_the_mode_holds_whatever_the_umask(tmp_path: Path, umask: None, mode: int) -> None:
    p = tmp_path / "f"
    durable.write_durable(p, b"x", mode)
    assert stat.S_IMODE(p.stat().st_mode) == mode


@pytest.mark.parametrize("exc", [OSError(28, "No space left on device"), KeyboardInterrupt()])
def test_an_interrupted_write_leaves_the_old_file_and_no_temp(tmp_path: Path, exc: BaseException) -> None:
    p = tmp_path / "state.json"
    p.write_bytes(b"old")
    with pytest.raises(type(exc)), durable.durable_file(p) as f:
        f.write(b"half of the new")
        raise exc
    assert p.read_bytes() == b"old" and os.listdir(tmp_path) == ["state.json"]


def test_a_symlink_in_place_of_the_temp_file_is_not_followed(tmp_path: Path) -> None:
    """Someone who can write the directory plants the temp name as a link to a file of ours."""
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep")
    (tmp_path / f".x.{os.getpid()}.tmp").symlink_to(victim)
    with pytest.raises(OSError):
        durable.write_durable(tmp_path / "x", b"new")
    assert victim.read_bytes() == b"keep"


def test_fsync_dir_syncs_that_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[str] = []
    real = os.fsync
    monkeypatch.setattr(
        durable.os, "fsync", lambda fd: (synced.append(os.readlink(f"/proc/self/fd/{fd}")), real(fd))[1]
    )
    durable.fsync_dir(tmp_path)
    assert synced == [str(tmp_path)]


def test_move_durable_to_another_filesystem_copies_with_the_mode(tmp_path: Path, umask: None) -> None:
    # an [model_update] inbox on another filesystem than the package: no rename, a durable copy
    other = Path("/dev/shm")
    if not other.is_dir() or os.stat(other).st_dev == os.stat(tmp_path).st_dev:
        pytest.skip("needs /dev/shm on another filesystem than tmp_path")
    src = other / f"edge-agent-test-{os.getpid()}.pkg"
    src.write_bytes(b"pkg" * 1000)
    try:
        durable.move_durable(src, tmp_path / "a.pkg", 0o600)
        assert (tmp_path / "a.pkg").read_bytes() == b"pkg" * 1000
        assert stat.S_IMODE((tmp_path / "a.pkg").stat().st_mode) == 0o600
        assert os.listdir(tmp_path) == ["a.pkg"]  # no temp file left
        assert src.exists()  # left for its owner to delete
    finally:
        src.unlink(missing_ok=True)
