"""The collector's commit watermark (``<prefix>/<device>/confirm``): which ``(boot, seq)`` of a
device the database holds, so the device deletes a result only once it is stored at the far end,
not when the broker took it (a broker drops, loses on kill -9 or wipes what it acknowledged).

Format, JSON, retained, QoS 1, one message per device per commit round::

    {"v": 1, "c": [[boot, [[lo, hi], ...]], ...]}

Each ``[lo, hi]`` is an island: every seq from ``lo`` to ``hi`` of that boot is committed. The
collector sends the newest boots' highest islands (the retained state) plus every island that holds
a seq of this round (a resend is always confirmed live, even when its island fell off the bounded
list). Everything here is pure; :func:`decode` bounds every field (it is outside input on the device).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Dict, List, Tuple

CONFIRM_KIND = "confirm"
VERSION = 1
MAX_SEQ = 2**62
MAX_BOOT = 2**31
MAX_BOOTS = 8  # boots in one message
MAX_RANGES = 64  # islands per boot in one message
MAX_PAYLOAD = 32 * 1024  # 8 x 64 ranges of two 19-digit numbers fit; anything bigger is refused

Range = Tuple[int, int]
Confirms = Dict[int, List[Range]]  # boot -> merged, sorted islands


class ConfirmError(ValueError):
    """A confirmation message that is not one; the text names the field and what was expected."""


def confirm_topic(prefix: str, device: str) -> str:
    return f"{prefix.strip('/')}/{device}/{CONFIRM_KIND}"


def is_confirm_topic(prefix: str, topic: str) -> bool:
    """``<prefix>/<device>/confirm``: what the collector publishes (and receives back through its
    own ``<prefix>/+/+`` subscription: never stored)."""
    head = prefix.strip("/") + "/"
    rest = topic[len(head) :] if topic.startswith(head) else ""
    return rest.count("/") == 1 and rest.endswith("/" + CONFIRM_KIND)


def merge(ranges: Iterable[Range]) -> List[Range]:
    """Sorted, disjoint, non-adjacent ranges covering exactly what ``ranges`` cover."""
    out: List[Range] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            if hi > out[-1][1]:
                out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return out


def ranges_of(seqs: Iterable[int]) -> List[Range]:
    """The runs of consecutive numbers in ``seqs`` (any order, duplicates allowed)."""
    return merge((s, s) for s in seqs)


def covers(ranges: Sequence[Range], seq: int) -> bool:
    """True when ``seq`` lies in one of the sorted, disjoint ``ranges`` (binary search)."""
    lo, hi = 0, len(ranges)
    while lo < hi:
        mid = (lo + hi) // 2
        if ranges[mid][1] < seq:
            lo = mid + 1
        else:
            hi = mid
    return lo < len(ranges) and ranges[lo][0] <= seq


def bound(confirms: Mapping[int, Sequence[Range]], keep: Mapping[int, Sequence[Range]]) -> Confirms:
    """At most MAX_BOOTS boots (the newest, but every boot of ``keep`` first) and MAX_RANGES
    islands per boot: the ones of ``keep`` (this round's), then the highest."""
    boots = sorted(keep, reverse=True)[:MAX_BOOTS]
    boots += [b for b in sorted(confirms, reverse=True) if b not in keep][: MAX_BOOTS - len(boots)]
    out: Confirms = {}
    for b in boots:
        must = merge(keep.get(b, ()))[-MAX_RANGES:]
        room = MAX_RANGES - len(must)
        rest = [r for r in merge(confirms.get(b, ())) if r not in must]
        out[b] = merge(must + (rest[-room:] if room else []))
    return out


def encode(confirms: Mapping[int, Sequence[Range]]) -> bytes:
    """The message for ``confirms`` (bounded first with :func:`bound` by the caller)."""
    body = {"v": VERSION, "c": [[b, [list(r) for r in merge(confirms[b])]] for b in sorted(confirms)]}
    return json.dumps(body, separators=(",", ":")).encode("ascii")


def _int(value: object, lo: int, hi: int, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise ConfirmError(f"confirm message: {where} = {str(value)[:40]!r}, expected an integer {lo}..{hi}")
    return value


def _list(value: object, most: int, where: str) -> List[object]:
    if not isinstance(value, list):
        raise ConfirmError(f"confirm message: {where} is {type(value).__name__}, expected a list")
    if len(value) > most:
        raise ConfirmError(f"confirm message: {where} has {len(value)} entries, at most {most} taken")
    return value


def decode(payload: bytes) -> Confirms:
    """The islands of a confirmation message; ConfirmError naming the field for anything else."""
    if len(payload) > MAX_PAYLOAD:
        raise ConfirmError(f"confirm message: {len(payload)} bytes, at most {MAX_PAYLOAD} taken")
    try:
        body = json.loads(payload.decode("ascii"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ConfirmError(f"confirm message: not ASCII JSON ({str(exc)[:80]})") from None
    if not isinstance(body, dict):
        raise ConfirmError(f"confirm message: {type(body).__name__}, expected an object")
    if body.get("v") != VERSION or isinstance(body.get("v"), bool):
        raise ConfirmError(f"confirm message: v = {str(body.get('v'))[:40]!r}, expected {VERSION}")
    out: Confirms = {}
    for i, entry in enumerate(_list(body.get("c"), MAX_BOOTS, "c")):
        pair = _list(entry, 2, f"c[{i}]")
        if len(pair) != 2:
            raise ConfirmError(f"confirm message: c[{i}] has {len(pair)} entries, expected [boot, ranges]")
        boot = _int(pair[0], 0, MAX_BOOT, f"c[{i}][0] (boot)")
        if boot in out:
            raise ConfirmError(f"confirm message: c[{i}]: boot {boot} twice")
        ranges: List[Range] = []
        for j, r in enumerate(_list(pair[1], MAX_RANGES, f"c[{i}][1]")):
            where = f"c[{i}][1][{j}]"
            lohi = _list(r, 2, where)
            if len(lohi) != 2:
                raise ConfirmError(f"confirm message: {where} has {len(lohi)} entries, expected [lo, hi]")
            lo = _int(lohi[0], 1, MAX_SEQ, f"{where}[0] (lo)")
            hi = _int(lohi[1], lo, MAX_SEQ, f"{where}[1] (hi)")
            ranges.append((lo, hi))
        out[boot] = merge(ranges)
    return out


class RangeSet:
    """What the device was told is stored, in memory, bounded (the highest ``limit`` islands per
    boot, ``MAX_BOOTS`` boots): rows whose PUBACK comes after their confirmation are deleted at once."""

    def __init__(self, limit: int = 4 * MAX_RANGES) -> None:
        self.limit = limit
        self.boots: Confirms = {}

    def add(self, confirms: Mapping[int, Sequence[Range]]) -> None:
        for b, ranges in confirms.items():
            self.boots[b] = merge([*self.boots.get(b, []), *ranges])[-self.limit :]
        for b in sorted(self.boots)[:-MAX_BOOTS]:
            del self.boots[b]

    def covers(self, boot: int, seq: int) -> bool:
        return covers(self.boots.get(boot, ()), seq)
