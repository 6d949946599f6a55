"""Tallies: named counters a ``put()`` carries, stored in ``meta`` in the transaction of its row.

The objects-mode counters (core.objects.count_keys) ride here so that a counter and the event that
changed it are durable together: a JSON checkpoint fsynced beside the queue was ahead of the
events after a kill -9 in the 0.2 s group-commit window (4 of 4 tries). They are ``meta`` rows
(``tally:<name>``): no schema change, no write at open, and the salvage of a damaged file copies
them with the other meta rows. A row that is never stored (dropped batch, crash) applies nothing.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from typing import Dict, Tuple

PREFIX = "tally:"
MAX_NAME = 400  # ["interval","zones",<64 characters>,"entered"] is < 100 (4 bytes a character: 330)
MAX_VALUE = 1 << 62  # SQLite's INTEGER is 64-bit signed: a sum of two stays below 2**63
MAX_OPS = 1000  # 64 zones + 64 lines, interval and totals: < 400 per message

Op = Tuple[str, str, int]
Folded = Dict[str, Tuple[bool, int]]  # name -> (set: True / add: False, value)


def checked(ops: Sequence[Op]) -> Tuple[Op, ...]:
    """``ops`` as a tuple, or ValueError naming the first operation the outbox cannot store."""
    if len(ops) > MAX_OPS:
        raise ValueError(f"tally: {len(ops)} operations in one message; at most {MAX_OPS}")
    for op in ops:
        kind, name, value = op
        if kind not in ("add", "set"):
            raise ValueError(f"tally {name!r}: operation {kind!r}; expected 'add' or 'set'")
        if not isinstance(name, str) or not 0 < len(name) <= MAX_NAME or "\0" in name:
            raise ValueError(f"tally name {name!r}: expected 1-{MAX_NAME} characters without NUL")
        if name.encode("utf-8", "surrogatepass") != name.encode("utf-8", "replace"):
            raise ValueError(f"tally name {name!r}: a lone surrogate is not text")
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_VALUE:
            raise ValueError(f"tally {name!r}: value {value!r}; expected an integer 0..{MAX_VALUE}")
    return tuple(ops)


def fold(ops: Iterable[Sequence[Op]]) -> Folded:
    """The operations of several rows, in put order, as one write per name."""
    out: Folded = {}
    for row in ops:
        for kind, name, value in row:
            was_set, v = out.get(name, (False, 0))
            out[name] = (True, value) if kind == "set" else (was_set, min(MAX_VALUE, v + value))
    return out


def write(conn: sqlite3.Connection, folded: Folded) -> None:
    """Inside the caller's write transaction (SQL of SQLite 3.22: no UPSERT)."""
    for name, (is_set, value) in folded.items():
        k = PREFIX + name
        if is_set:
            conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (k, value))
        else:
            conn.execute("INSERT OR IGNORE INTO meta(key, value) VALUES (?, 0)", (k,))
            conn.execute("UPDATE meta SET value = min(?, value + ?) WHERE key = ?", (MAX_VALUE, value, k))


def apply(values: Dict[str, int], folded: Folded) -> None:
    """What :func:`write` did, on the in-memory copy (after the COMMIT)."""
    for name, (is_set, value) in folded.items():
        values[name] = value if is_set else min(MAX_VALUE, values.get(name, 0) + value)


def from_meta(meta: Mapping[str, int]) -> Dict[str, int]:
    """The stored tallies among a file's meta rows."""
    return {k[len(PREFIX) :]: int(v) for k, v in meta.items() if k.startswith(PREFIX)}
