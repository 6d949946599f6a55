"""TOML text of a document, for the agent configs the tests write (``support.world.agent_toml``):
the standard library reads TOML but does not write it, and a test's override must reach the agent
exactly as given (``tests/support/test_world.py`` reads every written document back)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def merged(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``over`` laid on it, tables merged key by key; a ``None`` value removes the key."""
    out = dict(base)
    for key, value in over.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merged(out[key], value)
        else:
            out[key] = value
    return out


def _string(s: str) -> str:
    # a TOML basic string is a JSON string once DEL (legal in JSON, not in TOML) is escaped
    return json.dumps(s, ensure_ascii=False).replace("\x7f", "\\u007f")


def _key(k: str) -> str:
    return k if k and all(c.isascii() and (c.isalnum() or c in "_-") for c in k) else _string(k)


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        if isinstance(v, float) and not math.isfinite(v):
            return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
        return repr(v)
    if isinstance(v, (str, Path)):
        return _string(str(v))
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, Mapping):
        return "{" + ", ".join(f"{_key(k)} = {_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(f"no TOML form for {v!r}")


def _table(name: str, body: Mapping[str, Any], out: list[str]) -> None:
    def is_tables(v: Any) -> bool:
        return isinstance(v, list) and bool(v) and all(isinstance(x, Mapping) for x in v)

    out.append(f"[{name}]")
    out.extend(
        f"{_key(k)} = {_value(v)}" for k, v in body.items() if not isinstance(v, Mapping) and not is_tables(v)
    )
    for k, v in body.items():
        if isinstance(v, Mapping):
            _table(f"{name}.{_key(k)}", v, out)
        elif is_tables(v):
            for item in v:
                out.append(f"[[{name}.{_key(k)}]]")
                out.extend(f"{_key(ik)} = {_value(iv)}" for ik, iv in item.items())


def toml_text(doc: Mapping[str, Any]) -> str:
    """A TOML document of ``doc`` (tables, arrays of tables such as ``[[lines]]``, plain values)."""
    out: list[str] = []
    for name, body in doc.items():
        if isinstance(body, Mapping):
            _table(_key(name), body, out)
        elif isinstance(body, list) and body and all(isinstance(x, Mapping) for x in body):
            for item in body:
                out.append(f"[[{_key(name)}]]")
                out.extend(f"{_key(k)} = {_value(v)}" for k, v in item.items())
        else:
            out.insert(0, f"{_key(name)} = {_value(body)}")
    return "\n".join(out) + "\n"
