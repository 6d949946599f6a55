"""Where the log goes and how it looks: a terminal gets a timestamp per line; journald (the
service under systemd) gets ``<N>`` syslog priority prefixes and no timestamp of ours.

systemd sets ``JOURNAL_STREAM=<device>:<inode>`` for a unit whose stderr is the journal; it is
trusted only when stderr *is* that stream (sd_journal_print(3), "JOURNAL_STREAM"): a shell started
from the service and redirected to a file keeps the variable but not the stream. journald reads
the prefix as the line's priority (``journalctl -p warning`` works) and stamps the time itself.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from typing import IO, Optional

# logging level -> syslog priority (sd-daemon(3): <3> error, <4> warning, <6> info, <7> debug)
PRIORITY = {logging.CRITICAL: 2, logging.ERROR: 3, logging.WARNING: 4, logging.INFO: 6, logging.DEBUG: 7}


def priority(level: int) -> int:
    """The syslog priority of a logging level (levels between the named ones round down)."""
    for named in sorted(PRIORITY, reverse=True):
        if level >= named:
            return PRIORITY[named]
    return 7


class JournalFormatter(logging.Formatter):
    """``<N>name: message``; every line of a multi-line message (a traceback) carries the prefix."""

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        prefix = f"<{priority(record.levelno)}>"
        return "\n".join(prefix + line for line in text.split("\n"))


def stderr_is_journal(env: Mapping[str, str], stream: IO[str]) -> bool:
    dev, _, ino = env.get("JOURNAL_STREAM", "").partition(":")
    if not (dev.isdigit() and ino.isdigit()):
        return False
    try:
        st = os.fstat(stream.fileno())
    except (OSError, ValueError, AttributeError):
        return False
    return (st.st_dev, st.st_ino) == (int(dev), int(ino))


def setup_logging(verbose: int, quiet: bool, env: Optional[Mapping[str, str]] = None) -> None:
    level = logging.WARNING if quiet else (logging.DEBUG if verbose >= 2 else logging.INFO)
    handler = logging.StreamHandler(sys.stderr)
    if stderr_is_journal(os.environ if env is None else env, sys.stderr):
        handler.setFormatter(JournalFormatter("%(name)s: %(message)s"))
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level, handlers=[handler])
