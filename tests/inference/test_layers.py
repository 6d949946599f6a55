"""The inference layer sits below app/ and tools/; the detection defaults live in one place."""

from __future__ import annotations

import ast
from pathlib import Path

import edge_agent

PKG = Path(edge_agent.__file__).resolve().parent


def _imports(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return out


def test_tools_and_inference_never_import_app() -> None:
    offenders = {
        f"{p.relative_to(PKG)}: {m}"
        for area in ("tools", "inference", "core", "adapters")
        for p in (PKG / area).glob("*.py")
        for m in _imports(p)
        if m == "edge_agent.app" or m.startswith("edge_agent.app.")
    }
    assert not offenders


def test_the_detection_defaults_have_one_home() -> None:
    """0.25 / 0.45 written as numbers only in core/defaults.py (grep the source, not the values)."""
    hits = []
    for p in PKG.rglob("*.py"):
        if p.name == "defaults.py" and p.parent.name == "core":
            continue
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
            code = line.split("#", 1)[0]
            if any(
                f"{k}={v}" in code.replace(" ", "")
                for k in ("conf_threshold", "iou_threshold", "conf", "iou", "default")
                for v in ("0.25", "0.45")
            ):
                hits.append(f"{p.relative_to(PKG)}:{n}: {line.strip()}")
    assert not hits


def test_cli_config_and_validate_share_them() -> None:
    import argparse

    from edge_agent.app import infer_cmd
    from edge_agent.core.config import DetectorConfig
    from edge_agent.core.defaults import CONF_THRESHOLD, IOU_THRESHOLD
    from edge_agent.inference.pipeline import DetectorParams
    from edge_agent.tools.thresholds import Thresholds

    sub = argparse.ArgumentParser().add_subparsers()
    infer_cmd.register(sub)
    args = sub.choices["infer"].parse_args([])
    assert (args.conf, args.iou) == (CONF_THRESHOLD, IOU_THRESHOLD)
    d = DetectorConfig()
    assert (d.conf_threshold, d.iou_threshold) == (CONF_THRESHOLD, IOU_THRESHOLD)
    p = DetectorParams()
    assert (p.conf_threshold, p.iou_threshold) == (CONF_THRESHOLD, IOU_THRESHOLD)
    assert Thresholds().conf == CONF_THRESHOLD
