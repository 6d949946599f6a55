"""The oldest-stack CI stage's pieces: the floors it installs, its Python check, the detection compare."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
from pathlib import Path
from types import ModuleType

import tomllib

REPO = Path(__file__).resolve().parents[2]


def _same_detections() -> ModuleType:
    spec = importlib.util.spec_from_file_location("same_detections", REPO / ".ci" / "same_detections.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _jsonl(path: Path, dets: list[tuple[str, list[float]]]) -> Path:
    row = {"image": "a.jpg", "detections": [{"label": lb, "box": b} for lb, b in dets]}
    path.write_text(json.dumps(row) + "\n")
    return path


def test_floors_pin_every_runtime_dependency_at_its_pyproject_bound() -> None:
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    pins = {}
    for line in (REPO / ".ci" / "floors.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, version = line.split("==")
            pins[name] = version
    for dep in deps:
        name, floor = re.match(r"([A-Za-z0-9_.-]+)\s*>=\s*([0-9.]+)", dep).groups()  # type: ignore[union-attr]
        if name != "onnxruntime":  # the stage's argument: 1.11.1, then 1.16.3
            assert pins[name] == floor or pins[name].startswith(floor + "."), (name, floor, pins.get(name))


def test_missing_python_3_8_fails_with_a_clear_message(tmp_path: Path) -> None:
    r = subprocess.run(
        ["bash", str(REPO / ".ci" / "oldest-stack.sh"), "1.11.1"],
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "EDGE_AGENT_PY38": str(tmp_path / "nope")},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (
        r.returncode == 1 and "CPython 3.8.18 not found at" in r.stderr and "pyenv install 3.8.18" in r.stderr
    )


def test_detection_compare_counts_recall_and_iou(tmp_path: Path) -> None:
    sd = _same_detections()
    ref = _jsonl(tmp_path / "ref.jsonl", [("bus", [0, 0, 100, 100]), ("person", [200, 0, 220, 60])])
    same = _jsonl(tmp_path / "same.jsonl", [("person", [200, 0, 220, 60]), ("bus", [0, 0, 100, 100])])
    assert sd.compare(str(ref), str(same)) == (2, 2, 1.0)
    shifted = _jsonl(tmp_path / "shift.jsonl", [("bus", [10, 0, 110, 100]), ("car", [200, 0, 220, 60])])
    total, matched, iou = sd.compare(str(ref), str(shifted))
    assert (total, matched) == (2, 1) and abs(iou - 90 / 110) < 1e-9  # a wrong label never matches
