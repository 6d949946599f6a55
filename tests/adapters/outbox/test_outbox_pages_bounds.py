"""The salvage page reader's bounds against crafted and damaged pages (issue 19): a cell count no
page can hold, cells that all point at one cell with a long overflow chain, an overflow chain that
loops; each ends at once, counted as damage, and the rows of the file's other pages are still read
exactly as SQLite reads them."""

from __future__ import annotations

import random
import shutil
import sqlite3
import tempfile
from pathlib import Path
from typing import Any, Optional

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.sqlite_file import Row, committed, outbox_file, rows_of

from edge_agent.adapters.outbox import pages as outbox_pages
from edge_agent.adapters.outbox.pages import _varint, scan


def _cell_heads(db: bytes, ps: int, pgno: int) -> list[tuple[int, int]]:
    """(rowid, column count) of each cell of a leaf, read with SQLite's varints only."""
    page, out = db[(pgno - 1) * ps : pgno * ps], []
    for ptr in _pointers(db, ps, pgno):
        _, i = _varint(page, ptr)
        rowid, i = _varint(page, i)
        hlen, k = _varint(page, i)
        columns = 0
        while k < i + hlen:
            _, k = _varint(page, k)
            columns += 1
        out.append((rowid, columns))
    return out


def _rows_on(db: bytes, ps: int, pgno: int) -> set[int]:
    return {rowid for rowid, _ in _cell_heads(db, ps, pgno)}


def _leaves(db: bytes, ps: int) -> list[int]:
    """The messages table's leaf pages (not the schema's, meta's or sqlite_sequence's)."""
    return [
        n
        for n in range(2, len(db) // ps + 1)
        if db[(n - 1) * ps] == 0x0D
        and any(cols in (8, 11) for _, cols in _cell_heads(db, ps, n))  # 11 since boot/seq/due
    ]


def _pointers(db: bytes, ps: int, pgno: int) -> list[int]:
    at = (pgno - 1) * ps
    n = int.from_bytes(db[at + 3 : at + 5], "big")
    return [int.from_bytes(db[at + 8 + 2 * c : at + 10 + 2 * c], "big") for c in range(n)]


def _set_pointers(db: bytearray, ps: int, pgno: int, ptrs: list[int]) -> None:
    at = (pgno - 1) * ps
    assert 8 + 2 * len(ptrs) <= min(_pointers(bytes(db), ps, pgno))  # the array ends before any cell
    db[at + 3 : at + 5] = len(ptrs).to_bytes(2, "big")
    db[at + 8 : at + 8 + 2 * len(ptrs)] = b"".join(p.to_bytes(2, "big") for p in ptrs)


def _sqlite_reads(db: bytes) -> bool:
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "c.db").write_bytes(db)
        conn = sqlite3.connect(str(Path(d) / "c.db"))
        try:
            conn.execute("SELECT * FROM messages").fetchall()
            return True
        except sqlite3.DatabaseError as e:
            assert "malformed" in str(e)
            return False
        finally:
            conn.close()


