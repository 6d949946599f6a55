"""The collector's schema files as migrate() reads them, without a database: every dialect's files
numbered 1..N without a gap, only ``NNNN_name.sql`` files taken (a backup or an editor's copy
beside them is never run), in number order whatever order the directory lists them in, and a
file split into its statements with the comments dropped (SQLite runs them one by one)."""

from __future__ import annotations

from pathlib import Path

import pytest

from edge_agent.adapters.collector import migrations as m


def test_each_dialect_ships_its_files_numbered_from_one_without_a_gap() -> None:
    for dialect in ("sqlite", "postgresql"):
        got = m.migrations(dialect)
        files = sorted(p.name for p in (m.SQL_DIR / dialect).glob("*.sql"))
        assert [n for _, n, _ in got] == files and len(files) >= 7
        assert [v for v, _, _ in got] == list(range(1, len(files) + 1))
        for _, name, sql in got:
            assert sql == (m.SQL_DIR / dialect / name).read_text(encoding="utf-8")
        assert "CREATE TABLE" in got[0][2]


def _dir(tmp_path: Path, names: list[str]) -> None:
    d = tmp_path / "sqlite"
    d.mkdir()
    for n in names:
        (d / n).write_text(f"-- {n}\nCREATE TABLE t (x INTEGER);\n", encoding="utf-8")


def test_only_numbered_sql_files_count_and_in_number_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # written newest first: the listing order is not the run order
    _dir(
        tmp_path,
        [
            "0002_more.sql",
            "0001_init.sql",
            "0001_init.sql.bak",  # an editor's copy: not a migration
            "x0003_more.sql",
            "003_short.sql",
            "00003_long.sql",
            "0003_Upper.sql",
            "0003_dash-name.sql",
            "0003_.sql",
            "README.txt",
        ],
    )
    monkeypatch.setattr(m, "SQL_DIR", tmp_path)
    got = m.migrations("sqlite")
    assert [(v, n) for v, n, _ in got] == [(1, "0001_init.sql"), (2, "0002_more.sql")]
    assert got[1][2] == "-- 0002_more.sql\nCREATE TABLE t (x INTEGER);\n"


def test_a_file_numbered_past_a_gap_is_named_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _dir(tmp_path, ["0001_init.sql", "0002_b.sql", "0004_d.sql"])
    monkeypatch.setattr(m, "SQL_DIR", tmp_path)
    with pytest.raises(m.DbError) as err:
        m.migrations("sqlite")
    assert (
        str(err.value)
        == f"{tmp_path / 'sqlite' / '0004_d.sql'}: migration 4 out of order, expected 0003_*.sql"
    )


def test_a_first_file_not_numbered_one_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _dir(tmp_path, ["0002_b.sql"])
    monkeypatch.setattr(m, "SQL_DIR", tmp_path)
    with pytest.raises(m.DbError, match=r"0002_b.sql: migration 2 out of order, expected 0001_\*.sql$"):
        m.migrations("sqlite")


def test_a_migration_read_as_utf8(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = tmp_path / "sqlite"
    d.mkdir()
    (d / "0001_init.sql").write_bytes("-- Zähler °C\nCREATE TABLE t (x INTEGER);\n".encode())
    monkeypatch.setattr(m, "SQL_DIR", tmp_path)
    assert m.migrations("sqlite")[0][2].startswith("-- Zähler °C\n")


def test_statements_drop_comments_and_blank_pieces() -> None:
    sql = (
        "-- the header\n"
        "CREATE TABLE a (\n"
        "    x INTEGER\n"
        ");\n"
        "   -- an indented comment; with a semicolon\n"
        "\n"
        "CREATE INDEX a_x ON a (x);;\n"
        "  ;\n"
        "INSERT INTO a VALUES (1)\n"
    )
    assert m.statements(sql) == [
        "CREATE TABLE a (\n    x INTEGER\n)",
        "CREATE INDEX a_x ON a (x)",
        "INSERT INTO a VALUES (1)",
    ]
    assert m.statements("-- only a comment;\n") == []
    assert m.statements("") == []
