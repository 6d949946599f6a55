"""Under systemd (stderr is the stream ``JOURNAL_STREAM`` names) every log line carries its
syslog priority as ``<N>`` and no timestamp, so ``journalctl -p warning`` selects the warnings;
on a terminal, or with the variable left over but stderr elsewhere, the timestamped form stays."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from edge_agent.app.cli.logsetup import JournalFormatter, priority

REPO = Path(__file__).resolve().parents[3]
SCRIPT = """
import logging, sys
from edge_agent.app.cli.logsetup import setup_logging
setup_logging(int(sys.argv[1]), False)
log = logging.getLogger("edge_agent.x")
log.debug("d"); log.info("i"); log.warning("w"); log.error("e\\nsecond line"); log.critical("c")
"""


def _run(tmp_path: Path, journal: str, verbose: int = 0) -> list[str]:
    err = tmp_path / "stderr"
    with open(err, "w") as f:
        st = os.fstat(f.fileno())
        value = f"{st.st_dev}:{st.st_ino}" if journal == "this" else journal
        env = {**os.environ, "PYTHONPATH": str(REPO), "JOURNAL_STREAM": value}
        subprocess.run(
            [sys.executable, "-c", SCRIPT, str(verbose)], stderr=f, env=env, check=True, timeout=60
        )
    return err.read_text().splitlines()


def test_under_journald_each_line_has_its_priority_and_no_timestamp(tmp_path: Path) -> None:
    assert _run(tmp_path, "this", verbose=2) == [
        "<7>edge_agent.x: d",
        "<6>edge_agent.x: i",
        "<4>edge_agent.x: w",
        "<3>edge_agent.x: e",
        "<3>second line",
        "<2>edge_agent.x: c",
    ]


@pytest.mark.parametrize("journal", ["", "1:2", "garbage"])
def test_elsewhere_the_lines_keep_their_timestamp(tmp_path: Path, journal: str) -> None:
    lines = _run(tmp_path, journal)
    assert len(lines) == 5 and all(
        re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} [A-Z]+ ", x) for x in lines[:3]
    )
    assert not any(x.startswith("<") for x in lines)


def test_levels_between_the_named_ones_round_down() -> None:
    assert [priority(n) for n in (5, 10, 15, 20, 25, 30, 40, 50, 60)] == [7, 7, 7, 6, 6, 4, 3, 2, 2]
    rec = logging.LogRecord("n", logging.WARNING, "f", 1, "a\nb", None, None)
    assert JournalFormatter("%(message)s").format(rec) == "<4>a\n<4>b"
