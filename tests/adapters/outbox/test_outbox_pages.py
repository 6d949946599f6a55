"""The salvage page reader (outbox_pages) against real SQLite files: what it reads is exactly what
SQLite itself reads from the same bytes (file + WAL), at every page size, with overflow chains and
reserved bytes; it never brings back deleted rows, never takes WAL frames of a transaction that did
not commit or of an older WAL generation, and no damage to the bytes makes it raise (hypothesis)."""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from pathlib import Path
from typing import Optional

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.sqlite_file import Row, committed, outbox_file, rows_of

from edge_agent.adapters.outbox.db import SCHEMA
from edge_agent.adapters.outbox.pages import PageScan, scan, scan_file


def assert_reads_as_sqlite(found: PageScan, db: bytes, wal: bytes) -> None:
    rows, meta = committed(db, wal)
    assert found.messages == rows
    assert all(type(m[3]) is float and type(m[4]) is int for m in found.messages.values())
    assert found.meta == meta  # and not sqlite_sequence's ("messages", n), the other 2-column table
    assert found.damaged_pages == 0


# every kind of value a row holds: every integer width (0 and 1 have their own serial types),
# whole-number "REAL"s (SQLite stores them as integers), text of any length, payloads up to several
# overflow pages
texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
ints = st.one_of(
    st.sampled_from(
        [0, 1, -1, 127, 128, -129, 32767, 32768, 2**23, 2**31, -(2**31) - 1, 2**47, 2**63 - 1, -(2**63)]
    ),
    st.integers(-(2**63), 2**63 - 1),
)
created = st.one_of(st.floats(allow_nan=False), ints.map(float).filter(lambda x: abs(x) < 2**53))
row = st.tuples(texts, texts, st.binary(max_size=9000), created, ints)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    page_size=st.sampled_from([512, 1024, 4096, 65536]),
    rows=st.lists(row, min_size=1, max_size=12),
    delete_every=st.integers(2, 4),
)
def test_every_row_reads_back_as_sqlite_reads_it(page_size: int, rows: list[Row], delete_every: int) -> None:
    with outbox_file(page_size) as f:
        f.put(rows)
        f.delete(f"id % {delete_every} = 0")
        f.checkpoint()
        db, wal = f.image()
        assert_reads_as_sqlite(scan(db), db, b"")  # the main file alone, after the checkpoint
        f.put(rows[:3])
        db, wal = f.image()
        assert_reads_as_sqlite(scan(db, wal), db, wal)  # with the newest rows only in the WAL


