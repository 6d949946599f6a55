"""Hand-made bugs: the salvage page reader (WAL generations and commits, the freelist and the
pointer map, page sizes and reserved bytes, overflow chains, the bounds against crafted pages)."""

PG = "edge_agent/adapters/outbox/pages.py"
T = "tests/adapters/outbox/test_outbox_pages.py tests/adapters/outbox/test_outbox_pages_bounds.py"
BUGS = [
    # frames after the last commit are taken (a transaction that never committed)
    (
        "pg1",
        PG,
        "    return committed, db_pages\n",
        "    committed.update(pending)\n    return committed, db_pages\n",
        T,
    ),
    # frames of an older WAL generation (another salt) are taken
    ("pg2", PG, "if head[8:16] != salt or pgno == 0:", "if pgno == 0:", T),
    # pages past the size the last commit left are read (an incremental vacuum in the WAL)
    ("pg3", PG, "    if size:  #", "    if False:  #", T),
    # the oldest committed frame of a page wins instead of the newest (a later commit's page lost)
    (
        "pg4",
        PG,
        "            committed.update(pending)\n",
        "            committed = {**pending, **committed}\n",
        T,
    ),
    # a frame whose checksum fails is taken (a frame torn at power loss, part new part old bytes)
    (
        "pg2b",
        PG,
        '        if s != struct.unpack(">II", head[16:24]):\n            break\n',
        "",
        T,
    ),
    # the frame checksum restarts at each frame instead of running on
    (
        "pg5",
        PG,
        "s = _checksum(page, _checksum(head[:8], s, big), big)",
        "s = _checksum(page, _checksum(head[:8], (0, 0), big), big)",
        T,
    ),
    # the freelist is not consulted
    ("pg6", PG, "if pgno in free or page[h] != TABLE_LEAF:", "if page[h] != TABLE_LEAF:", T),
    # the pointer map is not asked beside an intact header
    ("pg7", PG, "            free |= _ptrmap_free(pages, usable) or set()\n", "            pass\n", T),
    # reserved bytes ignored: the usable size is the page size
    ("pg8", PG, "    usable = ps - reserved\n", "    usable = ps\n", T),
    # the local payload bound moved by one
    ("pg9", PG, "local = k if k <= usable - 35 else m", "local = k if k < usable - 35 else m", T),
    # 65536-byte pages (stored as 1) not recognised
    ("pg10", PG, 'ps = 65536 if db[16:18] == b"\\x00\\x01" else', "ps =", T),
    # without a header the first size with any rows wins, the pointer map is not preferred
    ("pg11", PG, "        if found.ptrmap:\n            return found\n", "", T),
    # the overflow budget removed (the quadratic crafted page)
    ("pg12", PG, " or chains[0] <= 0:", ":", T),
    # no cell count bound
    ("pg13", PG, "    if ncells > (len(page) - 8) // 6:\n", "    if False:\n", T),
    # sqlite_sequence's ("messages", n) row is taken as a counter
    ("pg14", PG, ' and rec[0] != "messages"', "", T),
    # a record that does not fill its payload is kept
    ("pg15", PG, "    if pos != len(payload):\n", "    if False:\n", T),
    # a damaged page-size field ends the salvage with no rows
    ("pg16", PG, "if db[:16] == HEADER and _usable(ps, db[20]):", "if db[:16] == HEADER:", T),
    # the smallest usable size moved (480 bytes is allowed)
    ("pg17", PG, "reserved <= ps - 480", "reserved < ps - 480", T),
    # the plausibility threshold for a pointer map lowered
    ("pg18", PG, "plausible >= 0.95 * checked", "plausible >= 0.5 * checked", T),
]
