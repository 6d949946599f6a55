"""Hand-made bugs: opening the outbox (full-disk retry, salvage with the kept marks, putting a
damaged file back) and a batch given up on a full disk counted in the marks file."""

OP = "edge_agent/adapters/outbox/opening.py"
DB = "edge_agent/adapters/outbox/db.py"
SP = "edge_agent/adapters/outbox/space.py"
MK = "edge_agent/adapters/outbox/marks.py"
T_OP = "tests/adapters/outbox/test_outbox_open.py tests/adapters/outbox/test_outbox_salvage.py"
T_GIVE = "tests/adapters/outbox/test_outbox_space.py tests/adapters/outbox/test_full_disk.py tests/adapters/outbox/test_outbox_marks.py"
BUGS = [
    # any failed open gives back the reserve and retries (not only a full disk)
    ("op1", OP, 'step.action != "retry" or not', "not", T_OP),
    # the retried open forgets the marks kept beside the file
    (
        "op2",
        OP,
        'released the disk reserve", path, exc)\n            return _open_files(path, kept)',
        'released the disk reserve", path, exc)\n            return _open_files(path, None)',
        T_OP,
    ),
    # the full-disk open keeps a quarter of the reserve back
    ("op3", OP, "keep=step.keep or 0", "keep=(step.keep or 0) + reserve.size // 4", T_OP),
    # the salvage ignores the kept marks: the loss from damaged pages only
    (
        "op4",
        OP,
        "recovery = recover_if_corrupt(path, connect, kept)",
        "recovery = recover_if_corrupt(path, connect)",
        T_OP,
    ),
    # a salvage that cannot finish leaves the damaged file aside
    ("db1", DB, "        _put_back(aside, path)\n        raise\n", "        raise\n", T_OP),
    # the fresh file's WAL stays beside the damaged file put back
    ("db2", DB, "            fresh.unlink(missing_ok=True)\n", "", T_OP),
    # a given-up batch is counted in memory only (until the next commit)
    ("gv1", SP, "        self._ledger.reserve_seq(counters=True)\n", "", T_GIVE),
    # the give-up's write happens only when the reservation is spent
    ("gv2", MK, "if top <= last.seq and not counters:", "if top <= last.seq:", T_GIVE),
    # the given-up numbers are not marked as accounted for: a crash counts them again as skipped
    (
        "gv3",
        MK,
        "skipped_to = max(last.skipped_to, s.skipped_to, s.seq_committed)",
        "skipped_to = max(last.skipped_to, s.skipped_to)",
        T_GIVE,
    ),
]