@pytest.mark.parametrize("page_size", [512, 2048, 8192, 16384, 32768])
def test_rows_with_overflow_chains_at_every_page_size(page_size: int) -> None:
    with outbox_file(page_size) as f:
        # sizes around the local payload bound and chains of several pages
        sizes = [page_size - 40, page_size - 30, page_size, 2 * page_size + 7, 5 * page_size]
        f.put(
            [
                (f"m{i}", "t", bytes(range(256)) * (s // 256) + b"x" * (s % 256), 1.0, i)
                for i, s in enumerate(sizes)
            ]
        )
        f.put(rows_of(30))
        f.checkpoint()
        db, _ = f.image()
    found = scan(db)
    assert found.page_size == page_size and found.pages == len(db) // page_size
    assert_reads_as_sqlite(found, db, b"")


@pytest.mark.skipif(shutil.which("sqlite3") is None, reason="reserved bytes are set with the sqlite3 shell")
@pytest.mark.parametrize("reserve", [8, 32, 100])
def test_a_file_with_reserved_bytes_per_page_reads_back(reserve: int) -> None:
    """Reserved bytes (an encryption or checksum extension's) shrink the usable page: the overflow
    split and the chain's page share follow the usable size, not the page size."""
    with outbox_file(1024, reserve) as f:
        f.put([(f"m{i}", "t", bytes([i]) * s, 2.0, 0) for i, s in enumerate([900, 950, 1000, 3000, 777])])
        f.checkpoint()
        db, _ = f.image()
    assert db[20] == reserve
    assert_reads_as_sqlite(scan(db), db, b"")


def test_deleted_rows_on_the_freelist_never_come_back() -> None:
    """Pages freed by acks keep the acked rows' bytes; several freelist trunks at 512-byte pages."""
    with outbox_file(512) as f:
        f.put(rows_of(3000, size=60))
        f.delete("id <= 2900")
        f.checkpoint()
        db, _ = f.image()
    assert int.from_bytes(db[36:40], "big") > 2 * (512 - 8) // 4  # more free pages than one trunk holds
    found = scan(db)
    assert sorted(found.messages) == list(range(2901, 3001))
    assert_reads_as_sqlite(found, db, b"")


@pytest.mark.parametrize("page_size", [512, 1024, 2048, 4096, 8192])
def test_without_the_header_the_pointer_map_keeps_deleted_rows_out(page_size: int) -> None:
    """The first 100 bytes overwritten: the page size and the freelist's head are gone; the page
    size is found and the free pages come from the pointer map (several map pages at small sizes)."""
    with outbox_file(page_size) as f:
        f.put(rows_of(1500, size=80))
        f.delete("id <= 1200")
        f.checkpoint()
        db, _ = f.image()
    rows, _ = committed(db, b"")
    found = scan(b"\xff" * 100 + db[100:])
    assert found.ptrmap and found.page_size == page_size
    assert found.messages == rows and sorted(rows) == list(range(1201, 1501))


def test_without_a_header_or_a_pointer_map_the_size_with_the_most_rows_is_taken() -> None:
    with tempfile.TemporaryDirectory() as d:
        conn = sqlite3.connect(str(Path(d) / "q.db"), isolation_level=None)
        conn.execute("PRAGMA page_size=2048")  # no auto_vacuum: no pointer map
        conn.executescript(SCHEMA)
        conn.executemany(
            "INSERT INTO messages(msg_id, topic, payload, size, created) VALUES (?, ?, ?, ?, ?)",
            [(m[0], m[1], m[2], len(m[2]), m[3]) for m in rows_of(150)],
        )
        conn.close()
        db = (Path(d) / "q.db").read_bytes()
    found = scan(b"\0" * 100 + db[100:])
    assert not found.ptrmap and found.page_size == 2048
    assert sorted(found.messages) == list(range(1, 151))


def test_without_a_header_the_wal_says_the_page_size() -> None:
    with outbox_file(1024) as f:
        f.put(rows_of(300))
        f.checkpoint()
        f.put(rows_of(50, start=300))
        db, wal = f.image()
    rows, _ = committed(db, wal)
    found = scan(b"\0" * 100 + db[100:], wal)
    assert found.page_size == 1024 and found.messages == rows


def test_frames_of_a_transaction_that_never_committed_are_not_taken() -> None:
    """A transaction bigger than the page cache spills its pages to the WAL before its commit: a
    crash then leaves frames without a commit frame after them."""
    with outbox_file(1024) as f:
        f.put(rows_of(100))
        f.conn.execute("PRAGMA cache_size=2")
        f.conn.execute("BEGIN")
        f.conn.execute("DELETE FROM messages WHERE id <= 90")  # acked, but not committed
        f.conn.executemany(
            "INSERT INTO messages(msg_id, topic, payload, size, created) VALUES (?, ?, ?, ?, ?)",
            [(m[0], m[1], m[2], len(m[2]), m[3]) for m in rows_of(200, start=100)],
        )
        db, wal = f.image()
        f.conn.execute("ROLLBACK")
    rows, _ = committed(db, wal)
    assert sorted(rows) == list(range(1, 101))
    assert len(wal) > 32 + 3 * (24 + 1024)  # the spilled frames are there
    assert_reads_as_sqlite(scan(db, wal), db, wal)


def test_the_newest_committed_frame_of_a_page_wins() -> None:
    """The same pages written by three commits (rows added, then most of them deleted): an older
    frame taken over a newer one brings deleted rows back."""
    with outbox_file(4096) as f:
        f.put(rows_of(60))
        f.delete("id <= 50")
        f.put(rows_of(5, start=60))
        db, wal = f.image()
    found = scan(db, wal)
    assert sorted(found.messages) == list(range(51, 66))
    assert_reads_as_sqlite(found, db, wal)


def test_frames_of_an_older_wal_generation_are_not_taken() -> None:
    """After a full checkpoint the next writer restarts the WAL from its start under a new salt; the
    old generation's frames stay behind the new ones and hold rows deleted since."""
    with outbox_file(1024) as f:
        f.put(rows_of(400))
        f.checkpoint()
        f.delete("id <= 390")  # the new generation: a few frames over the old ones
        db, wal = f.image()
    frames = (len(wal) - 32) // (24 + 1024)
    last = 32 + (24 + 1024) * (frames - 1)
    assert frames > 10 and wal[last + 8 : last + 16] != wal[16:24]  # the old generation's salt at the tail
    found = scan(db, wal)
    assert sorted(found.messages) == list(range(391, 401))
    assert_reads_as_sqlite(found, db, wal)


def _sums(data: bytes, s0: int, s1: int, big: bool) -> tuple[int, int]:
    """The WAL checksum as https://www.sqlite.org/fileformat2.html tells it (written again here so
    the tests can seal WALs of their own; SQLite itself checks what they seal)."""
    order = "big" if big else "little"
    for k in range(0, len(data), 8):
        s0 = (s0 + int.from_bytes(data[k : k + 4], order) + s1) % 2**32
        s1 = (s1 + int.from_bytes(data[k + 4 : k + 8], order) + s0) % 2**32
    return s0, s1


def _seal(wal: bytes) -> bytes:
    """``wal`` with its header's and every frame's checksums computed again, in the byte order its
    magic says: what a writer would have written for these bytes."""
    out, big = bytearray(wal), wal[3] == 0x83
    size = int.from_bytes(wal[8:12], "big")
    s = _sums(out[:24], 0, 0, big)
    out[24:32] = s[0].to_bytes(4, "big") + s[1].to_bytes(4, "big")
    at = 32
    while at + 24 + size <= len(out):
        s = _sums(out[at : at + 8] + out[at + 24 : at + 24 + size], *s, big)
        out[at + 16 : at + 24] = s[0].to_bytes(4, "big") + s[1].to_bytes(4, "big")
        at += 24 + size
    return bytes(out)


def _frame_pages(wal: bytes) -> list[tuple[int, int, int]]:
    """(offset, page number, commit field) of each frame."""
    size, at, out = int.from_bytes(wal[8:12], "big"), 32, []
    while at + 24 + size <= len(wal):
        out.append((at, int.from_bytes(wal[at : at + 4], "big"), int.from_bytes(wal[at + 4 : at + 8], "big")))
        at += 24 + size
    return out


def test_a_wal_written_with_big_endian_checksums_is_read_too() -> None:
    """0x377f0683 is the magic of a WAL whose checksums were computed on big-endian words (written
    on such a machine): SQLite reads it anywhere, and so does the salvage."""
    with outbox_file(1024) as f:
        f.checkpoint()  # the schema in the file, so SQLite can read it without the WAL
        f.put(rows_of(20))
        f.put(rows_of(5, start=20))
        db, wal = f.image()
    assert wal[:4] == b"\x37\x7f\x06\x82"
    big = _seal(b"\x37\x7f\x06\x83" + wal[4:])
    assert big[32:] != wal[32:] and sorted(committed(db, big)[0]) == list(range(1, 26))
    assert_reads_as_sqlite(scan(db, big), db, big)
    # the magic alone changed: the checksums no longer match, SQLite reads no WAL, nor does the scan
    unsealed = b"\x37\x7f\x06\x83" + wal[4:]
    assert committed(db, unsealed)[0] == {} and scan(db, unsealed).messages == {}
    assert scan(db, _seal(b"\x37\x7f\x06\x84" + wal[4:])).messages == {}  # not a WAL: nothing from it


def _three_commits() -> tuple[bytes, bytes, int]:
    """Rows 1-10 checkpointed into the file; rows 11-60 committed to the WAL, then a delete of 1-50,
    then rows 61-70: three transactions (page size 1024), and the index of the delete's first
    frame."""
    with outbox_file(1024) as f:
        f.put(rows_of(10))
        f.checkpoint()  # the schema and rows 1-10 in the file: without its WAL still an outbox
        f.put(rows_of(50, start=10))
        first = len(_frame_pages(f.image()[1]))
        f.delete("id <= 50")
        f.put(rows_of(10, start=60))
        db, wal = f.image()
    return db, wal, first


@pytest.mark.parametrize("which", ["start", "first", "commit"])
@pytest.mark.parametrize("fill", ["zeros", "older"])
def test_a_frame_torn_at_power_loss_ends_the_wal_there_as_in_sqlite(which: str, fill: str) -> None:
    """A frame whose last half never reached the disk (zeros where the file grew, or the bytes of
    that page's older image in its first half): its checksum fails, SQLite stops reading the WAL there and so must the
    salvage; neither the torn transaction nor the one committed after it comes back."""
    db, wal, first = _three_commits()
    frames = _frame_pages(wal)
    commits = [i for i, (_, _, c) in enumerate(frames) if c and i >= first]
    assert len(commits) == 2 and first < commits[0]  # the delete's frames, then the last put's
    k = {"start": 0, "first": first, "commit": commits[0]}[which]
    at, pgno, _ = frames[k]
    if fill == "zeros":  # the last half never written where the file grew
        torn = wal[: at + 24 + 512] + bytes(512) + wal[at + 24 + 1024 :]
    else:  # the first half still the page's newest earlier image (its frame, else the file's)
        older = [a for a, p, _ in frames[:k] if p == pgno]
        src = older[-1] + 24 if older else (pgno - 1) * 1024
        head = (wal if older else db)[src : src + 512]
        assert len(head) == 512
        torn = wal[: at + 24] + head + wal[at + 24 + 512 :]
    assert len(torn) == len(wal) and torn != wal
    rows, _ = committed(db, torn)
    # SQLite: the first transaction only, or the file's rows when the WAL's first frame is torn
    assert sorted(rows) == list(range(1, 11 if which == "start" else 61))
    assert sorted(scan(db, wal).messages) == list(range(51, 71))  # untorn: all three
    assert_reads_as_sqlite(scan(db, torn), db, torn)


def test_a_wal_whose_header_checksum_fails_is_not_read() -> None:
    """SQLite ignores the whole WAL when its header does not match its checksum (here one bit of the
    checkpoint counter): the rows of the file alone, as of the last checkpoint."""
    with outbox_file(1024) as f:
        f.put(rows_of(40))
        f.checkpoint()
        f.delete("id <= 30")
        f.put(rows_of(5, start=40))
        db, wal = f.image()
    bad = wal[:12] + bytes([wal[12] ^ 1]) + wal[13:]
    assert sorted(committed(db, bad)[0]) == list(range(1, 41))
    assert sorted(scan(db, wal).messages) == list(range(31, 46))
    assert_reads_as_sqlite(scan(db, bad), db, bad)


def test_a_frame_for_page_zero_ends_the_wal_as_in_sqlite() -> None:
    """Page numbers start at 1: SQLite takes a frame for page 0 as the end of the WAL even with its
    checksums right (a crafted WAL), and the scan must not read it as a page of rows."""
    db, wal, first = _three_commits()
    frames = _frame_pages(wal)
    at = frames[first][0]
    crafted = _seal(wal[:at] + bytes(4) + wal[at + 4 :])
    rows, _ = committed(db, crafted)
    assert sorted(rows) == list(range(1, 61))
    assert_reads_as_sqlite(scan(db, crafted), db, crafted)


def test_pages_past_the_size_the_last_commit_left_are_not_read() -> None:
    """An incremental vacuum (the outbox runs one to give space back) moves the live rows to the
    front and shrinks the database in a WAL commit; the file keeps its old tail, full of acked rows,
    until a checkpoint truncates it. SQLite takes the size from the commit frame and never reads
    that tail: a crash in between must not bring those rows back in a salvage."""
    with outbox_file(1024) as f:
        f.put(rows_of(300))
        f.checkpoint()
        f.delete("id <= 290")
        f.conn.executescript("PRAGMA incremental_vacuum(1000);")
        db, wal = f.image()
    commits = [c for a, _, c in _frame_pages(wal) if c and wal[a + 8 : a + 16] == wal[16:24]]
    assert commits[-1] < len(db) // 1024 - 40  # the file's tail is past the committed size
    assert sorted(scan(db, wal).messages) == list(range(291, 301))
    assert_reads_as_sqlite(scan(db, wal), db, wal)


@pytest.mark.parametrize("short", [1, 3, 4, 24, 30, 47, 1024])
def test_a_wal_cut_inside_its_last_frame_reads_as_sqlite(short: int) -> None:
    """Power lost while a frame was appended: the last frame is short by a few bytes, or its page
    is cut inside. It is no frame (SQLite counts whole frames only) and nothing before it is lost."""
    db, wal, _ = _three_commits()
    cut = wal[: len(wal) - short]
    assert sorted(committed(db, cut)[0]) == list(range(51, 61))  # the last put's commit frame cut
    assert_reads_as_sqlite(scan(db, cut), db, cut)


def test_a_committed_frame_for_a_page_past_the_database_is_not_read() -> None:
    """A frame (checksums right, committed) for page 2^31 + 1 holding a copy of a leaf of deleted
    rows: past the size the commit gives the database, so SQLite never reads it, nor may the scan
    (a page number read as signed would make it page -2^31 + 1 and bring those rows back)."""
    db, wal, first = _three_commits()
    frames = _frame_pages(wal)
    leaf = next(a for a, _, _ in frames[:first] if b"id-000010" in wal[a + 24 : a + 24 + 1024])  # row 11
    size_now = frames[-1][2]
    assert size_now > 0  # the WAL ends with a commit frame
    extra = (2**31 + 1).to_bytes(4, "big") + size_now.to_bytes(4, "big") + wal[16:24] + bytes(8)
    crafted = _seal(wal + extra + wal[leaf + 24 : leaf + 24 + 1024])
    assert wal[leaf + 24] == 0x0D and sorted(committed(db, crafted)[0]) == list(range(51, 71))
    assert_reads_as_sqlite(scan(db, crafted), db, crafted)


_WAL_IMAGE: list[tuple[bytes, bytes]] = []


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    edits=st.lists(
        st.tuples(st.integers(0, 2**16), st.binary(min_size=1, max_size=16)), min_size=1, max_size=3
    ),
    cut=st.one_of(st.none(), st.integers(0, 2**16)),
)
def test_a_damaged_wal_reads_as_sqlite_reads_it(edits: list[tuple[int, bytes]], cut: Optional[int]) -> None:
    """Whatever bytes of the WAL are damaged or cut (the file intact), the scan reads exactly the
    rows SQLite reads: the committed transactions before the first damaged frame, never a row of a
    frame SQLite rejects."""
    if not _WAL_IMAGE:
        db, wal, _ = _three_commits()
        _WAL_IMAGE.append((db, wal))
    db, wal = _WAL_IMAGE[0]
    damaged = _damage(wal, edits, cut)
    assert_reads_as_sqlite(scan(db, damaged), db, damaged)


def test_a_65536_byte_page_is_told_by_its_header_as_1() -> None:
    with outbox_file(65536) as f:
        f.put(rows_of(10, size=70000))
        f.checkpoint()
        db, _ = f.image()
    assert db[16:18] == b"\x00\x01"
    found = scan(db)
    assert found.page_size == 65536 and len(found.messages) == 10


def test_scan_file_reads_the_wal_beside_the_file(tmp_path: Path) -> None:
    with outbox_file(1024) as f:
        f.put(rows_of(30))
        db, wal = f.image()
    path = tmp_path / "x.db"
    path.write_bytes(db)
    assert scan_file(path).messages == {}  # the rows are only in the WAL
    path.with_name("x.db-wal").write_bytes(wal)
    assert sorted(scan_file(path).messages) == list(range(1, 31))


def _damage(data: bytes, edits: list[tuple[int, bytes]], cut: Optional[int]) -> bytes:
    out = bytearray(data)
    for at, junk in edits:
        at %= max(1, len(out))
        out[at : at + len(junk)] = junk
    return bytes(out[:cut] if cut is not None else out)


_IMAGES: dict[int, tuple[bytes, bytes]] = {}


def _image(page_size: int) -> tuple[bytes, bytes]:
    """One file per page size: rows with overflow chains, a freelist, rows only in the WAL."""
    if page_size not in _IMAGES:
        with outbox_file(page_size) as f:
            f.put(rows_of(200, size=90) + rows_of(3, size=3 * page_size, start=200))
            f.delete("id % 3 = 0")
            f.checkpoint()
            f.put(rows_of(20, start=300))
            _IMAGES[page_size] = f.image()
    return _IMAGES[page_size]


edits = st.lists(st.tuples(st.integers(0, 2**20), st.binary(min_size=1, max_size=64)), max_size=6)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    page_size=st.sampled_from([512, 4096]),
    db_edits=edits,
    wal_edits=edits,
    db_cut=st.one_of(st.none(), st.integers(0, 2**17)),
    wal_cut=st.one_of(st.none(), st.integers(0, 2**17)),
    header=st.sampled_from(["keep", "zero", "junk"]),
)
def test_hostile_bytes_never_make_the_scan_raise(
    page_size: int,
    db_edits: list[tuple[int, bytes]],
    wal_edits: list[tuple[int, bytes]],
    db_cut: Optional[int],
    wal_cut: Optional[int],
    header: str,
) -> None:
    db, wal = _image(page_size)
    db = _damage(db, db_edits, db_cut)
    if header != "keep":
        db = (b"\0" * 100 if header == "zero" else bytes(range(7, 107))) + db[100:]
    found = scan(db, _damage(wal, wal_edits, wal_cut))
    assert found.damaged_pages >= 0 and found.pages <= len(db) // 512 + len(wal) // (24 + 512) + 1
    for msg_id, topic, payload, when, attempts in found.messages.values():
        assert isinstance(msg_id, str) and isinstance(topic, str) and isinstance(payload, bytes)
        assert isinstance(when, float) and isinstance(attempts, int)