def _small_leaf_file(ps: int, rows: int) -> tuple[bytes, int]:
    """A file whose last leaf holds few rows: room for a long cell pointer array."""
    # the first row count (from ``rows`` down) whose last leaf leaves room for one pointer more than
    # a page holds: how many rows fill a leaf depends on the record's columns (11 since boot/seq/due)
    for n in range(rows, rows - 20, -1):
        with outbox_file(ps) as f:
            f.put(rows_of(n, size=20))
            f.checkpoint()
            db, _ = f.image()
        leaf = min(_leaves(db, ps), key=lambda p: len(_pointers(db, ps, p)))
        if 8 + 2 * ((ps - 8) // 6 + 1) <= min(_pointers(db, ps, leaf)):
            break
    assert 1 <= len(_pointers(db, ps, leaf)) < 20
    return db, leaf


@pytest.mark.parametrize(
    ("ps", "rows", "count"), [(512, 40, 84), (512, 40, 85), (4096, 70, 681), (4096, 70, 682)]
)
def test_a_cell_count_past_what_a_page_holds_is_damage_as_in_sqlite(ps: int, rows: int, count: int) -> None:
    """(512 - 8) / 6 = 84 cells fit a 512-byte page, 681 a 4096-byte one (SQLite's MX_CELL: each
    cell at least 4 bytes and its 2-byte pointer). With that many pointers SQLite reads the page
    (here the leaf's own cells over and over) and so does the scan; with one more SQLite calls the
    file malformed and the scan counts the page as damage, keeping every other page's rows (682 =
    0x2AA: the count's high byte matters)."""
    db, leaf = _small_leaf_file(ps, rows)
    own = _pointers(db, ps, leaf)
    data = bytearray(db)
    _set_pointers(data, ps, leaf, [own[c % len(own)] for c in range(count)])
    found = scan(bytes(data))
    kept, _ = committed(db, b"")
    if count == (ps - 8) // 6:
        assert _sqlite_reads(bytes(data))
        assert found.messages == committed(bytes(data), b"")[0] == kept and found.damaged_pages == 0
    else:
        assert not _sqlite_reads(bytes(data))
        lost = _rows_on(db, ps, leaf)
        assert lost and found.damaged_pages == 1
        assert found.messages == {k: v for k, v in kept.items() if k not in lost}


class _Counted(dict):  # type: ignore[type-arg]
    """The scan's pages, counting every page read but the one of the leaf being read."""

    reads = 0
    leaf = 0

    def __getitem__(self, key: Any) -> bytes:
        if key != _Counted.leaf:
            _Counted.reads += 1
        value: bytes = super().__getitem__(key)
        return value


def test_cells_that_all_point_at_one_long_chain_read_at_most_four_times_the_file(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A crafted leaf whose every cell pointer names the same cell with a 10-page overflow chain:
    read per pointer, a 4 MiB file of such pages takes minutes (the square of its size). The scan
    reads overflow pages up to 4 times the file's page count in all, then counts the page as damage."""
    with outbox_file(4096) as f:
        f.put([("big", "t", bytes(range(256)) * 160, 1.0, 0)])  # 40 960 bytes: a 10-page chain
        f.put(rows_of(3, size=50, start=10))
        f.checkpoint()
        db, _ = f.image()
    rows, _ = committed(db, b"")
    leaf = _leaves(db, 4096)
    assert len(leaf) == 1 and len(_pointers(db, 4096, leaf[0])) == 4
    assert scan(db).messages == rows
    data = bytearray(db)
    big = _pointers(db, 4096, leaf[0])[0]
    _set_pointers(data, 4096, leaf[0], [big] * 100)
    cells = outbox_pages._cells
    _Counted.reads = 0

    def counted(pages: dict[int, bytes], pgno: int, *rest: Any) -> Any:
        _Counted.leaf = pgno
        return cells(_Counted(pages), pgno, *rest)

    monkeypatch.setattr(outbox_pages, "_cells", counted)
    found = scan(bytes(data))
    assert found.pages == len(db) // 4096 < 20
    assert _Counted.reads == 4 * found.pages  # 100 pointers x 10 pages without the bound
    assert found.damaged_pages == 1 and found.messages == {}


def test_an_overflow_chain_that_loops_is_damage_and_later_chains_are_still_read() -> None:
    """A row's overflow chain whose second page points back at its first: the scan counts that
    leaf as damage at the loop (not after reading the loop until the file's budget is spent) and
    reads every other leaf's rows as SQLite does, a later row's 4-page chain included."""
    pattern = bytes(range(256)) * 16  # 4096 bytes: a 4-page chain at 1024-byte pages
    with outbox_file(1024) as f:
        f.put([("big", "t", pattern, 1.0, 0)])
        f.put(rows_of(60, size=100))
        f.put([("late", "t", pattern[::-1], 2.0, 0)])
        f.checkpoint()
        db, _ = f.image()
    rows, _ = committed(db, b"")
    pages = {n // 1024 + 1: db[n : n + 1024] for n in range(0, len(db), 1024)}
    big = next(k for k, v in rows.items() if v[0] == "big")
    holder = next(n for n in _leaves(db, 1024) if big in _rows_on(db, 1024, n))
    lost = _rows_on(db, 1024, holder)
    assert lost != set(rows) and max(rows) not in lost  # the late row is on another leaf
    # the chain: pages holding 8 increasing bytes of the pattern, the first one named by no other
    chain = {n for n, page in pages.items() if page[4:12] in pattern}
    first = next(n for n in chain if all(int.from_bytes(pages[m][:4], "big") != n for m in chain))
    second = int.from_bytes(pages[first][:4], "big")
    assert second in chain
    data = bytearray(db)
    data[(second - 1) * 1024 : (second - 1) * 1024 + 4] = first.to_bytes(4, "big")
    found = scan(bytes(data))
    assert found.damaged_pages == 1
    assert found.messages == {k: v for k, v in rows.items() if k not in lost}


def _acked_and_wal_rows(page_size: int) -> tuple[bytes, bytes]:
    """A file with acked (deleted) rows on freed pages, rows spilling to overflow pages (their
    split follows the usable size) and newer rows only in its WAL."""
    with outbox_file(page_size) as f:
        f.put(rows_of(300) + rows_of(4, size=3 * page_size, start=500))
        f.delete("id % 3 = 0")
        f.checkpoint()
        f.put(rows_of(10, start=400))
        return f.image()


@pytest.mark.parametrize(
    ("page_size", "at", "junk"),
    [
        (4096, 16, b"\x00\x00"),  # page size 0
        (4096, 16, b"\x0b\xb8"),  # 3000: not a power of two
        (4096, 16, b"\x01\x00"),  # 256: below 512
        (4096, 16, b"\xff\xff"),
        (512, 20, b"\x21"),  # 33 reserved bytes leave 479 usable: SQLite allows 480 at least
    ],
)
def test_a_damaged_page_size_field_in_an_intact_header_still_salvages_every_row(
    page_size: int, at: int, junk: bytes
) -> None:
    """Two damaged bytes of the header (the page size, or a reserved-bytes count that leaves less
    than 480 usable bytes) make SQLite refuse the file; the scan read 0 of 210 rows then. It now
    finds the page size as for a file without a header and reads exactly what SQLite read before
    the damage, acked rows still out (the freelist is in the same header)."""
    db, wal = _acked_and_wal_rows(page_size)
    rows, _ = committed(db, wal)
    damaged = db[:at] + junk + db[at + len(junk) :]
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "c.db").write_bytes(damaged)
        conn = sqlite3.connect(str(Path(d) / "c.db"))
        try:
            with pytest.raises(sqlite3.DatabaseError):
                conn.execute("SELECT count(*) FROM messages").fetchall()
        finally:
            conn.close()
    found = scan(damaged, wal)
    assert found.page_size == page_size and len(rows) == 213
    assert found.messages == rows


def test_without_a_header_a_wal_whose_header_fails_its_checksum_does_not_say_the_page_size() -> None:
    """The file's first bytes overwritten and the WAL's header damaged too: the WAL is not read
    (as SQLite would not), and its damaged page size no longer decides the file's: the scan read
    0 of 200 rows then; now the file's own rows, read at the size its pointer map tells."""
    db, wal = _acked_and_wal_rows(4096)
    rows, _ = committed(db, b"")
    damaged_wal = wal[:8] + b"\x00\x00\x0b\xb8" + wal[12:]  # page size 3000
    found = scan(bytes(100) + db[100:], damaged_wal)
    assert found.ptrmap and found.page_size == 4096 and len(rows) == 203
    assert found.messages == rows
    header = wal[:8] + (1000).to_bytes(4, "big") + wal[12:24]  # sealed: only the size is wrong
    sums = outbox_pages._checksum(header, (0, 0), wal[3] == 0x83)
    sealed = header + sums[0].to_bytes(4, "big") + sums[1].to_bytes(4, "big") + wal[32:]
    assert scan(bytes(100) + db[100:], sealed).messages == rows


@pytest.mark.skipif(shutil.which("sqlite3") is None, reason="reserved bytes are set with the sqlite3 shell")
def test_a_512_byte_page_with_32_reserved_bytes_reads_back() -> None:
    """480 usable bytes is the least SQLite allows, and it writes such a file (asked for 33 it
    takes 1024-byte pages); the scan refused it as too small and read 0 of its 5 rows."""
    with outbox_file(512, 32) as f:
        f.put([(f"m{i}", "t", bytes([i]) * s, 2.0, 0) for i, s in enumerate([300, 440, 470, 1000, 77])])
        f.checkpoint()
        db, _ = f.image()
    assert db[16:18] == b"\x02\x00" and db[20] == 32
    rows, _ = committed(db, b"")
    assert len(rows) == 5 and scan(db).messages == rows


@pytest.mark.parametrize("junk", ["zeros", "random", "self"])
def test_a_damaged_freelist_trunk_brings_no_acked_row_back(junk: str) -> None:
    """The first freelist trunk page overwritten (zeros, random bytes, or pointing at itself with
    no leaves): its leaves and every later trunk are lost from the freelist, and the acked rows on
    those freed pages came back (2250 rows where SQLite reads 100). The pointer map (the outbox's
    files are auto_vacuum) still tells them free: the scan reads what SQLite reads."""
    with outbox_file(512) as f:
        f.put(rows_of(3000, size=60))
        f.delete("id <= 2900")
        f.checkpoint()
        db, _ = f.image()
    trunk = int.from_bytes(db[32:36], "big")
    data = bytearray(db)
    page = {
        "zeros": bytes(512),
        "random": random.Random(19).randbytes(512),
        "self": trunk.to_bytes(4, "big") + bytes(508),
    }[junk]
    data[(trunk - 1) * 512 : trunk * 512] = page
    rows, _ = committed(bytes(data), b"")
    assert sorted(rows) == list(range(2901, 3001))
    assert scan(bytes(data)).messages == rows


_FREED: list[tuple[bytes, dict[int, Row]]] = []


def _freed() -> tuple[bytes, dict[int, Row]]:
    """3000 rows at 512-byte pages, 2900 acked: several freelist trunks, freed pages holding them."""
    if not _FREED:
        with outbox_file(512) as f:
            f.put(rows_of(3000, size=60))
            f.delete("id <= 2900")
            f.checkpoint()
            db, _ = f.image()
        _FREED.append((db, committed(db, b"")[0]))
    return _FREED[0]


@settings(max_examples=60, deadline=None)
@given(
    edits=st.lists(
        st.tuples(st.integers(0, 10**6), st.integers(0, 511), st.binary(min_size=1, max_size=16)),
        min_size=1,
        max_size=8,
    )
)
def test_no_damage_to_the_freelist_trunks_brings_an_acked_row_back(
    edits: list[tuple[int, int, bytes]],
) -> None:
    """Any bytes anywhere in the freelist's trunk pages (a wrong slot naming a live page, a next
    pointer into the tree, a leaf count of 2^32 - 1): no acked row comes back."""
    db, rows = _freed()
    trunks, trunk = [], int.from_bytes(db[32:36], "big")
    while trunk:
        trunks.append(trunk)
        trunk = int.from_bytes(db[(trunk - 1) * 512 : (trunk - 1) * 512 + 4], "big")
    assert len(trunks) >= 3
    data = bytearray(db)
    for which, at, junk in edits:
        start, junk = (trunks[which % len(trunks)] - 1) * 512 + at, junk[: 512 - at]  # within the page
        data[start : start + len(junk)] = junk
    found = scan(bytes(data))
    assert set(found.messages) <= set(rows)


def _map_image(extra: Optional[tuple[int, int]]) -> bytes:
    """102 pages of 512 bytes, no header, rows nowhere: page 2 is a pointer map of 100 entries
    (pages 3-102), 95 of them plausible (a root, a free page, overflow and b-tree pages whose
    parent is in the file), 5 not (kind 9): exactly the 95 % a map needs. ``extra`` (kind, parent)
    replaces one more plausible entry."""
    entries = []
    for k in range(100):
        kind = (1, 2, 3, 4, 5)[k % 5]
        parent = 0 if kind <= 2 else 3 + k % 50
        entries.append((9, 0) if k >= 95 else (kind, parent))
    if extra is not None:
        entries[10] = extra
    page = b"".join(bytes([kind]) + parent.to_bytes(4, "big") for kind, parent in entries)
    return bytes(512) + page.ljust(512, b"\0") + bytes(512 * 100)


@pytest.mark.parametrize(
    ("extra", "is_map"),
    [
        (None, True),  # 95 of 100: the threshold itself
        ((1, 0), True),  # a root page (kind 1) has no parent
        ((2, 0), True),  # a free page
        ((3, 7), True),  # the first overflow page of a cell on page 7
        ((4, 7), True),  # a later overflow page
        ((5, 1), True),  # a b-tree page under page 1 (the schema's tree)
        ((5, 102), True),  # ... under the file's last page
        ((1, 3), False),  # a root with a parent
        ((2, 3), False),  # a free page with a parent
        ((7, 5), False),  # no such kind
        ((5, 0), False),  # a b-tree page without a parent
        ((5, 103), False),  # a parent past the file's end
        ((5, 2**24 + 5), False),  # ... far past it (not read from 3 of its 4 bytes)
    ],
)
def test_a_pointer_map_is_believed_from_95_percent_plausible_entries(
    extra: Optional[tuple[int, int]], is_map: bool
) -> None:
    """Without a header the free pages come from the pointer map only when its entries read as
    one (95 % plausible): fewer, and the pages are no map (a wrong page size's cut-up pages, or
    garbage) whose "free" entries would hide live rows or, at the wrong size, free none."""
    assert scan(_map_image(extra)).ptrmap is is_map


@pytest.mark.parametrize("ps", [512, 1024, 4096])
def test_payloads_at_both_local_size_bounds_read_as_sqlite(ps: int) -> None:
    """A record of exactly usable - 35 bytes stays on its page; one of 2 * usable - 39 spills so
    that its part on the page is again exactly usable - 35 (SQLite's surplus rule). Rows around
    both sizes, byte by byte, read as SQLite reads them."""
    with outbox_file(ps) as f:
        lengths = [n for bound in (ps - 35, 2 * ps - 39) for n in range(bound - 40, bound)]
        f.put([(f"m{n}", "t", bytes([n % 256]) * n, 2.0, 0) for n in lengths])
        f.checkpoint()
        db, _ = f.image()
    rows, _ = committed(db, b"")
    assert len(rows) == 80 and scan(db).messages == rows


@pytest.mark.skipif(shutil.which("sqlite3") is None, reason="reserved bytes are set with the sqlite3 shell")
def test_a_65536_byte_page_with_reserved_bytes_reads_back() -> None:
    """The header stores 65536 as 1; read as a damaged size, the page size would still be found,
    but without the header's reserved bytes: the rows spilling to overflow pages would be cut
    wrongly."""
    with outbox_file(65536, 200) as f:
        f.put([(f"m{i}", "t", bytes([i]) * s, 2.0, 0) for i, s in enumerate([65300, 65400, 140000, 100])])
        f.checkpoint()
        db, _ = f.image()
    assert db[16:18] == b"\x00\x01" and db[20] == 200
    rows, _ = committed(db, b"")
    assert len(rows) == 4 and scan(db).messages == rows


@pytest.mark.skipif(shutil.which("sqlite3") is None, reason="reserved bytes are set with the sqlite3 shell")
def test_seven_reserved_bytes_at_1024_read_back() -> None:
    """With 1017 usable bytes the smallest local part, (usable - 12) * 32 // 255 - 23, is 103; one
    byte less in the product gives 102: the rows that spill with that part cut at the wrong byte."""
    with outbox_file(1024, 7) as f:
        f.put([(f"m{n}", "t", bytes([n % 256]) * n, 2.0, 0) for n in range(1000, 3100, 37)])
        f.checkpoint()
        db, _ = f.image()
    assert db[20] == 7
    rows, _ = committed(db, b"")
    assert len(rows) == 57 and scan(db).messages == rows


@pytest.mark.parametrize("page_size", [1024, 4096])
def test_without_a_header_the_wal_says_the_page_size_and_every_row_reads_as_sqlite(page_size: int) -> None:
    """The file's first bytes overwritten, its WAL intact: the WAL's page size (no reserved bytes:
    the outbox's files have none) reads every row, overflowing ones included, as SQLite read the
    file and WAL before the damage, and no acked row."""
    db, wal = _acked_and_wal_rows(page_size)
    rows, _ = committed(db, wal)
    found = scan(bytes(100) + db[100:], wal)
    assert found.page_size == page_size and len(rows) == 213
    assert found.messages == rows


@pytest.mark.parametrize("page_size", [16384, 32768, 65536])
def test_without_a_header_the_large_page_sizes_are_found_too(page_size: int) -> None:
    """Every page size SQLite has is tried when the header is gone, the largest ones too."""
    db, _ = _acked_and_wal_rows(page_size)
    rows, _ = committed(db, b"")
    found = scan(bytes(100) + db[100:])
    assert found.page_size == page_size and found.ptrmap and len(rows) == 203
    assert found.messages == rows


def test_every_damaged_page_and_record_is_counted() -> None:
    """Without a row count the salvage reports the damage it counted as the loss (a lower bound):
    two leaves with an impossible cell count and two records of other leaves whose payload length
    no longer fills them count 4, each one."""
    with outbox_file(1024) as f:
        f.put([(f"m{i}", "t", bytes([i]) * 100, float(1000 + i), 2) for i in range(60)])
        f.checkpoint()
        db, _ = f.image()
    data = bytearray(db)
    leaves = _leaves(db, 1024)
    assert len(leaves) >= 4
    for leaf in leaves[:2]:
        at = (leaf - 1) * 1024
        data[at + 3 : at + 5] = (1024 // 6).to_bytes(2, "big")  # past (1024 - 8) // 6 = 169
    for leaf in leaves[2:4]:
        blob = data.find(b"\x81\x54", (leaf - 1) * 1024, leaf * 1024)  # a payload's serial type (100 bytes)
        assert blob > 0
        data[blob : blob + 2] = b"\x81\x56"  # 101 bytes: the record no longer fills its payload
    found = scan(bytes(data))
    assert found.damaged_pages == 4


def test_without_a_header_and_no_page_1_in_the_wal_the_pointer_map_keeps_acked_rows_out() -> None:
    """A WAL holding only a leaf (an attempts count written back) brings no header back: the free
    pages still come from the pointer map, not from the zeroed header's empty freelist."""
    with outbox_file(4096) as f:
        f.put(rows_of(300))
        f.delete("id <= 150")  # whole leaves freed, their acked rows still on them
        f.checkpoint()
        f.conn.execute("UPDATE messages SET attempts = attempts + 1 WHERE id = 155")
        db, wal = f.image()
    frames = range(32, len(wal) - 24 - 4096 + 1, 24 + 4096)
    pages = {int.from_bytes(wal[at : at + 4], "big") for at in frames if wal[at + 8 : at + 16] == wal[16:24]}
    assert wal and 1 not in pages
    rows, _ = committed(db, wal)
    assert sorted(rows) == list(range(151, 301)) and rows[155][4] == 2  # row 154: attempts 154 % 3 + 1
    found = scan(bytes(100) + db[100:], wal)
    assert found.messages == rows


def test_a_garbage_pointer_map_page_leaves_the_intact_freelist_to_decide() -> None:
    """The header intact and the first map page overwritten with random bytes (no map then): the
    freelist alone keeps the acked rows out, as SQLite reads the file."""
    db, rows = _freed()
    data = bytearray(db)
    data[512:1024] = random.Random(5).randbytes(512)  # page 2: the first map page
    assert committed(bytes(data), b"")[0] == rows
    assert scan(bytes(data)).messages == rows


@pytest.mark.parametrize("cut", [16, 100, 4095])
def test_a_file_cut_inside_its_first_page_reads_nothing_and_does_not_raise(cut: int) -> None:
    """A header but no whole page (a copy stopped early): no page 1, so no freelist to read."""
    db, _ = _acked_and_wal_rows(4096)
    found = scan(db[:cut])
    assert found.messages == {} and found.pages == 0
