"""Manifest rules a hostile package author meets: no path leaves the package, versions are ordered."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import cli
from support.updates import INT8

from edge_agent.core.updates.package import parse_manifest, parse_version
from edge_agent.errors import ModelError

SHA = "a" * 64


def _manifest(path: str = "detector.onnx", version: str = "1.0", probe: str = "") -> bytes:
    m = {
        "name": "demo",
        "version": version,
        "created_at": "2026-11-30T00:00:00Z",
        "files": {"detector": {"path": path, "sha256": SHA, "size": 1}},
        "probe": [{"path": probe, "sha256": SHA, "size": 1}] if probe else [],
    }
    return json.dumps(m).encode()


@pytest.mark.parametrize(
    ("path", "probe"),
    [
        ("../escape.onnx", ""),
        ("./detector.onnx", ""),
        ("a/..", ""),
        ("detector.onnx", "probe/.."),
        ("/abs.onnx", ""),
    ],
)
def test_no_manifest_path_leaves_the_package(path: str, probe: str) -> None:
    with pytest.raises(ModelError, match=r"path"):
        parse_manifest(_manifest(path, probe=probe), "p.pkg")


def test_versions_are_pep440_and_ordered_by_it() -> None:
    assert parse_manifest(_manifest(version="2.0+site3"), "p.pkg").version == "2.0+site3"
    with pytest.raises(ModelError, match="PEP 440"):
        parse_manifest(_manifest(version="2.0-good"), "p.pkg")
    order = ["1.0rc1", "1.0", "1.0.post1", "1.2", "1.10", "2.0", "20261130.101112"]
    assert sorted(order, key=parse_version) == order  # not string order: "1.10" > "1.2"


def test_pack_refuses_a_version_it_cannot_order(tmp_path: Path) -> None:
    r = cli("model", "pack", str(INT8), "-o", str(tmp_path / "x.pkg"), "--version", "latest", quiet=False)
    assert r.returncode != 0 and "PEP 440" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "x.pkg").exists()
