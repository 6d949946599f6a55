"""A real outbox-schema SQLite file whose bytes a test copies at any moment, and what SQLite itself
reads from such bytes: the salvage page reader's tests compare its read with SQLite's."""

from __future__ import annotations

import sqlite3
import subprocess
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from edge_agent.adapters.outbox.db import SCHEMA

Row = tuple[str, str, bytes, float, int]


class File:
    """A real outbox-schema SQLite file (auto_vacuum, WAL, no automatic checkpoint) whose bytes a
    test copies at any moment: what a crash or a copy of the card would leave."""

    def __init__(self, path: Path, page_size: int = 4096, reserve: int = 0) -> None:
        self.path = path
        if reserve:  # only the sqlite3 shell sets reserved bytes (SQLITE_FCNTL_RESERVE_BYTES)
            subprocess.run(
                [
                    "sqlite3",
                    str(path),
                    f".filectrl reserve_bytes {reserve}",
                    f"PRAGMA page_size={page_size}",
                    "VACUUM",
                ],
                check=True,
                capture_output=True,
            )
        self.conn = sqlite3.connect(str(path), isolation_level=None)
        self.conn.execute(f"PRAGMA page_size={page_size}")
        self.conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA wal_autocheckpoint=0")
        self.conn.execute(
            "PRAGMA secure_delete=FAST"
        ).fetchall()  # as the outbox: freed pages keep their rows
        self.conn.executescript(SCHEMA)

    def put(self, rows: Iterable[Row]) -> None:
        self.conn.execute("BEGIN")
        for msg_id, topic, payload, created, attempts in rows:
            self.conn.execute(
                "INSERT INTO messages(msg_id, topic, payload, size, created, attempts) VALUES (?, ?, ?, ?, ?, ?)",
                (msg_id, topic, payload, len(payload), created, attempts),
            )
        self.conn.execute("UPDATE meta SET value = (SELECT count(*) FROM messages) WHERE key = 'rows'")
        self.conn.execute("COMMIT")

    def delete(self, where: str) -> None:
        self.conn.execute(f"DELETE FROM messages WHERE {where}")

    def checkpoint(self) -> None:
        self.conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()

    def image(self) -> tuple[bytes, bytes]:
        wal = self.path.with_name(self.path.name + "-wal")
        return self.path.read_bytes(), wal.read_bytes() if wal.exists() else b""

    def close(self) -> None:
        self.conn.close()


@contextmanager
def outbox_file(page_size: int = 4096, reserve: int = 0) -> Iterator[File]:
    with tempfile.TemporaryDirectory() as d:
        f = File(Path(d) / "q.db", page_size, reserve)
        try:
            yield f
        finally:
            f.close()


def committed(db: bytes, wal: bytes) -> tuple[dict[int, Row], dict[str, int]]:
    """What SQLite itself reads from these bytes (it checks the WAL's checksums and commit marks)."""
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "c.db"
        path.write_bytes(db)
        if wal:
            path.with_name("c.db-wal").write_bytes(wal)
        conn = sqlite3.connect(str(path))
        try:
            rows = {
                r[0]: (r[1], r[2], r[3], r[4], r[5])
                for r in conn.execute("SELECT id, msg_id, topic, payload, created, attempts FROM messages")
            }
            return rows, dict(conn.execute("SELECT key, value FROM meta").fetchall())
        finally:
            conn.close()


def rows_of(n: int, size: int = 100, start: int = 0) -> list[Row]:
    return [
        (f"id-{i:06d}", "edge/d/detections", bytes([i % 251]) * size, 1.7e9 + i / 8, i % 3)
        for i in range(start, start + n)
    ]
