"""One durable-write helper (issue 22): every write-then-rename of a file goes through
edge_agent/adapters/host/durable.py, so a power cut leaves the old file or the new, never an empty one.

The scan below fails on a new ``os.replace``/``os.rename``/``Path.replace``/``os.fsync`` outside the
helper and the few places that say why they differ; the tests after it spy on the helper's
directory fsync, the step a hand-made copy forgets, for each command that writes a user's file
(quantize: tests/tools/test_quantize_inputs.py)."""

from __future__ import annotations

import ast
import json
import os
import sqlite3
import stat
from pathlib import Path

import pytest

import edge_agent
from edge_agent.adapters.host import durable

PACKAGE = Path(edge_agent.__file__).parent

# module -> why it renames or fsyncs on its own
ALLOWED = {
    "adapters/host/durable.py": "the helper",
    "adapters/host/statusfile.py": "on /run (tmpfs), rewritten every 2 s: atomic, deliberately not durable",
    "adapters/updates/frame_ring.py": "the gate's frame ring: losing the newest frame costs nothing",
    "adapters/updates/store.py": "renames a whole staged version directory, and sets a corrupt pointer aside",
    "adapters/updates/package_file.py": "extraction into a fresh staging dir (O_EXCL files, then model_store's rename)",
}
OUTBOX_PREFIX = "adapters/outbox"  # SQLite and its marks file: the queue's own durability (docs/queue.md)


def own_renames(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for n in ast.walk(tree):
        if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)):
            continue
        attr, base = n.func.attr, n.func.value
        is_os = isinstance(base, ast.Name) and base.id == "os"
        if is_os and attr in ("replace", "rename", "renames", "fsync", "fdatasync"):
            found.append((n.lineno, f"os.{attr}"))
        elif not is_os and attr == "rename":
            found.append((n.lineno, ".rename"))
        # Path.replace(target): one positional argument (str.replace takes two, datetime's and
        # dataclasses' take keywords)
        elif attr == "replace" and len(n.args) == 1 and not n.keywords and not is_os:
            if isinstance(base, ast.Name) and base.id == "dataclasses":
                continue
            found.append((n.lineno, ".replace"))
    return found


def test_no_module_renames_or_fsyncs_outside_the_helper() -> None:
    stray = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel in ALLOWED or rel.startswith(OUTBOX_PREFIX):
            continue
        stray += [f"{rel}:{line}: {what}" for line, what in own_renames(ast.parse(path.read_text()))]
    assert not stray, "route these through edge_agent/adapters/host/durable.py:\n" + "\n".join(stray)


def test_the_scan_sees_each_form() -> None:
    src = "os.replace(a, b)\np.replace(q)\np.rename(q)\nos.fsync(fd)\ns.replace('a', 'b')\nd.replace(tzinfo=z)\n"
    assert [w for _, w in own_renames(ast.parse(src))] == ["os.replace", ".replace", ".rename", "os.fsync"]


@pytest.fixture
def dir_fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    seen: list[Path] = []
    real = durable.fsync_dir

    def spy(path: Path) -> None:
        seen.append(Path(path))
        real(path)

    monkeypatch.setattr(durable, "fsync_dir", spy)
    return seen


def test_queue_export_writes_through_the_helper(tmp_path: Path, dir_fsyncs: list[Path]) -> None:
    from edge_agent.app.cli.queue_cmd import _write_whole

    out = tmp_path / "x.jsonl"
    n = _write_whole(out, lambda f: f.write(json.dumps({"a": "é"}) + "\n") and 1)
    assert n == 1 and json.loads(out.read_text(encoding="utf-8")) == {"a": "é"}
    assert dir_fsyncs == [tmp_path]
    assert stat.S_IMODE(out.stat().st_mode) == 0o600  # every payload is in it
    assert sorted(os.listdir(tmp_path)) == ["x.jsonl"]


def test_queue_export_that_fails_half_way_leaves_the_old_file(tmp_path: Path) -> None:
    from edge_agent.app.cli.queue_cmd import _write_whole

    out = tmp_path / "x.jsonl"
    out.write_text("old\n")

    def broken(f: object) -> int:
        f.write("half\n")  # type: ignore[attr-defined]
        raise sqlite3.DatabaseError("database disk image is malformed")

    with pytest.raises(sqlite3.DatabaseError):
        _write_whole(out, broken)
    assert out.read_text() == "old\n" and sorted(os.listdir(tmp_path)) == ["x.jsonl"]


def test_model_pack_writes_through_the_helper(tmp_path: Path, dir_fsyncs: list[Path]) -> None:
    from edge_agent.adapters.updates.package_file import PackageReader, describe_file, write_package
    from edge_agent.core.updates.package import Manifest

    src = tmp_path / "m.onnx"
    src.write_bytes(b"not really a model")
    m = Manifest(
        name="t",
        version="1.0",
        task="detect",
        created_at="2026-11-30T00:00:00Z",
        min_agent_version="0.1",
        min_onnxruntime="1.11",
        files={"detector": describe_file(src, "detector.onnx")},
    )
    out = tmp_path / "out" / "t.pkg"
    out.parent.mkdir()
    write_package(out, m, {"detector.onnx": src})
    assert dir_fsyncs == [out.parent] and sorted(os.listdir(out.parent)) == ["t.pkg"]
    assert stat.S_IMODE(out.stat().st_mode) == 0o644  # a file to hand around, whatever the umask
    with PackageReader(out) as r:
        assert r.manifest.version == "1.0"
