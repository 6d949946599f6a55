"""The rooms of the house: feature wings inside each layer, small enough to read as a newcomer.

docs/architecture.md names the wings; these checks keep the tree the way it describes: no folder of
edge_agent holds more than MAX_MODULES modules (the flat 39-file adapters/ was the reason), every
wing says in its ``__init__`` what it holds, a module name means one thing across layers (the old
``core/tensorrt.py`` / ``adapters/tensorrt.py`` twins), and every wing is in the architecture doc.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import edge_agent

PKG = Path(edge_agent.__file__).resolve().parent
DOC = PKG.parent / "docs" / "architecture.md"
MAX_MODULES = 15
LAYERS = ("core", "inference", "adapters", "tools", "app")


def modules_per_folder(root: Path) -> dict[str, int]:
    """Folder (relative to ``root``) -> how many modules it holds (``__init__.py`` not counted)."""
    out: dict[str, int] = {}
    for d in [root, *sorted(p for p in root.rglob("*") if p.is_dir() and p.name != "__pycache__")]:
        n = sum(1 for p in d.glob("*.py") if p.name != "__init__.py")
        if n:
            out[d.relative_to(root).as_posix() or "."] = n
    return out


def crowded(counts: dict[str, int], limit: int = MAX_MODULES) -> dict[str, int]:
    return {d: n for d, n in counts.items() if n > limit}


def wings() -> list[str]:
    """Every package below a layer: ``adapters/outbox``, ``core/config``..."""
    return sorted(
        p.parent.relative_to(PKG).as_posix() for layer in LAYERS for p in (PKG / layer).glob("*/__init__.py")
    )


def test_no_folder_holds_more_than_fifteen_modules() -> None:
    counts = modules_per_folder(PKG)
    assert counts["adapters/outbox"] >= 10 and sum(counts.values()) > 130  # the count sees the tree
    assert not crowded(counts), f"split these folders into wings (> {MAX_MODULES} modules): {crowded(counts)}"


def test_the_check_fails_on_a_crowded_folder(tmp_path: Path) -> None:
    flat = tmp_path / "adapters"
    flat.mkdir()
    for i in range(16):
        (flat / f"m{i}.py").write_text("")
    (flat / "__init__.py").write_text("")
    (tmp_path / "adapters" / "w").mkdir()
    (tmp_path / "adapters" / "w" / "a.py").write_text("")
    counts = modules_per_folder(tmp_path)
    assert counts == {"adapters": 16, "adapters/w": 1}
    assert crowded(counts) == {"adapters": 16}


def test_every_wing_says_what_it_holds() -> None:
    assert len(wings()) >= 20
    silent = [w for w in wings() if not ast.get_docstring(ast.parse((PKG / w / "__init__.py").read_text()))]
    assert not silent, f"a wing without a docstring: {silent}"


def test_a_module_name_means_one_thing_across_layers() -> None:
    """The same file name in two layers (``core/tensorrt.py`` and ``adapters/tensorrt.py``) made a
    newcomer open the wrong one; names say what a module is instead (``tensorrt_plan``)."""
    layers: dict[str, set[str]] = defaultdict(set)
    for p in PKG.rglob("*.py"):
        rel = p.relative_to(PKG)
        if p.name != "__init__.py" and len(rel.parts) > 1:
            layers[p.stem].add(rel.parts[0])
    twins = {name: sorted(ls) for name, ls in layers.items() if len(ls) > 1}
    assert not twins


def test_the_architecture_doc_names_every_wing() -> None:
    text = DOC.read_text(encoding="utf-8")
    missing = [w for w in wings() if f"`{w}/`" not in text]
    assert not missing, f"docs/architecture.md does not name: {missing}"


def section_table() -> dict[str, str]:
    """docs/architecture.md's config table: section name -> the module defining it."""
    out = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and cells[0].startswith("[") and cells[1].startswith("core/config/"):
            out[cells[0].strip("[]")] = cells[1]
    return out


def test_a_config_section_names_its_module() -> None:
    """Klipper's rule: from ``[camera]`` in a config file to the module that defines it in one look
    at docs/architecture.md's table, which is checked here against the schema itself."""
    import typing

    from edge_agent.core.config.schema import Config

    table = section_table()
    got = {}
    for name, field in Config.model_fields.items():
        kinds = [a for a in typing.get_args(field.annotation) if isinstance(a, type)] or [field.annotation]
        (model,) = [k for k in kinds if k is not type(None)]
        got[name] = "core/config/" + model.__module__.rsplit(".", 1)[1] + ".py"
    assert set(got) >= {"camera", "detector", "mqtt", "zones"}
    assert table == got
