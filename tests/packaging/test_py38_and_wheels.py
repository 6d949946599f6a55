"""The Python 3.8 check (.ci/py38-check.sh = vermin + .ci/py38_runtime.py) and the JetPack wheel check
(cross-build/wheel_check.py) fail on what breaks a Jetson and pass on the project as it is."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]


def _load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


py38 = _load(REPO / ".ci/py38_runtime.py")
wheel_check = _load(REPO / "cross-build/wheel_check.py")

PLANTED = {
    "model.py": (
        "from __future__ import annotations\n"
        "from pydantic import BaseModel\n"
        "class Base(BaseModel):\n    pass\n"
        "class Cfg(Base):\n    names: list[str] = []\n    port: int | None = None\n"
    ),
    "alias.py": "from __future__ import annotations\nfrom collections.abc import Sequence\nBox = tuple[int, int]\nS = Sequence[int]\n",
    "calls.py": "def f(s: str, v: object) -> bool:\n    return s.removeprefix('a') == '' or isinstance(v, int | str)\n",
}


def _plant(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    return tmp_path


def test_runtime_check_flags_each_planted_3_9_construct(tmp_path: Path) -> None:
    findings = py38.check_paths([_plant(tmp_path, PLANTED)])
    got: dict[tuple[str, int], str] = {}
    for p, line, msg in findings:
        got[(Path(p).name, line)] = got.get((Path(p).name, line), "") + msg + "; "
    assert "pydantic field of Cfg: list[...]" in got[("model.py", 6)]  # subclass of a subclass
    assert "X | Y" in got[("model.py", 7)]
    assert "tuple[...]" in got[("alias.py", 3)] and "collections.abc Sequence" in got[("alias.py", 4)]
    assert ".removeprefix()" in got[("calls.py", 2)] and "X | Y" in got[("calls.py", 2)]
    assert len(findings) == 6


def test_runtime_check_accepts_what_3_8_runs(tmp_path: Path) -> None:
    ok = {
        "ok.py": (
            "from __future__ import annotations\nfrom typing import List, Optional\n"
            "from pydantic import BaseModel\n"
            "class Cfg(BaseModel):\n    names: List[str] = []\n    port: Optional[int] = None\n"
            "def f(x: list[int] | None, flags: int) -> dict[str, int]:\n"
            "    y: tuple[int, ...] = ()\n    return {'a': flags | 4}\n"
        )
    }
    assert py38.check_paths([_plant(tmp_path, ok)]) == []


def test_the_runtime_package_passes_and_a_planted_construct_fails_the_ci_script(tmp_path: Path) -> None:
    pytest.importorskip("vermin", reason="vermin (dev extra) runs the stdlib/syntax half of the check")
    env = {**os.environ, "PYTHON": sys.executable}
    script = str(REPO / ".ci/py38-check.sh")
    clean = subprocess.run(["bash", script], env=env, capture_output=True, text=True, timeout=300)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    bad = _plant(
        tmp_path, {"cached.py": "import functools\n\n@functools.cache\ndef f() -> int:\n    return 1\n"}
    )
    res = subprocess.run(["bash", script, str(bad)], env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 1 and "functools.cache" in res.stdout


def _wheel(dirpath: Path, name: str, requires_python: str = ">=3.7") -> Path:
    path = dirpath / name
    dist = "-".join(name.split("-")[:2])
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(
            f"{dist}.dist-info/METADATA",
            f"Metadata-Version: 2.1\nName: x\nRequires-Python: {requires_python}\n",
        )
    return path


@pytest.mark.parametrize(
    ("name", "requires", "problem"),
    [
        ("numpy-1.24.4-cp38-cp38-manylinux_2_17_aarch64.manylinux2014_aarch64.whl", ">=3.8", ""),
        (
            "opencv_python_headless-4.11.0.86-cp37-abi3-manylinux_2_17_aarch64.manylinux2014_aarch64.whl",
            ">=3.7",
            "",
        ),
        ("pyserial-3.5-py2.py3-none-any.whl", "", ""),
        ("onnxruntime-1.19.2-cp38-cp38-manylinux_2_27_aarch64.manylinux_2_28_aarch64.whl", "", ""),
        ("pillow-11.0.0-cp38-cp38-manylinux_2_28_aarch64.whl", ">=3.8", "glibc 2.27"),
        ("numpy-1.26.4-cp39-cp39-manylinux_2_17_aarch64.manylinux2014_aarch64.whl", "", "CPython 3.8"),
        ("numpy-1.24.4-cp38-cp38-manylinux_2_17_x86_64.manylinux2014_x86_64.whl", ">=3.8", "does not load"),
        ("numpy-1.24.4-cp38-cp38-linux_aarch64.whl", ">=3.8", "does not load"),
        ("pydantic-2.11.0-py3-none-any.whl", ">=3.9", "Requires-Python >=3.9 excludes 3.8"),
        ("abi-1.0-cp39-abi3-manylinux2014_aarch64.whl", "", "CPython 3.8"),
    ],
)
def test_wheel_check_for_jetpack4(tmp_path: Path, name: str, requires: str, problem: str) -> None:
    problems = wheel_check.check_wheel(_wheel(tmp_path, name, requires), (3, 8), (2, 27))
    if problem:
        assert len(problems) == 1 and problem in problems[0]
    else:
        assert problems == []


def test_wheel_check_cli_fails_on_one_newer_wheel_and_on_cpu_onnxruntime(tmp_path: Path) -> None:
    _wheel(tmp_path, "numpy-1.24.4-cp38-cp38-manylinux2014_aarch64.whl")
    cmd = [
        sys.executable,
        str(REPO / "cross-build/wheel_check.py"),
        str(tmp_path),
        "--python",
        "3.8",
        "--glibc",
        "2.27",
    ]
    assert subprocess.run(cmd, capture_output=True, timeout=60).returncode == 0
    _wheel(tmp_path, "onnxruntime-1.11.0-cp38-cp38-manylinux_2_17_aarch64.manylinux2014_aarch64.whl")
    res = subprocess.run([*cmd, "--no-onnxruntime"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 1 and "CPU onnxruntime" in res.stderr
    _wheel(tmp_path, "cryptography-44.0.0-cp37-abi3-manylinux_2_28_aarch64.whl")
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert res.returncode == 1 and "manylinux_2_28_aarch64" in res.stderr


def test_install_refuses_a_jetpack_bundle_without_ort_wheel(tmp_path: Path) -> None:
    (tmp_path / "BUNDLE.txt").write_text(
        "name=edge-agent\nversion=0.1.0\npython=3.8\njetpack=4\nonnxruntime=external\n"
    )
    install = tmp_path / "install.sh"
    install.write_text((REPO / "cross-build/install.sh").read_text())
    res = subprocess.run(
        ["bash", str(install), "--no-systemd", "--no-user", "--no-link", "--prefix", str(tmp_path / "opt")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 1
    assert (
        "JetPack 4 bundle has no onnxruntime: pass --ort-wheel onnxruntime_gpu-<ver>-cp38-cp38" in res.stderr
    )
    assert not (tmp_path / "opt").exists()
