"""docs/testing.md is the how and the layout; the mutation ledger is generated from its data.

docs/mutation-ledger.md is written by `python .ci/mutation.py --ledger` from .ci/mutation-scores.json
and .ci/ledger/*.md: these checks keep the page in step with its data, the data's module paths
real, and every area of .ci/mutation.py in it. Cheap: no mutmut, no run.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
CI = REPO / ".ci"


def load(name: str) -> ModuleType:
    if str(CI) not in sys.path:
        sys.path.insert(0, str(CI))  # mutation.py imports ledger from beside it
    spec = importlib.util.spec_from_file_location(f"ci_{name}", CI / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ledger = load("ledger")
mutation = load("mutation")


def data() -> dict[str, Any]:
    loaded: dict[str, Any] = ledger.load()
    return loaded


def test_the_ledger_page_is_what_its_data_generates() -> None:
    page = (REPO / "docs" / "mutation-ledger.md").read_text(encoding="utf-8")
    fresh = ledger.render(data(), mutation.area_modules())
    assert page == fresh, "docs/mutation-ledger.md is stale: run `python .ci/mutation.py --ledger`"


def test_every_module_in_the_data_exists() -> None:
    missing = [r["module"] for r in data()["modules"] if not (REPO / "edge_agent" / r["module"]).is_file()]
    assert missing == []


def test_every_area_of_mutation_py_is_in_the_data() -> None:
    d = data()
    known = {r["area"] for r in d["modules"]} | set(d["areas"])
    assert sorted(set(mutation.AREAS) - known) == []
    # and nothing in the data names an area that is gone
    assert sorted(known - set(mutation.AREAS)) == []


def test_a_row_is_scored_by_its_own_area() -> None:
    """A row's module is one its area mutates, and its figures add up."""
    wrong = []
    for r in data()["modules"]:
        if f"edge_agent/{r['module']}" not in mutation.AREAS[r["area"]][0]:
            wrong.append(f"{r['area']}: {r['module']} not mutated by the area")
        k, n, pct = r["killed"], r["total"], r["percent"]
        if k is not None and n and abs(100.0 * k / n - pct) > 0.05:
            wrong.append(f"{r['module']}: {k} / {n} is not {pct} %")
    assert wrong == []


def test_a_finished_run_is_recorded_and_keeps_the_rows_history(tmp_path: Path) -> None:
    path = tmp_path / "scores.json"
    ledger.save(
        {
            "areas": {},
            "modules": [
                {"module": "core/camera/motion.py", "area": "core-motion", "history": {"after": "93.9 %"}}
            ],
        },
        path,
    )
    counts = {
        "killed": 200,
        "by_mypy": 50,
        "timeout": 1,
        "survived": 20,
        "no_tests": 2,
        "other": 5,
        "total": 278,
    }
    ledger.record(
        "core-motion",
        {"core/camera/motion.py": counts, "core/camera/new.py": {**counts, "other": 0}},
        date="2026-12-02",
        command="python .ci/mutation.py core-motion",
        wall_time="8.0 min (--jobs 2)",
        path=path,
    )
    old, new = ledger.load(path)["modules"]
    assert (old["killed"], old["total"], old["percent"]) == (251, 278, 90.3)
    assert old["history"] == {"after": "93.9 %"} and old["date"] == "2026-12-02"
    assert (old["partial"], old["undecided"]) == (True, 5)
    assert "partial: 5 not decided" in ledger.score_text(old)
    assert new["module"] == "core/camera/new.py" and "partial" not in new


def test_testing_md_is_the_how_not_the_ledger() -> None:
    text = (REPO / "docs" / "testing.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 400
    assert "mutation-ledger.md" in text


def test_a_module_the_run_did_not_decide_keeps_its_figure(tmp_path: Path) -> None:
    """`--only` on one module of an area: the others' mutants are all "other" (not run), and a
    module run in part keeps its complete figure; the last full score is not overwritten."""
    path = tmp_path / "scores.json"
    full = {
        "module": "app/agent/agent.py",
        "area": "agent-loop",
        "killed": 617,
        "total": 636,
        "percent": 97.0,
    }
    part = {"module": "app/agent/steps.py", "area": "agent-loop", "killed": 58, "total": 58, "percent": 100.0}
    ledger.save({"areas": {}, "modules": [dict(full), dict(part)]}, path)
    zero = {"killed": 0, "by_mypy": 0, "timeout": 0, "survived": 0, "no_tests": 0}
    written = ledger.record(
        "agent-loop",
        {
            "app/agent/agent.py": {**zero, "other": 317, "total": 317},
            "app/agent/steps.py": {**zero, "killed": 10, "other": 48, "total": 58},
            "app/agent/camera_pipeline.py": {**zero, "killed": 9, "survived": 1, "other": 0, "total": 10},
        },
        date="2026-12-02",
        command="python .ci/mutation.py agent-loop --only ...",
        wall_time="1 min",
        path=path,
    )
    agent, steps, new = ledger.load(path)["modules"]
    assert agent == full and steps == part
    assert [r["module"] for r in written] == ["app/agent/camera_pipeline.py"]
    assert (new["killed"], new["total"], new["percent"]) == (9, 10, 90.0)


def test_the_run_table_gives_the_counts_that_are_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`mutmut results` lines -> per-module counts keyed by the module's path, as record() takes them."""
    out = "\n".join(
        [
            "    edge_agent.core.camera.motion.x_gate__mutmut_1: killed",
            "    edge_agent.core.camera.motion.x_gate__mutmut_2: caught by type check",
            "    edge_agent.core.camera.motion.xǁMotionǁstep__mutmut_3: survived",
            "    edge_agent.core.camera.motion.x_gate__mutmut_4: timeout",
            "    edge_agent.core.camera.motion.x_gate__mutmut_5: segfault",
            "    edge_agent.adapters.outbox.claims.x_claim__mutmut_1: no tests",
            "    edge_agent.adapters.outbox.claims.x_claim__mutmut_2: not checked",
        ]
    )

    class Done:
        stdout, stderr, returncode = out, "", 0

    monkeypatch.setattr(mutation.subprocess, "run", lambda *a, **k: Done())
    counts: dict[str, dict[str, int]] = {}
    assert mutation.score(tmp_path, counts) == 0
    assert counts == {
        "core/camera/motion.py": {
            "killed": 2,
            "by_mypy": 1,
            "timeout": 1,
            "survived": 1,
            "no_tests": 0,
            "other": 0,
            "total": 5,
        },
        "adapters/outbox/claims.py": {
            "killed": 0,
            "by_mypy": 0,
            "timeout": 0,
            "survived": 0,
            "no_tests": 1,
            "other": 1,
            "total": 2,
        },
    }
