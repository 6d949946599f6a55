"""The shipped Prometheus alerting rules (deploy/prometheus/edge-agent-alerts.yml) pass their
``promtool test rules`` unit tests (edge-agent-alerts.test.yml: input series as the collector
exports them, the alerts expected), and the test does catch a broken rule: a syntax error and a
wrong threshold each make promtool fail. Debian's ``prometheus`` package has promtool
(.ci/packages.d/issue33.txt)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "deploy" / "prometheus"


def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        pytest.skip(
            "promtool absent (Debian package 'prometheus', .ci/packages.d/issue33.txt): rules not tested"
        )
    return path


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([promtool(), *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_the_shipped_rules_pass_their_tests() -> None:
    check = run("check", "rules", "edge-agent-alerts.yml", cwd=RULES)
    assert check.returncode == 0 and "SUCCESS: 10 rules found" in check.stdout, check.stdout + check.stderr
    out = run("test", "rules", "edge-agent-alerts.test.yml", cwd=RULES)
    assert out.returncode == 0 and "SUCCESS" in out.stdout, out.stdout + out.stderr


def test_every_alert_has_a_test() -> None:
    rules = (RULES / "edge-agent-alerts.yml").read_text()
    tests = (RULES / "edge-agent-alerts.test.yml").read_text()
    names = [ln.split(":", 1)[1].strip() for ln in rules.splitlines() if ln.strip().startswith("- alert:")]
    assert len(names) == 10
    assert all(f"alertname: {n}\n" in tests for n in names), names


def _broken(tmp_path: Path, old: str, new: str) -> Path:
    for name in ("edge-agent-alerts.yml", "edge-agent-alerts.test.yml"):
        shutil.copy(RULES / name, tmp_path / name)
    rules = tmp_path / "edge-agent-alerts.yml"
    text = rules.read_text()
    assert text.count(old) == 1, old
    rules.write_text(text.replace(old, new))
    return tmp_path


def test_a_syntax_error_in_an_expression_fails(tmp_path: Path) -> None:
    where = _broken(
        tmp_path,
        "expr: max by (device) (edge_agent_device_online) == 0",
        "expr: max by (device) (edge_agent_device_online == 0",
    )
    out = run("test", "rules", "edge-agent-alerts.test.yml", cwd=where)
    assert out.returncode != 0 and "parse error" in (out.stdout + out.stderr).lower(), out.stdout + out.stderr


def test_a_wrong_threshold_fails_its_test(tmp_path: Path) -> None:
    where = _broken(
        tmp_path,
        "expr: time() - max by (device) (edge_agent_device_last_seen_seconds) > 600",
        "expr: time() - max by (device) (edge_agent_device_last_seen_seconds) > 6000",
    )
    out = run("test", "rules", "edge-agent-alerts.test.yml", cwd=where)
    assert out.returncode != 0 and "alertname: EdgeDeviceSilent" in out.stdout + out.stderr, out.stdout
