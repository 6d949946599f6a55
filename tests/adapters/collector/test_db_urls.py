"""The collector database's URL forms (issue 36), on real SQLite files and a real PostgreSQL:
``sqlite:///relative`` is relative to the working directory and ``sqlite:////absolute`` absolute;
``postgresql://`` and ``postgres://`` both reach the server with their user, host, port, database
and query (libpq's parameters: ``application_name``, ``host=`` a socket folder) kept; every bad
form is one line naming it, from the config file and from the database adapter alike."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from support.collector import Postgres

from edge_agent.adapters.collector.db import CollectorDb, DbError
from edge_agent.core.config.collector import parse_collector_config
from edge_agent.errors import ConfigError


def migrated(url: str) -> None:
    db = CollectorDb(url)
    try:
        db.migrate()
        assert db.schema_version() > 0
    finally:
        db.close()


def test_three_slashes_is_a_path_relative_to_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    # "proc/...": read as absolute by mistake it would be /proc/..., where nothing can be created
    migrated("sqlite:///proc/fleet.db")
    assert (tmp_path / "proc" / "fleet.db").is_file()


def test_four_slashes_is_an_absolute_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    target = tmp_path / "abs" / "fleet.db"
    migrated(f"sqlite:///{target}")
    assert target.is_file() and os.listdir(elsewhere) == []


@pytest.mark.parametrize(
    "url",
    [
        "sqlite:///",
        "sqlite:////",
        "sqlite:///some/dir/",
        "sqlite://fleet.db",
        "sqlite:fleet.db",
        "mysql://h/db",
    ],
)
def test_a_bad_form_is_one_line_from_the_adapter(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(DbError) as err:
        CollectorDb(url)
    assert str(err.value).startswith(f"--db {url!r}: expected sqlite:///") and "\n" not in str(err.value)
    assert os.listdir(tmp_path) == []  # nothing created for it


@pytest.mark.parametrize(
    "url", ["sqlite://fleet.db", "sqlite:fleet.db", "postgresql:/db", "postgres:db", "pg://h/db"]
)
def test_a_bad_form_is_one_line_from_the_config_file(url: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_collector_config(f"[collector]\ndb = '{url}'\n", "c.toml", {})
    assert str(err.value).startswith(
        f"c.toml [collector]: db = {url!r}: Value error, expected sqlite:///PATH"
    )


@pytest.mark.parametrize(
    "url",
    [
        "sqlite:///rel.db",
        "sqlite:////abs/fleet.db",
        "postgresql://u@h:5433/db?sslmode=require",
        "postgres://u@h/db",
    ],
)
def test_each_good_form_is_taken_by_the_config_file_as_written(url: str) -> None:
    assert parse_collector_config(f"[collector]\ndb = '{url}'\n", "c.toml", {}).db == url
    assert parse_collector_config("", "c.toml", {"db": url}).db == url


def setting(url: str, name: str) -> Any:
    db = CollectorDb(url)
    try:
        assert db.dialect == "postgresql"
        return db.conn.execute(f"SELECT current_setting('{name}')").fetchone()[0]
    finally:
        db.close()


def test_postgres_and_postgresql_schemes_both_reach_the_server(postgres: Postgres) -> None:
    assert postgres.url.startswith("postgresql://")
    for url in (postgres.url, "postgres://" + postgres.url[len("postgresql://") :]):
        assert int(setting(url, "port")) == postgres.port
        migrated(url)


def test_the_query_of_a_postgresql_url_reaches_libpq(postgres: Postgres) -> None:
    assert setting(postgres.url + "?application_name=edge-bite", "application_name") == "edge-bite"
    # host= a socket folder, no host in the authority: the server's own unix socket
    sock = f"postgresql:///postgres?host={postgres.root}&port={postgres.port}&user=postgres"
    assert setting(sock, "unix_socket_directories") == str(postgres.root)
    db = CollectorDb(sock)
    try:
        assert db.conn.info.host == str(postgres.root)
    finally:
        db.close()


def test_a_wrong_port_is_one_line_naming_postgresql(postgres: Postgres) -> None:
    wrong = postgres.url.replace(f":{postgres.port}/", ":1/")
    with pytest.raises(DbError) as err:
        CollectorDb(wrong)
    assert str(err.value).startswith("--db: cannot connect to PostgreSQL: ") and "\n" not in str(err.value)
