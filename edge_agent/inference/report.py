"""The pass/fail report of ``validate``: checks against limits, metrics, notes, a verdict."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional


@dataclass
class Check:
    name: str
    value: float
    limit: float
    op: str  # ">=" or "<="

    @property
    def passed(self) -> bool:
        if math.isnan(self.value):
            return False
        return self.value >= self.limit if self.op == ">=" else self.value <= self.limit


@dataclass
class ValidationReport:
    kind: str
    reference: str
    candidate: str
    images: int
    metrics: dict[str, float] = field(default_factory=dict)
    checks: list[Check] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # set when the data cannot support a verdict (no reference detections...): no PASS, no FAIL
    no_verdict: str = ""

    @property
    def passed(self) -> bool:
        return not self.no_verdict and bool(self.checks) and all(c.passed for c in self.checks)

    @property
    def verdict(self) -> str:
        return "NO VERDICT" if self.no_verdict else "PASS" if self.passed else "FAIL"

    def to_json(self) -> dict[str, Any]:
        def num(v: float) -> Optional[float]:
            return None if math.isnan(v) else round(v, 6)

        return {
            "kind": self.kind,
            "reference": self.reference,
            "candidate": self.candidate,
            "images": self.images,
            "passed": self.passed,
            "verdict": self.verdict,
            "metrics": {k: num(v) for k, v in self.metrics.items()},
            "checks": [
                {"name": c.name, "value": num(c.value), "limit": c.limit, "op": c.op, "passed": c.passed}
                for c in self.checks
            ],
            "notes": self.notes,
        }

    def format_table(self) -> str:
        lines = [
            f"validate {self.kind}: {Path(self.candidate).name} against {Path(self.reference).name} "
            f"on {self.images} images",
            f"  {'metric':<28} {'value':>10}",
        ]
        lines += [f"  {k:<28} {_fmt(v):>10}" for k, v in self.metrics.items()]
        lines.append(f"  {'check':<28} {'value':>10}  {'limit':>10}  result")
        for c in self.checks:
            result = "ok" if c.passed else "FAIL"
            lines.append(f"  {c.name:<28} {_fmt(c.value):>10}  {c.op} {c.limit:<7g}  {result}")
        lines += [f"  note: {n}" for n in self.notes]
        if self.no_verdict:
            lines.append(f"NO VERDICT: {self.no_verdict}")
        else:
            lines.append(
                "PASS" if self.passed else "FAIL: the candidate model does not hold the reference's accuracy"
            )
        return "\n".join(lines)


def _fmt(v: float) -> str:
    if math.isnan(v):
        return "n/a"
    return str(int(v)) if float(v).is_integer() and abs(v) >= 1 else f"{v:.4f}"
