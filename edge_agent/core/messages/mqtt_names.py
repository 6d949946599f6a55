"""What may stand in an MQTT topic or client id (pure), checked when the config is read.

MQTT 3.1.1 section 1.5.3 (and 5.0 section 1.5.4): a UTF-8 string MUST NOT contain U+0000, SHOULD
NOT contain the control characters U+0001-U+001F and U+007F-U+009F nor Unicode non-characters
(U+FDD0-U+FDEF and U+xFFFE/U+xFFFF of every plane), and a receiver MAY close the connection when
it does. mosquitto does: a topic prefix with ``\\n``, U+0001 or U+FFFF made it drop the client at
every publish, and the agent reconnected forever (issue 17). So those are refused at
``config check``, in one line, instead of being found by the broker. Topic names starting with
``$`` belong to the broker (``$SYS``); the agent strips leading ``/`` from the prefix, so ``/$SYS``
is the same mistake.
"""

from __future__ import annotations

from typing import Optional

# Kept well below MQTT's 65535 bytes so prefix + device id + suffix always fit, and a broker's
# smaller limits are rarely hit.
MAX_PREFIX_BYTES = 1024


def _is_noncharacter(cp: int) -> bool:
    return 0xFDD0 <= cp <= 0xFDEF or (cp & 0xFFFE) == 0xFFFE


def utf8_text_problem(text: str) -> Optional[str]:
    """Why ``text`` breaks the MQTT UTF-8 string rules, or None. Names the first bad character."""
    for i, ch in enumerate(text):
        cp = ord(ch)
        if cp <= 0x1F or 0x7F <= cp <= 0x9F:
            what = "NUL" if cp == 0 else "a control character"
        elif _is_noncharacter(cp):
            what = "a Unicode non-character"
        elif 0xD800 <= cp <= 0xDFFF:
            what = "a lone surrogate (not UTF-8)"
        else:
            continue
        return f"must not contain {what} (U+{cp:04X} at position {i}); MQTT brokers drop such clients"
    return None


def topic_prefix_problem(prefix: str) -> Optional[str]:
    """Why ``prefix`` cannot start a publish topic, or None if it can."""
    problem = utf8_text_problem(prefix)
    if problem is not None:
        return problem
    if not prefix.strip("/"):
        return "must not be empty"
    for ch in ("+", "#"):
        if ch in prefix:
            return f"must not contain the MQTT wildcard {ch!r}"
    if prefix.lstrip("/").startswith("$"):
        return "must not start with '$' or '/$' (reserved for the broker, e.g. $SYS)"
    n = len(prefix.encode("utf-8"))
    if n > MAX_PREFIX_BYTES:
        return f"is {n} bytes long, at most {MAX_PREFIX_BYTES} allowed"
    return None


def topic_level_problem(level: str) -> Optional[str]:
    """Why ``level`` cannot be one topic level (a device id, a group name), or None."""
    problem = utf8_text_problem(level)
    if problem is not None:
        return problem
    if not level:
        return "must not be empty"
    for ch in ("/", "+", "#"):
        if ch in level:
            return f"must not contain {ch!r} (one topic level, no wildcards)"
    if level.startswith("$"):
        return "must not start with '$' (reserved for the broker)"
    return None
