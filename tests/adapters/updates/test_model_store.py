"""The model store in process on small synthetic packages: staging then rename, re-hashing an
installed version, what prune keeps, the lock. Fast enough for `python .ci/mutation.py model-receiver`."""

from __future__ import annotations

import json
import os
import stat
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from support.updates import pack_in_process

from edge_agent.adapters.updates import store as model_store_mod
from edge_agent.adapters.updates.package_file import PackageReader
from edge_agent.adapters.updates.store import ModelStore
from edge_agent.core.updates.package import MANIFEST
from edge_agent.core.updates.store_state import StoreState
from edge_agent.errors import ModelError


def _det(tmp: Path, body: bytes = b"detector weights") -> Path:
    p = tmp / f"det-{len(list(tmp.glob('det-*')))}.onnx"
    p.write_bytes(body)
    return p


def _staged(tmp: Path, store: ModelStore, version: str = "1.0", probe: int = 0) -> str:
    imgs = []
    for i in range(probe):
        img = tmp / f"probe{i}.jpg"
        img.write_bytes(bytes([i + 1]) * 50)
        imgs.append(img)
    pkg = pack_in_process(
        tmp / f"{version}.pkg", _det(tmp, f"w{version}".encode()), version=version, probe=imgs
    )
    with PackageReader(pkg) as r:
        return store.stage(r)


def test_ensure_makes_the_store_with_its_modes_whatever_the_umask(tmp_path: Path) -> None:
    store = ModelStore(str(tmp_path / "state"))
    assert (store.root, store.pointer) == (
        tmp_path / "state" / "models",
        tmp_path / "state/models/active.json",
    )
    old = os.umask(0)
    try:
        assert store.ensure() is store
    finally:
        os.umask(old)
    for d in (store.root, store.versions, store.staging, tmp_path / "state"):
        assert stat.S_IMODE(d.stat().st_mode) == 0o750, d
    os.chmod(store.root, 0o777)
    store.ensure()  # an existing root is not the store's to narrow again
    assert stat.S_IMODE(store.root.stat().st_mode) == 0o777


def test_stage_renames_a_complete_version_and_staging_is_left_empty(tmp_path: Path) -> None:
    store = ModelStore(str(tmp_path / "s"))
    vid = _staged(tmp_path, store, "1.0", probe=2)
    assert vid.startswith("demo-1.0-") and store.version_dir(vid).is_dir()
    assert list(store.staging.iterdir()) == []
    assert store.verify(vid).version == "1.0"
    paths = store.paths(vid)
    assert paths == {"detector": store.version_dir(vid) / "detector.onnx"}
    assert paths["detector"].read_bytes() == b"w1.0"
    assert store.probe_images(vid) == [store.version_dir(vid) / "probe" / f"probe{i}.jpg" for i in (0, 1)]
    assert [p.read_bytes() for p in store.probe_images(vid)] == [b"\1" * 50, b"\2" * 50]
    again = pack_in_process(tmp_path / "again.pkg", _det(tmp_path, b"w1.0"), version="1.0")
    with PackageReader(again) as r:
        assert store.stage(r) == vid  # already here: not extracted twice


def test_labels_of_the_manifest_are_stored_beside_the_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = ModelStore(str(tmp_path / "s"))
    pkg = pack_in_process(tmp_path / "p.pkg", _det(tmp_path))
    with PackageReader(pkg) as r:
        r.manifest.labels = {"detector": ["cat", "dog"], "classifier": ["a", "b"]}
        vid = store.stage(r)
    d = store.version_dir(vid)
    assert json.loads((d / "detector.labels.json").read_text()) == ["cat", "dog"]
    assert json.loads((d / "classifier.labels.json").read_text()) == ["a", "b"]
    paths = store.paths(vid)
    assert paths["detector_labels"] == d / "detector.labels.json"
    assert paths["classifier_labels"] == d / "classifier.labels.json"
    pkg2 = pack_in_process(tmp_path / "q.pkg", _det(tmp_path, b"other"), version="2.0")
    with PackageReader(pkg2) as r:
        r.manifest.labels = {"detector": []}
        vid2 = store.stage(r)
    assert sorted(p.name for p in store.version_dir(vid2).iterdir()) == ["detector.onnx", MANIFEST]


