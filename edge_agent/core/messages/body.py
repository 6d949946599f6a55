"""A message body's JSON as the collector takes it (pure): decoded with every bound checked, and kept
as sent when every driver can store that text unchanged (no parse-and-dump per body). The worst
inputs -- a lone surrogate, NUL, 1e400, nesting past the recursion limit, a 16 MiB payload of
digits -- each become one :class:`IngestError` line, never a crash of the collector."""

from __future__ import annotations

import json
import math
from typing import Optional

MAX_DEPTH = 64  # JSON nesting: our messages nest 4 deep; json.loads recurses (RecursionError)


class IngestError(ValueError):
    """A message the collector cannot store; the text names the topic and the reason."""


def json_text(value: object, where: str) -> str:
    """Compact JSON that every driver can store: a lone surrogate (``"\\ud800"`` passes json.loads)
    made the driver's UTF-8 encode raise outside the per-message guard and crash-looped the
    collector, so encodability is checked here, where a failure is a rejection."""
    try:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise IngestError(
            f"{where}: holds a lone UTF-16 surrogate (\\ud800-\\udfff), not storable text"
        ) from None
    except (ValueError, RecursionError) as exc:
        raise IngestError(f"{where}: not storable JSON ({str(exc)[:120]})") from None
    if "\\u0000" in text:  # PostgreSQL's jsonb and text refuse NUL
        raise IngestError(f"{where}: contains a NUL character")
    return text


def loads(payload: bytes, where: str) -> object:
    """json.loads, with the nesting bounded (the C decoder raises RecursionError past ~1000 levels;
    a deep value that did decode would break the next recursive reader, so it is refused here)."""
    try:
        body = json.loads(payload)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise IngestError(f"{where}: not JSON ({str(exc)[:120]})") from None
    if payload.count(b"[") + payload.count(b"{") > MAX_DEPTH and depth(body) > MAX_DEPTH:
        raise IngestError(f"{where}: JSON nested deeper than {MAX_DEPTH}")
    return body


class _NotFinite(Exception):
    """What the databases cannot take as sent: Infinity, NaN, a number that reads as an infinite
    float (1e400). Such a body is decoded again and re-dumped, which refuses it with the usual line."""


def _finite(text: str) -> float:
    value = float(text)  # "Infinity", "-Infinity", "NaN" too (parse_constant)
    if not math.isfinite(value):
        raise _NotFinite(text)
    return value


# one decoder for every body (its hooks raise, they note nothing): json.loads with hooks made a
# decoder and its scanner per call, 40 % of decoding a 0.6 KiB result. _FAST keeps the C float parser
# where no number can overflow (no 3-digit exponent, < 210 digits: < 1e308): half the decode time
_FINITE = json.JSONDecoder(parse_constant=_finite, parse_float=_finite)
_FAST = json.JSONDecoder(parse_constant=_finite)
# every digit as 0 and E as e (one C pass): the digits counted and the numbers searched in one copy
_FLAT = bytes.maketrans(b"0123456789E", b"0000000000e")
_RUN = b"0" * 210  # a run of 210 digits: a number that may overflow
_PROBES = (b"0e000", b"0e+000", b"0e-000")  # a digit, then a 3-digit exponent
_MANTISSA, _BEFORE = b"0.", b" \t\n\r,:["  # a number's digits (flat); what may come before one


def _big_exponent(flat: bytes) -> bool:
    """A number with a 3-digit exponent in ``flat`` (the payload through :data:`_FLAT`): only a
    number, found by what comes before its digits, not a model hash's ``e117`` inside a string. A
    regex ``[eE][+-]?[0-9]{3}`` took every body naming such a model to the checking decoder (whose
    Python float hook was 40 ms of 330 for 10,000 results) and scanned the rest whole, 3 us a
    0.6 KiB body; a regex for the number in its context 7-12 us; this 1.2-1.4 us (timeit)."""
    for probe in _PROBES:
        i = flat.find(probe)
        while i >= 0:
            j = i
            while j >= 0 and flat[j] in _MANTISSA:
                j -= 1
            if j >= 0 and flat[j] == 45:  # "-"
                j -= 1
            if j < 0 or flat[j] in _BEFORE:
                return True
            i = flat.find(probe, i + 1)
    return False


def loads_as_sent(payload: bytes, where: str) -> tuple[object, Optional[str]]:
    """``(body, text)``: the decoded body and, when it can be stored exactly as sent, the payload's
    text (strict UTF-8, no BOM, no ``\\u`` escape -- a lone surrogate or NUL hides behind one --
    no Infinity/NaN/overflowing number); else text None and the caller stores a re-dump (the
    checks of :func:`json_text`). Parsing and re-dumping each body cost 12 % of a store round."""
    try:
        text = payload.decode("utf-8")
    except UnicodeDecodeError:
        return loads(payload, where), None
    if text.startswith("\ufeff") or "\\u" in text:
        return loads(payload, where), None
    as_sent: Optional[str] = text
    flat = payload.translate(_FLAT)
    try:
        try:
            slow = _big_exponent(flat) or (flat.count(48) >= 210 and _RUN in flat)
            body = (_FINITE if slow else _FAST).decode(text)
        except _NotFinite:
            body, as_sent = json.loads(text), None
    except (ValueError, RecursionError) as exc:
        raise IngestError(f"{where}: not JSON ({str(exc)[:120]})") from None
    if flat.count(b"[") + flat.count(b"{") > MAX_DEPTH and depth(body) > MAX_DEPTH:
        raise IngestError(f"{where}: JSON nested deeper than {MAX_DEPTH}")
    return body, as_sent


def depth(value: object) -> int:
    """Nesting depth of a decoded JSON value, without recursion."""
    deepest, todo = 0, [(value, 1)]
    while todo:
        v, d = todo.pop()
        if isinstance(v, dict):
            v = list(v.values())
        if isinstance(v, list):
            deepest = max(deepest, d)
            todo.extend((x, d + 1) for x in v if isinstance(x, (dict, list)))
    return deepest


def safe_text(text: str, limit: int = 1024) -> str:
    """Text for the rejected table and the log: bounded, no NUL, always encodable."""
    return (
        text[:limit].replace("\x00", "\\x00").encode("utf-8", "backslashreplace").decode("ascii", "replace")
    )
