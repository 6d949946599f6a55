"""What `model install` prints for a person: gate figures to 4 significant digits, not a float's
repr (``candidate max score 0.32651472091674805``)."""

from __future__ import annotations

import pytest

from edge_agent.app.updates.model_cmd import _num, _print_result


def test_gate_figures_are_short(capsys: pytest.CaptureFixture[str]) -> None:
    res = {
        "outcome": "refused",
        "detail": "gate refused",
        "gate": {
            "candidate_max_score": 0.32651472091674805,
            "detector": {
                "checks": [
                    {"name": "recall", "value": 0.912345678, "op": ">=", "limit": 0.9, "passed": True}
                ],
                "metrics": {"reference_detections": 40, "candidate_detections": 37},
            },
        },
    }
    assert _print_result(res, False) == 1
    out = capsys.readouterr().out
    assert "candidate max score 0.3265\n" in out and "0.9123  (>= 0.9)  ok" in out
    assert "0.32651472" not in out
    assert [_num(None), _num(3), _num(1e-7), _num(0.0), _num(20.0)] == ["-", "3", "1e-07", "0.0", "20.0"]
