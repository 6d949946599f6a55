"""README is the user's path: short, its test command is CI's, and it never installs the wrong package."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")
CI = (REPO / ".ci" / "run").read_text(encoding="utf-8")
TEST_COMMAND = "ruff check . && ruff format --check . && mypy && python -m pytest -n auto"


def test_readme_is_a_guide_not_a_report() -> None:
    assert len(README.splitlines()) < 250  # issue 36: README under 250 lines


def test_readme_test_command_is_what_ci_runs() -> None:
    assert f"    {TEST_COMMAND}\n" in README
    ci_lines = [line.strip() for line in CI.splitlines()]
    assert TEST_COMMAND in ci_lines  # run as a line of its own, in the dev venv


def test_readme_main_job_command_is_the_demo_in_a_fresh_venv() -> None:
    assert "    python3 -m venv .venv && . .venv/bin/activate && pip install . && edge-agent demo\n" in README
    assert "edge-agent demo --state-dir" in CI  # and CI runs it from a runtime-only venv


def test_nothing_tells_a_user_to_install_the_unrelated_edge_agent() -> None:
    """PyPI's `edge-agent` is another project with the same import package."""
    bad = re.compile(r"pip3? install\s+['\"]?edge-agent(?![-\w])")
    warning = re.compile(r"never|unrelated|uninstall|another project", re.IGNORECASE)
    places = [
        REPO / "README.md",
        *REPO.glob("docs/*.md"),
        *REPO.glob("*/README.md"),
        *REPO.glob("cross-build/*"),
    ]
    places += [*REPO.glob("edge_agent/**/*.py"), *REPO.glob("systemd/*")]
    offenders = [
        f"{p.relative_to(REPO)}: {line.strip()}"
        for p in places
        if p.is_file()
        for line in p.read_text(encoding="utf-8", errors="replace").splitlines()
        if bad.search(line) and not warning.search(line)
    ]
    assert offenders == []
    assert 'name = "onnx-edge-agent"' in (REPO / "pyproject.toml").read_text(encoding="utf-8")
