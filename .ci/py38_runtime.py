"""Python 3.8 constructs that vermin cannot see: the ones decided by what is evaluated at run time.

vermin (run next to this by .ci/py38-check.sh) knows the syntax and the stdlib modules, members
and keyword arguments of every version. It does not know:

- which annotations are *evaluated*: with ``from __future__ import annotations`` an annotation is a
  string, so ``list[int]`` / ``int | None`` are fine in a function signature but raise
  ``TypeError`` on 3.8 in a pydantic model field (pydantic evaluates field annotations);
- runtime expressions such as ``Alias = list[int]``, ``cast(dict[str, int], x)`` or
  ``isinstance(v, int | str)``;
- methods called on an instance whose type it cannot infer (``name.removeprefix("x")``).

Usage: python3 .ci/py38_runtime.py [PATH ...]   (default: edge_agent); exit 1 on any finding.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Iterator, Tuple

# builtins subscriptable only from 3.9 (PEP 585); collections.abc generics likewise
PEP585 = {"list", "dict", "tuple", "set", "frozenset", "type"}
ABC_GENERICS = {
    "Callable", "Iterable", "Iterator", "Generator", "Mapping", "MutableMapping", "Sequence",
    "MutableSequence", "Set", "MutableSet", "Collection", "Container", "AsyncIterator",
    "AsyncIterable", "Awaitable", "Coroutine", "KeysView", "ValuesView", "ItemsView",
}  # fmt: skip
TYPE_NAMES = PEP585 | {"int", "str", "float", "bytes", "bool", "complex", "object", "bytearray"}
# instance methods added in 3.9+ (os.readlink etc. are module functions: vermin's job)
NEW_METHODS = {
    "removeprefix": "3.9 (str/bytes)",
    "removesuffix": "3.9 (str/bytes)",
    "is_relative_to": "3.9 (pathlib.Path)",
    "with_stem": "3.9 (pathlib.Path)",
    "randbytes": "3.9 (random.Random)",
    "bit_count": "3.10 (int)",
    "cancel_futures": "3.9 (Executor.shutdown keyword)",
}
MODULE_RECEIVERS = {"os", "os.path"}
PYDANTIC_BASES = {"BaseModel", "RootModel", "BaseSettings"}

Finding = Tuple[Path, int, str]


def _has_future_annotations(tree: ast.Module) -> bool:
    return any(
        isinstance(n, ast.ImportFrom)
        and n.module == "__future__"
        and any(a.name == "annotations" for a in n.names)
        for n in tree.body
    )


def _base_name(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript):
        return _base_name(node.value)
    return ""


def model_classes(trees: list[ast.Module]) -> set[str]:
    """Names of pydantic model classes, following subclassing across all given modules."""
    models = set(PYDANTIC_BASES)
    classes = [c for t in trees for c in ast.walk(t) if isinstance(c, ast.ClassDef)]
    grew = True
    while grew:
        grew = False
        for c in classes:
            if c.name not in models and any(_base_name(b) in models for b in c.bases):
                models.add(c.name)
                grew = True
    return models - PYDANTIC_BASES


def abc_imports(tree: ast.Module) -> set[str]:
    """Local names bound by ``from collections.abc import X`` (subscriptable only from 3.9)."""
    return {
        a.asname or a.name
        for n in ast.walk(tree)
        if isinstance(n, ast.ImportFrom) and n.module == "collections.abc"
        for a in n.names
    }


def _runtime_type_problems(
    node: ast.AST, abc_names: frozenset[str] | set[str] = frozenset()
) -> Iterator[tuple[int, str]]:
    """PEP 585 subscripts and PEP 604 unions inside an expression that is evaluated."""
    for n in ast.walk(node):
        if isinstance(n, ast.Subscript):
            name = n.value.id if isinstance(n.value, ast.Name) else ""
            if name in PEP585:
                yield n.lineno, f"{name}[...] evaluated at run time needs 3.9: use typing.{name.capitalize()}"
            elif name in abc_names:
                yield (
                    n.lineno,
                    f"collections.abc {name}[...] evaluated at run time needs 3.9: use typing.{name}",
                )
            elif isinstance(n.value, ast.Attribute) and n.value.attr in ABC_GENERICS:
                yield n.lineno, f"collections.abc {n.value.attr}[...] evaluated at run time needs 3.9"
        elif isinstance(n, ast.BinOp) and isinstance(n.op, ast.BitOr):
            sides = (n.left, n.right)
            if any(_is_type_like(s) for s in sides):
                yield (
                    n.lineno,
                    "X | Y between types evaluated at run time needs 3.10: use typing.Optional/Union",
                )


def _is_type_like(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant) and node.value is None:
        return True
    if isinstance(node, ast.Name) and node.id in TYPE_NAMES:
        return True
    return isinstance(node, ast.Subscript) and _is_type_like(node.value)


def _annotation_nodes(tree: ast.Module) -> set[int]:
    """ids of every node inside an annotation (not evaluated under the __future__ import)."""
    ids: set[int] = set()
    for n in ast.walk(tree):
        anns: list[ast.AST] = []
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = n.args
            anns += [x.annotation for x in (*a.posonlyargs, *a.args, *a.kwonlyargs) if x.annotation]
            anns += [x.annotation for x in (a.vararg, a.kwarg) if x is not None and x.annotation]
            if n.returns:
                anns.append(n.returns)
        elif isinstance(n, ast.AnnAssign):
            anns.append(n.annotation)
        for ann in anns:
            ids.update(id(x) for x in ast.walk(ann))
    return ids


def check_tree(path: Path, tree: ast.Module, models: set[str]) -> list[Finding]:
    out: list[Finding] = []
    future = _has_future_annotations(tree)
    in_annotation = _annotation_nodes(tree) if future else set()
    abc_names = abc_imports(tree)
    # model fields: evaluated by pydantic even under the __future__ import
    for c in ast.walk(tree):
        if isinstance(c, ast.ClassDef) and c.name in models:
            for stmt in c.body:
                if isinstance(stmt, ast.AnnAssign):
                    for line, msg in _runtime_type_problems(stmt.annotation, abc_names):
                        out.append((path, line, f"pydantic field of {c.name}: {msg}"))
    # everything evaluated: all expressions outside annotations (outermost match reports for its subtree)
    covered = set(in_annotation)
    for n in ast.walk(tree):
        if id(n) in covered or not isinstance(n, (ast.Subscript, ast.BinOp)):
            continue
        problems = list(_runtime_type_problems(n, abc_names))
        if problems:
            covered.update(id(x) for x in ast.walk(n))
            out += [(path, line, msg) for line, msg in problems]
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in NEW_METHODS:
            receiver = ast.unparse(n.func.value) if hasattr(ast, "unparse") else ""
            if receiver not in MODULE_RECEIVERS:
                out.append((path, n.lineno, f".{n.func.attr}() needs Python {NEW_METHODS[n.func.attr]}"))
    return out


def check_paths(paths: list[Path]) -> list[Finding]:
    files = sorted({f for p in paths for f in ([p] if p.is_file() else p.rglob("*.py"))})
    trees = [(f, ast.parse(f.read_text(encoding="utf-8"), filename=str(f))) for f in files]
    models = model_classes([t for _, t in trees])
    return sorted({finding for f, t in trees for finding in check_tree(f, t, models)})


def main(argv: list[str]) -> int:
    paths = [Path(a) for a in argv] or [Path("edge_agent")]
    findings = check_paths(paths)
    for path, line, msg in findings:
        print(f"{path}:{line}: {msg}")
    if findings:
        print(f"py38-runtime: {len(findings)} construct(s) that fail on Python 3.8", file=sys.stderr)
        return 1
    print(f"py38-runtime: ok ({', '.join(map(str, paths))})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
