"""What a collector knows of a device from its own last committed round, so its next round can
skip the reads of that device (adapters.collector.ingest on PostgreSQL, trust.reads_sqlite on
SQLite, where ``PRAGMA data_version`` is the proof): the device's highest stored seq and its newest
``confirmed`` islands, trusted only while nobody else wrote the device since.

Proof of that: ``devices.writes`` (migration 0008). Every round of every collector adds 1 to it
in the last-seen upsert that takes the device's row lock, and returns it; the purge and a
partition drop add 1 too, under the same lock in the same device order (:func:`bump`); a retired
device's row is deleted and a new row starts at a new epoch (``nextval * 2^32``: 2^32 rounds per
epoch before two could meet). So a returned count equal to this collector's last one + 1 means
the row lock went from its last commit straight to this round: the cached seq and islands are
what the database holds. Anything else (another collector of the group, a purge, a retire, an
older collector's staging path) is a miss: the device is read as before. Entries are written only
after a COMMIT returned, and all dropped when a round fails (its outcome is then unknown).

The cache is used only where it answers exactly what the reads would: every key of the round
above the cached highest seq (one at or below it may be a stored duplicate: read), and every
(device, boot) span inside the cached islands' range (the newest MAX_BOOTS boots' highest
MAX_RANGES islands: read back under the round's locks, confirmed.NEWEST_PG, or worked out from
what the round wrote, :func:`after`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Dict, List, NamedTuple, Optional, Tuple

from edge_agent.core.messages.confirm import MAX_BOOTS, MAX_RANGES, Confirms, Range
from edge_agent.core.messages.fleet import Record

if TYPE_CHECKING:
    from edge_agent.adapters.collector.db import CollectorDb

Span = Tuple[str, int, int, int]  # (device, boot, lo - 1, hi + 1) of a round's seqs


class Entry(NamedTuple):
    version: int  # devices.writes as this collector's last committed round left it
    top: Optional[int]  # MAX(seq) of the device in messages (any boot); None: no row
    tail: Confirms  # boot -> its highest islands, sorted by lo (the newest MAX_BOOTS boots)


def around(tail: Confirms, boot: int, lo: int, hi: int) -> Optional[List[Range]]:
    """The stored islands of ``boot`` overlapping ``lo..hi`` when ``tail`` holds all of them, else
    None. A full boot (MAX_RANGES islands) holds every island from its lowest ``lo`` up: islands are
    disjoint, so one below it ends below it too; a boot missing from a full tail is unknown unless
    it is newer than every boot there (it would be in the tail had it an island)."""
    have = tail.get(boot)
    if have is None:
        return [] if len(tail) < MAX_BOOTS or boot > max(tail) else None
    if len(have) >= MAX_RANGES and lo < have[0][0]:
        return None
    return [(a, b) for a, b in have if b >= lo and a <= hi]


def after(tail: Confirms, changes: Mapping[int, Tuple[List[Range], List[Range]]]) -> Optional[Confirms]:
    """What the read-back (confirmed.NEWEST_PG) returns once ``changes`` are written: per boot the
    stored islands they replace and the merged ones written instead (none: nothing changed),
    applied to the ``tail`` read before; None when that needs an island below a full boot's tail
    (merging left it fewer than MAX_RANGES). The round's boots all passed :func:`around`."""
    out = dict(tail)
    for b, (old, merged) in changes.items():
        if not merged:
            continue
        have = out.get(b, [])
        now = sorted([i for i in have if i not in old] + merged)
        if len(have) >= MAX_RANGES and len(now) < MAX_RANGES:
            return None
        out[b] = now[-MAX_RANGES:]
    return {b: out[b] for b in sorted(out, reverse=True)[:MAX_BOOTS]}


class Known:
    """Per device, an :class:`Entry`; ``hits`` / ``misses`` count devices (tests, bench);
    ``data_version``: SQLite's ``PRAGMA data_version`` when the entries were last proven
    (trust.reads_sqlite)."""

    def __init__(self) -> None:
        self.entries: Dict[str, Entry] = {}
        self.hits = 0
        self.misses = 0
        self.data_version: Optional[int] = None

    def plan(
        self, seqs: Mapping[str, Sequence[int]], spans: Sequence[Span]
    ) -> Dict[str, Dict[Tuple[str, int], List[Range]]]:
        """The devices of a round the cache can answer for, if their version proves it, with the
        islands around each of their spans; ``seqs``: the round's seqs per device."""
        out: Dict[str, Dict[Tuple[str, int], List[Range]]] = {}
        bad: set[str] = set()
        for d, b, lo, hi in spans:
            e = self.entries.get(d)
            if e is None or d in bad:
                continue
            isl = around(e.tail, b, lo, hi)
            if isl is None or (e.top is not None and min(seqs[d]) <= e.top):
                bad.add(d)
                out.pop(d, None)
                continue
            out.setdefault(d, {})[(d, b)] = isl
        return out

    def proven(self, device: str, version: int) -> bool:
        e = self.entries.get(device)
        return e is not None and version == e.version + 1

    def keep(
        self,
        versions: Mapping[str, int],
        tops: Mapping[str, Optional[int]],
        new: Iterable[Record],
        tails: Mapping[str, Confirms],
    ) -> None:
        """After the round's COMMIT: ``versions`` of every device it upserted, ``tops`` the highest
        seq of its record devices before it, ``new`` what it inserted, ``tails`` the islands read
        back under its locks (the devices it confirmed)."""
        top = dict(tops)
        for r in new:
            t = top.get(r.device)
            top[r.device] = r.seq if t is None else max(t, r.seq)
        for d, v in versions.items():
            old = self.entries.pop(d, None)
            if d in tails:
                self.entries[d] = Entry(v, top[d], {b: sorted(i) for b, i in tails[d].items()})
            elif old is not None and v == old.version + 1:  # nothing of it written but last_seen
                self.entries[d] = Entry(v, old.top, old.tail)

    def forget(self, devices: Optional[Iterable[str]] = None) -> None:
        """Drop ``devices`` (all by default): a round that failed or took the staging path."""
        if devices is None:
            self.entries.clear()
        for d in devices or ():
            self.entries.pop(d, None)


def bump(db: CollectorDb, devices: Iterable[str]) -> None:
    """PostgreSQL: add 1 to ``devices.writes`` of ``devices`` inside the caller's transaction
    (a purge deleted some of their messages), locking the rows in device order as every round
    does (a writer locking them in another order could deadlock with a round)."""
    names = sorted(set(devices))
    if db.dialect != "postgresql":  # SQLite: another connection's write changes data_version
        db.known.forget(names)  # (trust.reads_sqlite); this one's own is forgotten here
        return
    if not names:
        return
    db.conn.execute("SELECT 1 FROM devices WHERE device = ANY(%s) ORDER BY device FOR UPDATE", [names])
    db.conn.execute("UPDATE devices SET writes = writes + 1 WHERE device = ANY(%s)", [names])
