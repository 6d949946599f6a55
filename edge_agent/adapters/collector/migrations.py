"""The collector's schema files: ``sql/<dialect>/NNNN_name.sql``, numbered without a gap, applied
in order by :meth:`CollectorDb.migrate <edge_agent.adapters.collector.db.CollectorDb.migrate>`."""

from __future__ import annotations

import re
from pathlib import Path

from edge_agent.errors import EdgeAgentError

SQL_DIR = Path(__file__).resolve().parent / "sql"
_MIGRATION_RE = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")


class DbError(EdgeAgentError):
    """The database URL, driver or schema is unusable (one line)."""


def migrations(dialect: str) -> list[tuple[int, str, str]]:
    """``(version, file name, sql)`` for ``dialect``, in order; a missing number is an error."""
    found = sorted(p for p in (SQL_DIR / dialect).iterdir() if _MIGRATION_RE.match(p.name))
    out = []
    for i, p in enumerate(found, 1):
        version = int(p.name[:4])
        if version != i:
            raise DbError(f"{p}: migration {version} out of order, expected {i:04d}_*.sql")
        out.append((version, p.name, p.read_text(encoding="utf-8")))
    return out


def statements(sql: str) -> list[str]:
    """The statements of a migration file (no ';' inside our statements; comments dropped)."""
    text = "\n".join(line for line in sql.splitlines() if not line.lstrip().startswith("--"))
    return [s.strip() for s in text.split(";") if s.strip()]
