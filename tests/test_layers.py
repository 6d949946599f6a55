"""The layer rules, as one table, checked over every import in edge_agent (module level and inside
functions alike). README's "Architecture" section shows this same table; this test also checks
that README contains it row for row, so the two cannot drift apart."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import edge_agent

PKG = Path(edge_agent.__file__).resolve().parent
README = PKG.parent / "README.md"

# layer -> the other layers it may import. "root" is edge_agent/__init__.py (version, install
# hints) and edge_agent/errors.py (the one exception tree).
RULES: dict[str, tuple[str, ...]] = {
    "root": (),
    "core": ("root",),
    "adapters": ("core", "root"),
    "inference": ("adapters", "core", "root"),
    "tools": ("inference", "adapters", "core", "root"),
    "app": ("tools", "inference", "adapters", "core", "root"),
    "__main__": ("app", "root"),
}
# and: the service (`edge-agent run`: app/cli/run_cmd.py and every module it imports, at any depth)
# never imports tools/ (model tooling, with its own dependencies such as onnx)
SERVICE_ENTRY = "edge_agent.app.cli.run_cmd"
README_ROWS = {  # the first cell of each layer's row in README's table
    "root": "| root (`edge_agent/__init__.py`, `errors.py`) |",
    "core": "| `core/` |",
    "adapters": "| `adapters/` |",
    "inference": "| `inference/` |",
    "tools": "| `tools/` |",
    "app": "| `app/` |",
    "__main__": "| `__main__.py` |",
}


def module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def layer_of(module: str) -> str:
    parts = module.split(".")
    return "root" if len(parts) == 1 or parts[1] == "errors" else parts[1]


def imports(source: str, module: str, is_package: bool = False) -> set[str]:
    """edge_agent modules ``source`` imports anywhere in the file (``from x import y`` also counts
    x.y when that is a module; relative imports resolved against ``module``)."""
    here = module.split(".") if is_package else module.split(".")[:-1]
    out: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(here[: len(here) - node.level + 1] + ([base] if base else []))
            out.add(base)
            for a in node.names:
                sub = f"{base}.{a.name}"
                if (PKG.parent / Path(*sub.split("."))).with_suffix(".py").is_file():
                    out.add(sub)
    return {m for m in out if m == "edge_agent" or m.startswith("edge_agent.")}


def all_modules() -> dict[str, set[str]]:
    return {
        module_name(p): imports(p.read_text(encoding="utf-8"), module_name(p), p.name == "__init__.py")
        for p in sorted(PKG.rglob("*.py"))
    }


def violations(mods: dict[str, set[str]]) -> list[str]:
    return sorted(
        f"{m} ({layer_of(m)}) imports {i} ({layer_of(i)})"
        for m, deps in mods.items()
        for i in deps
        if layer_of(i) != layer_of(m) and layer_of(i) not in RULES[layer_of(m)]
    )


def service_modules(mods: dict[str, set[str]]) -> set[str]:
    seen: set[str] = set()
    todo = [SERVICE_ENTRY]
    while todo:
        m = todo.pop()
        if m not in seen and m in mods:
            seen.add(m)
            todo.extend(mods[m])
    return seen


def test_every_import_follows_the_table() -> None:
    mods = all_modules()
    assert len(mods) > 80 and {layer_of(m) for m in mods} == set(RULES), "a layer missing from RULES"
    bad = violations(mods)
    assert not bad, "layer rule broken:\n" + "\n".join(bad)


def test_the_service_never_imports_tools() -> None:
    seen = service_modules(all_modules())
    assert {
        "edge_agent.app.agent.agent",
        "edge_agent.app.updates.gate",
        "edge_agent.inference.compare",
    } <= seen
    assert not sorted(m for m in seen if layer_of(m) == "tools")


def test_the_checker_catches_a_function_level_import_upwards() -> None:
    """The checks can fail: an import inside a function, and a relative one, are both seen."""
    src = "def f():\n    from edge_agent.inference import preset_choice\n    from ..app.cli import main\n"
    mods = {"edge_agent.core.fake": imports(src, "edge_agent.core.fake")}
    assert violations(mods) == [
        "edge_agent.core.fake (core) imports edge_agent.app.cli (app)",
        "edge_agent.core.fake (core) imports edge_agent.app.cli.main (app)",
        "edge_agent.core.fake (core) imports edge_agent.inference (inference)",
        "edge_agent.core.fake (core) imports edge_agent.inference.preset_choice (inference)",
    ]
    runtime = dict(all_modules())
    runtime["edge_agent.app.updates.gate"] = runtime["edge_agent.app.updates.gate"] | {
        "edge_agent.tools.validate"
    }
    assert "edge_agent.tools.validate" in service_modules(runtime)


def test_readme_shows_the_same_table() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    for layer, allowed in RULES.items():
        rows = [ln for ln in lines if ln.startswith(README_ROWS[layer])]
        assert len(rows) == 1, f"README.md's architecture table has no single row for {layer}"
        assert rows[0].rstrip(" |").rsplit("|", 1)[1].strip() == (
            ", ".join(allowed) or "nothing of edge_agent"
        )


# a detection default written as a number outside core/vision/defaults.py: "conf=0.25", "padding: float = 0.1",
# "... else 0.1" after a crop_padding
_DEFAULT_LITERAL = re.compile(
    r"\b(conf|conf_threshold|iou|iou_threshold|default)\s*(:\s*float\s*)?=\s*(0\.25|0\.45)\b"
    r"|\b(padding|crop_padding)\s*(:\s*float\s*)?=\s*0\.1\b"
    r"|crop_padding.*(\belse\s+|default=)0\.1\b"
)


def test_the_detection_defaults_have_one_home() -> None:
    hits = []
    for p in PKG.rglob("*.py"):
        if p == PKG / "core" / "vision" / "defaults.py":
            continue
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
            if _DEFAULT_LITERAL.search(line.split("#", 1)[0]):
                hits.append(f"{p.relative_to(PKG)}:{n}: {line.strip()}")
    assert _DEFAULT_LITERAL.search("    padding: float = 0.1,") and _DEFAULT_LITERAL.search(
        "c.crop_padding if c else 0.1"
    )
    assert not hits


def test_cli_config_and_validate_share_them() -> None:
    import argparse

    from edge_agent.app.workbench import infer_cmd
    from edge_agent.core.config.schema import ClassifierConfig, DetectorConfig
    from edge_agent.core.vision.defaults import CONF_THRESHOLD, CROP_PADDING, IOU_THRESHOLD
    from edge_agent.core.vision.thresholds import Thresholds
    from edge_agent.inference.pipeline import DetectorParams

    sub = argparse.ArgumentParser().add_subparsers()
    infer_cmd.register(sub)
    args = sub.choices["infer"].parse_args([])
    assert (args.conf, args.iou, args.crop_padding) == (CONF_THRESHOLD, IOU_THRESHOLD, CROP_PADDING)
    d = DetectorConfig()
    assert (d.conf_threshold, d.iou_threshold) == (CONF_THRESHOLD, IOU_THRESHOLD)
    assert ClassifierConfig(model="c.onnx").crop_padding == CROP_PADDING
    p = DetectorParams()
    assert (p.conf_threshold, p.iou_threshold) == (CONF_THRESHOLD, IOU_THRESHOLD)
    assert Thresholds().conf == CONF_THRESHOLD
