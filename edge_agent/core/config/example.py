"""``edge-agent config example``, generated from the schema (pure): each default and description lives
once, in the section models' ``Field`` (core/config*.py), so the example cannot drift from the code.

Sections with defaults are written live, every key with its default and its description as a
comment; a key with no default (TOML has no null) is a commented-out line with its example value;
optional sections (``[classifier]``, ``[sensor]``) and lists of tables (``[[zones]]``, ``[[lines]]``)
are commented out with an example. The schema holds no secret values (passwords come from files or
the environment), so none can be inlined.
"""

from __future__ import annotations

import math
import textwrap
import typing
from typing import List, Optional, Tuple, Type

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from edge_agent.core.config.collector import CollectorConfig
from edge_agent.core.config.schema import Config

WIDTH = 100
# keys whose default means "not set" but that `run` and `config check` require: the example writes
# their first `examples` value live (the round-trip test allows exactly these differences)
SET_IN_EXAMPLE = frozenset({"detector.model"})
HEADER = """\
# edge-agent configuration (TOML), generated from the schema by `edge-agent config example`:
# every key with its default and what it does. Unknown keys are errors, so a typo is never ignored.
# "# key = value" is a key unset by default, shown with an example value; a commented-out section
# is optional: remove one "# " from each of its lines to use it.
# Check a file with:  edge-agent config check FILE
"""
_NBSP = "\u00a0"  # keeps "> 0" on one comment line (textwrap does not break at it)
_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def toml_value(value: object) -> str:
    """``value`` as a TOML value (bool, int, float, str, and lists/tuples of those)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"{value:_}" if abs(value) >= 10_000 else str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return '"' + "".join(_ESCAPES.get(c) or _escape_control(c) for c in value) + '"'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    raise TypeError(f"no TOML form for a {type(value).__name__}: {value!r}")


def _escape_control(c: str) -> str:
    # TOML basic strings may hold any character but U+0000-U+001F and U+007F unescaped
    return f"\\u{ord(c):04x}" if ord(c) < 0x20 or ord(c) == 0x7F else c


def example_config(full: bool = False) -> str:
    """The commented example config. ``full``: optional sections and unset keys written live with
    their examples (what the tests validate, so every example value stays valid)."""
    parts = [HEADER]
    for name, field in Config.model_fields.items():
        model, kind = _section_model(field.annotation)
        body = [f"[[{name}]]" if kind == "list" else f"[{name}]"]
        nested = []
        for key, f in model.model_fields.items():
            if _is_section(f.annotation):  # [[cameras]]' own [motion], [[zones]], [[lines]]
                nested.append(
                    f"[{name}.{key}]" if _section_model(f.annotation)[1] != "list" else f"[[{name}.{key}]]"
                )
                continue
            body += _key_lines(f"{name}.{key}", key, f, full)
        if nested:
            body += _comment(
                f"{', '.join(nested)}: this one's own, with the keys of the top-level sections of those names"
            )
        # full: [[cameras]] is written live, and [camera] beside it is refused (CameraEntry has its keys)
        if (kind != "table" and not full) or (full and name == "camera"):
            body = [f"# {line}" for line in body]
        parts.append("\n".join(_comment(field.description or "") + body) + "\n")
    return "\n".join(parts)


COLLECTOR_HEADER = """\
# edge-agent collector configuration (TOML), generated from the schema by
# `edge-agent collect --example-config`: every key with its default and what it does; unknown keys
# are errors. "# key = value" is a key unset by default, shown with an example value. Any flag of
# `edge-agent collect` given overrides the file (docs/collector.md).
"""


def collector_example(full: bool = False) -> str:
    """The commented ``collector.toml`` (one ``[collector]`` table), made like :func:`example_config`."""
    body = ["[collector]"]
    for key, f in CollectorConfig.model_fields.items():
        body += _key_lines(f"collector.{key}", key, f, full)
    return COLLECTOR_HEADER + "\n" + "\n".join(body) + "\n"


def _is_section(annotation: object) -> bool:
    try:
        _section_model(annotation)
    except TypeError:
        return False
    return True


def _section_model(annotation: object) -> Tuple[Type[BaseModel], str]:
    """(the section's model, "table" | "optional" | "list") for a field of :class:`Config`."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, "table"
    origin = typing.get_origin(annotation)
    if args and isinstance(args[0], type) and issubclass(args[0], BaseModel):
        return args[0], "list" if origin in (list, List) else "optional"
    raise TypeError(f"Config field of type {annotation!r} is not a section (table, optional or list)")


def _key_lines(path: str, key: str, f: FieldInfo, full: bool) -> List[str]:
    lines = _comment(describe(f))
    if f.is_required() or path in SET_IN_EXAMPLE:
        return [*lines, f"{key} = {toml_value(example_value(path, f))}"]
    default = f.get_default(call_default_factory=True)
    if default is None:
        line = f"{key} = {toml_value(example_value(path, f))}"
        return [*lines, line if full else f"# {line}"]
    return [*lines, f"{key} = {toml_value(default)}"]


def example_value(path: str, f: FieldInfo) -> object:
    """The first of the field's ``examples``: what the example shows for a key without a default."""
    if not f.examples:
        raise ValueError(f"config key {path} has no default and no examples= to show in the example")
    return f.examples[0]


def describe(f: FieldInfo) -> str:
    """The field's description, plus its allowed values and bounds unless the description names them."""
    text = f.description or ""
    choices = _choices(f.annotation)
    if choices and not all(c in text for c in choices):
        text += f" [one{_NBSP}of:{_NBSP}{f',{_NBSP}'.join(choices)}]"
    bounds = _bounds(f)
    if bounds:
        text += f" [{bounds}]"
    return text


def _choices(annotation: object) -> List[str]:
    if typing.get_origin(annotation) is typing.Literal:
        return [str(a) for a in typing.get_args(annotation)]
    return []


def _bounds(f: FieldInfo) -> Optional[str]:
    signs = []
    for m in f.metadata:
        for attr, sign in (
            ("ge", ">="),
            ("gt", ">"),
            ("le", "<="),
            ("lt", "<"),
            ("min_length", "length >="),
            ("max_length", "length <="),
        ):
            limit = getattr(m, attr, None)
            if limit is not None:  # annotated_types.Ge/Gt/Le/Lt, as pydantic stores them
                signs.append(f"{sign}{_NBSP}{limit}")
    return f",{_NBSP}".join(signs) or None


def _comment(text: str) -> List[str]:
    # "# " + text, and room for the "# " that comments out an optional section
    wrapped = textwrap.wrap(text, WIDTH - 4, break_long_words=False, break_on_hyphens=False)
    return [f"# {line}".replace(_NBSP, " ") for line in wrapped]


def undocumented_keys(root: Type[BaseModel] = Config) -> List[str]:
    """Keys of ``root`` and every section below it without a description, or without ``examples``
    where the example has no default to show; a test keeps this empty."""
    out: List[str] = []
    for name, f in root.model_fields.items():
        if not (f.description or "").strip():
            out.append(f"{root.__name__}.{name}: no description")
        args = [f.annotation, *typing.get_args(f.annotation)]
        sections = [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)]
        unset = f.is_required() or (f.default is None and f.default_factory is None)
        if unset and not sections and not f.examples:
            out.append(f"{root.__name__}.{name}: no default and no examples")
        for section in sections:
            out += undocumented_keys(section)
    return out
