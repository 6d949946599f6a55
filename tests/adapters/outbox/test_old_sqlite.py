"""The agent's SQL on the SQLite of the boards it runs on: Ubuntu 18.04 (Jetson Nano, JetPack 4.6)
ships 3.22, Raspberry Pi OS Bullseye 3.34. The outbox's ack used ``DELETE ... RETURNING`` (3.35)
and every ack failed there: results were sent, never deleted, and sent again forever.

A real old SQLite runs in CI's oldest-stack stage (Debian bullseye's libsqlite3 3.34.1 under
CPython 3.8, end to end through a sync to mosquitto). Here: the path without RETURNING gives the
same outcome as the one with it, on whatever SQLite this machine has; and no statement of the
agent's side uses syntax newer than 3.22 (the collector runs on a server and may).
"""

from __future__ import annotations

import ast
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.outbox import TOPIC, big_limits

from edge_agent.adapters.outbox import db as outbox_db
from edge_agent.adapters.outbox.outbox import Outbox
from edge_agent.adapters.outbox.views import iter_messages, read_stats

PACKAGE = Path(__file__).resolve().parents[3] / "edge_agent"


@pytest.mark.parametrize("returning", [False, True])
def test_ack_and_ack_and_claim_without_returning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, returning: bool
) -> None:
    if returning and sqlite3.sqlite_version_info < (3, 35, 0):
        pytest.skip(f"this SQLite ({sqlite3.sqlite_version}) has no RETURNING")
    monkeypatch.setattr(outbox_db, "HAS_RETURNING", returning)
    path = tmp_path / "q.db"
    ob = Outbox(path, big_limits(), flush_interval_s=60, flush_batch=1000)
    for i in range(30):
        ob.put(TOPIC, {"n": i})
    ob.flush()
    first = ob.claim(10)
    assert ob.ack([m.rowid for m in first[:4]] + [10_000]) == 4  # a rowid that is not there: not counted
    n, nxt = ob.ack_and_claim([m.rowid for m in first[4:]], 5)
    assert n == 6 and [m.rowid for m in nxt] == [11, 12, 13, 14, 15]
    assert (ob.stats()["pending"], ob.stats()["inflight"]) == (20, 5)
    ob.close()
    assert [m["rowid"] for m in iter_messages(path)] == list(range(11, 31))
    assert read_stats(path)["pending"] == 20  # the meta row count moved with the deletes


def test_has_returning_follows_the_loaded_sqlite() -> None:
    assert (sqlite3.sqlite_version_info >= (3, 35, 0)) == outbox_db.HAS_RETURNING


# syntax newer than SQLite 3.22, with the version that brought it
NEWER = {
    r"\bRETURNING\b": "RETURNING (3.35)",
    r"ON\s+CONFLICT[^\"']*DO\s+(UPDATE|NOTHING)": "UPSERT (3.24)",
    r"\bOVER\s*\(": "window functions (3.25)",
    r"FILTER\s*\(\s*WHERE": "aggregate FILTER (3.30)",
    r"->>": "JSON ->> (3.38)",
    r"\)\s*STRICT\b": "STRICT tables (3.37)",
    r"\biif\s*\(": "iif() (3.32)",
    r"\b(DROP|RENAME)\s+COLUMN\b": "ALTER TABLE ... COLUMN (3.25/3.35)",
    r"NULLS\s+(FIRST|LAST)": "NULLS FIRST/LAST (3.30)",
}


def sql_strings(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """The string constants of a module (f-string parts too), not its docstrings, and not inside
    an ``if ...HAS_RETURNING`` branch (the version check)."""

    def walk(node: ast.AST) -> Iterator[tuple[int, str]]:
        if isinstance(node, ast.If) and "HAS_RETURNING" in ast.unparse(node.test):
            yield from (x for n in node.orelse for x in walk(n))
            return
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            return  # a docstring
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.lineno, node.value
        for child in ast.iter_child_nodes(node):
            yield from walk(child)

    yield from walk(tree)


def test_the_agent_side_sql_runs_on_sqlite_3_22() -> None:
    found = []
    for py in sorted(PACKAGE.rglob("*.py")):
        source = py.read_text()
        if "collector" in py.parts or "sqlite3" not in source:
            continue  # the collector runs on a server (new SQLite or PostgreSQL); no SQL elsewhere
        for no, text in sql_strings(ast.parse(source)):
            for pattern, what in NEWER.items():
                if re.search(pattern, text, re.IGNORECASE):
                    found.append(f"{py.relative_to(PACKAGE.parent)}:{no}: {what}: {text.strip()[:80]}")
    assert found == []


def test_the_scan_sees_what_it_looks_for() -> None:
    code = 'if HAS_RETURNING:\n    a = "DELETE ... RETURNING id"\nelse:\n    b = "x"\nc = "DELETE ... RETURNING id"\n'
    assert [no for no, t in sql_strings(ast.parse(code)) if "RETURNING" in t] == [5]
    hits = [
        what
        for text, what in [
            ("DELETE FROM messages WHERE id = 1 RETURNING id", "RETURNING (3.35)"),
            ("INSERT INTO t VALUES (1) ON CONFLICT (k) DO UPDATE SET v = 1", "UPSERT (3.24)"),
            ("SELECT row_number() OVER (ORDER BY id) FROM t", "window functions (3.25)"),
        ]
        if any(re.search(p, text, re.IGNORECASE) and w == what for p, w in NEWER.items())
    ]
    assert len(hits) == 3