@settings(max_examples=100, deadline=None)
@given(
    size=st.sampled_from([0, 1, 7, 8, 50, 100, 300, 512, 1024, 3000, 8192, 65536]),
    frames=st.lists(st.tuples(st.integers(0, 5), st.integers(0, 3), st.binary(max_size=300)), max_size=4),
    header_db=st.booleans(),
)
def test_a_hostile_wal_of_any_page_size_never_makes_the_scan_raise(
    size: int, frames: list[tuple[int, int, bytes]], header_db: bool
) -> None:
    """A WAL header whose page size is not the file's (damaged, or crafted) with frames laid out at
    that size: its pages are not this file's pages."""
    db, _ = _image(4096)
    salt = b"SALTsalt"
    wal = (
        b"\x37\x7f\x06\x82"
        + (3007000).to_bytes(4, "big")
        + size.to_bytes(4, "big")
        + bytes(4)
        + salt
        + bytes(8)
    )
    for pgno, commit, data in frames:
        page = (data * (size // max(1, len(data)) + 1))[:size] if data else bytes(size)
        wal += pgno.to_bytes(4, "big") + commit.to_bytes(4, "big") + salt + bytes(8) + page
    found = scan(db if header_db else bytes(100) + db[100:], _seal(wal))  # checksums right: read
    assert isinstance(found.messages, dict)


def test_what_a_scan_of_a_wal_with_another_page_size_keeps() -> None:
    """Frames laid out at 1024 bytes in a WAL beside a 4096-byte file are not its pages: the file's
    own rows are read and nothing of the WAL is overlaid."""
    with outbox_file(4096) as f:
        f.put(rows_of(50))
        f.checkpoint()
        db, _ = f.image()
    with outbox_file(1024) as g:
        g.put(rows_of(5, start=1000))
        _, wal = g.image()
    found = scan(db, wal)
    assert sorted(found.messages) == list(range(1, 51))


def test_records_of_any_other_shape_are_not_taken_as_messages() -> None:
    """Only an 8-column message row or a (key, integer) meta row is kept; other tables' rows,
    sqlite_sequence's ('messages', n) and rows of the wrong types are not."""
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "q.db"
        conn = sqlite3.connect(str(path), isolation_level=None)
        conn.executescript(SCHEMA)
        conn.execute("CREATE TABLE other(a, b, c, d, e, f, g, h)")
        conn.execute("INSERT INTO other VALUES (1, 2, 3, 4, 5, 6, 7, 8)")  # 8 columns, not text/text/blob
        conn.execute(
            "INSERT INTO other VALUES (NULL, 'a', 'b', 'c', 5, 6, 7, 8)"
        )  # text where the payload is
        conn.execute("INSERT INTO other VALUES (NULL, 'a', X'00', X'01', 5, 6, 7, 8)")  # a blob topic
        conn.execute("INSERT INTO other VALUES (NULL, 'a', 'b', X'01', 5, 'y', 'z', 8)")  # text times: 0
        conn.execute("CREATE TABLE pairs(k, v)")
        conn.execute("INSERT INTO pairs VALUES ('k1', 'text'), (5, 6), ('k2', 2.5), ('k3', 7)")
        conn.execute(
            "INSERT INTO messages(msg_id, topic, payload, size, created, attempts) VALUES ('m', 't', X'AA', 1, 3, 2)"
        )
        conn.close()
        found = scan(path.read_bytes())
    assert found.messages[1] == ("m", "t", b"\xaa", 3.0, 2)
    assert found.messages[4] == ("a", "b", b"\x01", 0.0, 0)
    assert len(found.messages) == 2
    assert found.meta == {"rows": 0, "k3": 7}


def _freelist_file(rows: int = 3000, deleted: int = 2900) -> tuple[bytes, dict[int, Row]]:
    """A 512-byte-page file with several freelist trunks whose free leaves still hold deleted rows,
    its header's auto_vacuum field (bytes 52-56) cleared: the freelist alone tells the free pages
    (with the field set, the pointer map tells them too: test_outbox_pages_bounds.py)."""
    with outbox_file(512) as f:
        f.put(rows_of(rows, size=60))
        f.delete(f"id <= {deleted}")
        f.checkpoint()
        db, _ = f.image()
    return db[:52] + bytes(4) + db[56:], committed(db, b"")[0]


def _trunks(db: bytearray) -> list[tuple[int, int]]:
    """(page number, leaf count) of each freelist trunk, first first."""
    out, trunk = [], int.from_bytes(db[32:36], "big")
    while trunk:
        at = (trunk - 1) * 512
        out.append((trunk, int.from_bytes(db[at + 4 : at + 8], "big")))
        trunk = int.from_bytes(db[at : at + 4], "big")
    return out


def test_freed_pages_would_bring_deleted_rows_back_without_the_freelist() -> None:
    """What the freelist tests below rest on: a freed page keeps its deleted rows (secure_delete=FAST)."""
    db, rows = _freelist_file()
    data = bytearray(db)
    data[32:40] = bytes(8)  # no freelist
    assert len(scan(bytes(data)).messages) > len(rows) + 1000


def test_a_freelist_trunk_pointing_back_to_itself_ends() -> None:
    db, rows = _freelist_file(rows=400, deleted=300)
    data = bytearray(db)
    trunks = _trunks(data)
    first = trunks[0][0]
    data[(first - 1) * 512 : (first - 1) * 512 + 4] = first.to_bytes(4, "big")  # a cycle of one trunk
    data[36:40] = (trunks[0][1] + 1).to_bytes(4, "big")  # the count of what that trunk holds
    assert scan(bytes(data)).messages == rows


def test_a_trunk_leaf_count_beyond_its_page_reads_every_slot_the_page_has() -> None:
    """A damaged count (0xFFFFFFFF) is capped at the page's room, the last slot included."""
    db, rows = _freelist_file()
    data = bytearray(db)
    trunk, n = _trunks(data)[0]
    at = (trunk - 1) * 512
    room = (512 - 8) // 4
    assert 2 <= n < room
    leaves = [int.from_bytes(data[at + 8 + 4 * k : at + 12 + 4 * k], "big") for k in range(n)]
    held = [
        p
        for p in leaves
        if data[(p - 1) * 512] == 0x0D and data[(p - 1) * 512 + 3 : (p - 1) * 512 + 5] != b"\0\0"
    ]
    assert held  # a freed leaf that still holds deleted rows
    data[at + 4 : at + 8] = b"\xff" * 4
    rest = [p for p in leaves if p != held[0]]
    slots = b"".join(p.to_bytes(4, "big") for p in rest)
    data[at + 8 : at + 512] = (
        slots + bytes(4 * (room - 1) - len(slots)) + held[0].to_bytes(4, "big")
    )  # in the last slot
    assert scan(bytes(data)).messages == rows


def test_a_freelist_count_short_by_a_trunk_still_reads_that_trunk() -> None:
    """The count bounds the walk (against garbage chains); the trunk after the count is reached is
    still read, so a count damaged short by one trunk brings no deleted row back."""
    db, rows = _freelist_file(deleted=800)
    data = bytearray(db)
    trunks = _trunks(data)
    assert len(trunks) == 2
    data[36:40] = (trunks[0][1] + 1).to_bytes(4, "big")  # only the first trunk and its leaves
    assert scan(bytes(data)).messages == rows


@pytest.mark.parametrize("pages", [105, 106, 107, 208, 209])
def test_a_pointer_map_page_at_the_end_of_the_file_is_read(pages: int) -> None:
    """At 512-byte pages a map page covers the next 102 pages (2, 105, 208, ...): a file ending just
    after one still has its free last pages told by it."""
    with outbox_file(512) as f:
        i = 0
        while f.conn.execute("PRAGMA page_count").fetchone()[0] < pages:
            f.put(rows_of(1, size=60, start=i))
            i += 1
        f.delete(f"id > {i * 2 // 3}")
        f.checkpoint()
        db, _ = f.image()
    rows, _ = committed(db, b"")
    found = scan(bytes(100) + db[100:])
    assert found.ptrmap and found.page_size == 512
    assert found.messages == rows


def test_a_file_without_a_map_is_not_read_at_a_size_whose_pages_look_like_one() -> None:
    """Rows of 0x03 bytes read at 4096 as map entries of kind 3 (an overflow page) with a parent
    past the file's end: not a map. The file's own size (2048) reads every row."""
    with tempfile.TemporaryDirectory() as d:
        conn = sqlite3.connect(str(Path(d) / "q.db"), isolation_level=None)
        conn.execute("PRAGMA page_size=2048")
        conn.executescript(SCHEMA)
        conn.executemany(
            "INSERT INTO messages(msg_id, topic, payload, size, created) VALUES (?, ?, ?, ?, ?)",
            [(f"m{i}", "t", b"\x03" * 1900, 1900, 1.0) for i in range(60)],
        )
        conn.close()
        db = (Path(d) / "q.db").read_bytes()
    found = scan(bytes(100) + db[100:])
    assert not found.ptrmap and found.page_size == 2048 and len(found.messages) == 60


@pytest.mark.parametrize("rowid", [2**56 - 1, 2**56, 2**62 + 12345, 2**63 - 1])
def test_a_row_id_of_nine_varint_bytes_reads_back(rowid: int) -> None:
    """A row id from 2^56 up takes SQLite's 9-byte varint (the last byte whole, 8 bits)."""
    with outbox_file(1024) as f:
        f.conn.execute(
            "INSERT INTO messages(id, msg_id, topic, payload, size, created) VALUES (?, 'm', 't', x'01', 1, 1.0)",
            (rowid,),
        )
        f.checkpoint()
        db, _ = f.image()
    assert_reads_as_sqlite(scan(db), db, b"")
    assert list(scan(db).messages) == [rowid]


@pytest.mark.parametrize(
    "when", [0.0, 1.0, 300.0, 2.0**20, 2.0**40, 2.0**47 - 1, -(2.0**47), 2.0**50, 1.7e9 + 0.5]
)
def test_a_whole_number_time_is_stored_as_an_integer_of_its_width_and_reads_back(when: float) -> None:
    """SQLite stores a whole-number REAL within +-2^47 as the narrowest integer (0 and 1 without a
    byte, up to 6 bytes), others as 8-byte floats: the width read for each serial type decides
    where the next column (attempts) starts."""
    with outbox_file(1024) as f:
        f.put(
            [
                ("m", "t", b"\x01\x02", when, 2**40 + 3),
                ("n", "t", b"", when, 5),
                ("o", "t", b"x", when, 2**60),
            ]
        )
        f.checkpoint()
        db, _ = f.image()
    found = scan(db)
    assert [m[3:] for m in found.messages.values()] == [(when, 2**40 + 3), (when, 5), (when, 2**60)]
    assert_reads_as_sqlite(found, db, b"")


@pytest.mark.parametrize("blob_type", [b"\x81\x56", b"\x81\x52"])
def test_a_damaged_serial_type_makes_no_row_up(blob_type: bytes) -> None:
    """One serial type damaged (the payload's 100 bytes read as 101 or 99): every later column
    shifts and the values no longer fill the record. SQLite calls the row malformed; the scan
    counts it as damage instead of keeping a row of garbage (a 101-byte payload, a time of -5374)."""
    with outbox_file(1024) as f:
        f.put([(f"m{i}", "t", bytes([i]) * 100, float(1000 + i), 2) for i in range(5)])
        f.checkpoint()
        db, _ = f.image()
    data = bytearray(db)
    body = data.find(b"m3t")  # row 4's body starts with its msg_id and topic
    blob = data.rfind(b"\x81\x54", 0, body)  # its payload's serial type: 12 + 2 * 100 = 212
    assert 0 < body - blob < 10
    data[blob : blob + 2] = blob_type
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "c.db").write_bytes(data)
        conn = sqlite3.connect(str(Path(d) / "c.db"))
        try:
            with pytest.raises(sqlite3.DatabaseError, match="malformed"):
                conn.execute("SELECT * FROM messages").fetchall()  # every column: the whole record
        finally:
            conn.close()
    found = scan(bytes(data))
    assert sorted(found.messages) == [1, 2, 3, 5] and found.damaged_pages == 1
    assert found.messages[5] == ("m4", "t", bytes([4]) * 100, 1004.0, 2)
