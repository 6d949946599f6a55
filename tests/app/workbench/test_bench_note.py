"""A bench row whose end-to-end median is below its session.run median (possible only on a noisy
machine: the two medians come from different runs) gets a note naming it under the table."""

from __future__ import annotations

from typing import Any

from edge_agent.app.workbench.bench_cmd import noisy_note


def _row(name: str, run: float, e2e: float) -> dict[str, Any]:
    return {"path": f"/m/{name}", "session_run_ms": {"p50": run}, "pipeline_ms": {"total": {"p50": e2e}}}


def test_only_the_rows_whose_e2e_is_below_their_run_are_named() -> None:
    note = noisy_note(
        {"models": [_row("a.onnx", 2.0, 2.5), _row("b.onnx", 2.0, 1.9), _row("c.onnx", 3.0, 3.0)]}
    )
    assert note.startswith("\nnote: e2e p50 < run p50 for b.onnx: ") and "a.onnx" not in note
    assert "c.onnx" not in note and "noisy" in note
    assert noisy_note({"models": [_row("a.onnx", 2.0, 2.5)]}) == ""


def test_every_noisy_row_is_named_in_the_whole_note() -> None:
    note = noisy_note(
        {"models": [_row("a.onnx", 2.0, 1.5), _row("b.onnx", 2.0, 2.5), _row("c.onnx", 3.0, 2.0)]}
    )
    assert note == (
        "\nnote: e2e p50 < run p50 for a.onnx, c.onnx: the medians come from different runs and the "
        "machine was noisy (e2e includes the run); rerun with more --runs on a quieter machine"
    )