def test_a_failed_extraction_leaves_nothing_in_staging_or_versions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = ModelStore(str(tmp_path / "s"))
    pkg = pack_in_process(tmp_path / "p.pkg", _det(tmp_path))

    def full(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(model_store_mod.os, "rename", full)
    with PackageReader(pkg) as r, pytest.raises(OSError, match="No space"):
        store.stage(r)
    assert list(store.staging.iterdir()) == [] and list(store.versions.iterdir()) == []


def test_stage_renames_then_fsyncs_the_versions_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = ModelStore(str(tmp_path / "s"))
    pkg = pack_in_process(tmp_path / "p.pkg", _det(tmp_path))
    calls: list[str] = []
    real_rename = os.rename
    monkeypatch.setattr(
        model_store_mod.os, "rename", lambda a, b: (calls.append("rename"), real_rename(a, b))[1]
    )
    monkeypatch.setattr(model_store_mod, "fsync_dir", lambda p: calls.append(f"fsync {Path(p).name}"))
    with PackageReader(pkg) as r:
        store.stage(r)
    assert calls == ["rename", "fsync versions"]


def test_verify_re_hashes_every_model_file(tmp_path: Path) -> None:
    store = ModelStore(str(tmp_path / "s"))
    vid = _staged(tmp_path, store)
    det = store.paths(vid)["detector"]
    det.write_bytes(b"w1.1")  # same size, one bit flipped on the SD card
    with pytest.raises(
        ModelError, match=r"detector\.onnx: detector file missing or its sha256 no longer matches"
    ):
        store.verify(vid)
    det.unlink()
    with pytest.raises(ModelError, match="detector file missing"):
        store.verify(vid)
    (store.version_dir(vid) / MANIFEST).unlink()
    with pytest.raises(ModelError, match="installed version has no readable manifest"):
        store.manifest(vid)


def test_prune_keeps_only_the_wanted_versions(tmp_path: Path) -> None:
    store = ModelStore(str(tmp_path / "s"))
    a, b, c = (_staged(tmp_path, store, v) for v in ("1.0", "2.0", "3.0"))
    store.prune([None, a, c])
    assert sorted(p.name for p in store.versions.iterdir()) == sorted([a, c])
    store.prune([None])
    assert list(store.versions.iterdir()) == []
    ModelStore(str(tmp_path / "fresh")).prune([b])  # no store yet: nothing to do, no error


def test_clean_staging_removes_directories_and_files(tmp_path: Path) -> None:
    store = ModelStore(str(tmp_path / "s")).ensure()
    (store.staging / "half.1").mkdir()
    (store.staging / "half.1" / "detector.onnx").write_bytes(b"x")
    (store.staging / "stray").write_bytes(b"x")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_bytes(b"x")
    (store.staging / "link").symlink_to(outside)
    store.clean_staging()
    assert list(store.staging.iterdir()) == [] and (outside / "keep").exists()  # a link is not followed
    ModelStore(str(tmp_path / "none")).clean_staging()


def test_the_pointer_round_trips_and_a_damaged_one_is_set_aside(tmp_path: Path) -> None:
    store = ModelStore(str(tmp_path / "s"))
    assert store.state() == StoreState()  # no pointer: the config's model
    s = StoreState(current="demo-1.0-abcdef12", history=[None])
    before = time.time()
    store.save(s)
    assert store.state() == s and s.updated_at is not None and s.updated_at >= before
    assert store.pointer.read_text().endswith("\n")
    store.pointer.write_bytes(b"\xff not json")
    assert store.state() == StoreState()
    assert store.pointer.with_suffix(".corrupt").read_bytes() == b"\xff not json"
    assert not store.pointer.exists()


def test_the_lock_keeps_a_second_holder_waiting(tmp_path: Path) -> None:
    store = ModelStore(str(tmp_path / "s"))
    order: list[str] = []
    inside = threading.Event()

    def other() -> None:
        inside.wait(5)
        with store.locked():
            order.append("other")

    t = threading.Thread(target=other)
    t.start()
    with store.locked():
        inside.set()
        t.join(0.3)  # the other holder is blocked while we hold it
        order.append("first")
    t.join(5)
    assert order == ["first", "other"]
    assert stat.S_IMODE((store.root / "lock").stat().st_mode) & 0o777 == 0o640
    with store.locked():  # released: taken again at once
        pass


# ---- survivors of the first mutation run, each pinned --------------------------------------
def test_debris_an_earlier_run_left_in_models_staging_is_cleaned(tmp_path: Path) -> None:
    """The layout is on disk across versions: clean_staging must clean ``models/staging``."""
    debris = tmp_path / "models" / "staging" / "demo-1.0-x.123"
    debris.mkdir(parents=True)
    (debris / "detector.onnx").write_bytes(b"half")
    ModelStore(str(tmp_path)).clean_staging()
    assert not debris.exists()


def test_stage_replaces_a_leftover_of_the_same_process(tmp_path: Path) -> None:
    store = ModelStore(str(tmp_path / "s")).ensure()
    pkg = pack_in_process(tmp_path / "p.pkg", _det(tmp_path))
    with PackageReader(pkg) as r:
        left = store.staging / f"{r.manifest.version_id}.{os.getpid()}"
        left.mkdir()
        (left / "detector.onnx").write_bytes(b"from a cut run")  # O_EXCL would refuse to overwrite
        vid = store.stage(r)
    assert store.verify(vid) and list(store.staging.iterdir()) == []


def test_the_pointer_file_is_indented_json_with_a_newline(tmp_path: Path) -> None:
    store = ModelStore(str(tmp_path))
    s = StoreState(current="demo-1.0-abcdef12", history=[None])
    store.save(s)
    assert store.pointer.read_text() == json.dumps(s.to_json(), indent=1) + "\n"


def test_a_damaged_pointer_is_logged_with_its_reason(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import logging

    store = ModelStore(str(tmp_path)).ensure()
    caplog.set_level(logging.ERROR)
    store.pointer.write_bytes(b"{not json")
    assert store.state() == StoreState()
    assert caplog.messages[-1].startswith(f"{store.pointer}: unreadable (")
    assert caplog.messages[-1].endswith("; running the config's model, the file is kept as .corrupt")
    store.pointer.write_text(json.dumps({"current": 7}))  # JSON, but a field is wrong: ModelError
    assert store.state() == StoreState()
    line = caplog.messages[-1]
    assert "current" in line and "unreadable" not in line and str(store.pointer) in line


def test_a_damaged_pointer_that_cannot_be_moved_aside_still_reads_as_none(tmp_path: Path) -> None:
    store = ModelStore(str(tmp_path)).ensure()
    store.pointer.mkdir()  # unreadable as a file
    (store.pointer / "x").write_bytes(b"x")
    aside = store.pointer.with_suffix(".corrupt")
    aside.mkdir()
    (aside / "y").write_bytes(b"y")  # rename onto a non-empty directory fails
    assert store.state() == StoreState()


def test_an_installed_version_with_a_bad_manifest_names_its_directory(tmp_path: Path) -> None:
    store = ModelStore(str(tmp_path / "s"))
    vid = _staged(tmp_path, store)
    (store.version_dir(vid) / MANIFEST).write_bytes(b"{")
    with pytest.raises(ModelError, match=f"^{store.version_dir(vid)}: manifest.json is not JSON"):
        store.manifest(vid)


def test_a_file_that_cannot_be_removed_does_not_stop_cleaning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stuck file (EBUSY, an immutable attribute, a read-only remount) must not crash a start:
    clean_staging, prune and a failed stage's cleanup go on without it."""
    import shutil

    store = ModelStore(str(tmp_path / "s"))
    a, b = (_staged(tmp_path, store, v) for v in ("1.0", "2.0"))
    (store.staging / "half.1").mkdir()
    (store.staging / "half.1" / "stuck").write_bytes(b"x")
    (store.staging / "stuck").write_bytes(b"x")
    real_unlink = os.unlink

    def unlink(path: Any, *args: Any, **kw: Any) -> None:
        if os.path.basename(str(path)) in ("stuck", "detector.onnx"):
            raise PermissionError(1, "Operation not permitted", str(path))
        real_unlink(path, *args, **kw)

    monkeypatch.setattr(os, "unlink", unlink)
    monkeypatch.setattr(shutil.os, "unlink", unlink)
    store.clean_staging()  # no exception
    store.prune([a])
    assert (store.version_dir(a)).is_dir()
    pkg = pack_in_process(tmp_path / "p.pkg", _det(tmp_path, b"w3"), version="3.0")
    monkeypatch.setattr(
        model_store_mod.os, "rename", lambda *x: (_ for _ in ()).throw(OSError(28, "No space"))
    )
    with PackageReader(pkg) as r, pytest.raises(OSError, match="No space"):
        store.stage(r)  # the true error, not the cleanup's
    assert (store.version_dir(b) / "detector.onnx").exists()  # what could not go stays, nothing else
