"""The docs a user follows: every relative link leads to a file, no lab notes (the machine the
docs were written on, issue numbers), and no install line that needs a package index serving
``onnx-edge-agent`` (none does yet) unless it says so. The generated mutation ledger is a record,
not a guide: it keeps its dates and rounds."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GUIDES = sorted(
    p
    for p in [
        REPO / "README.md",
        *REPO.glob("docs/*.md"),
        *REPO.glob("*/README.md"),
        *REPO.glob("cross-build/*.md"),
    ]
    if p.name != "mutation-ledger.md"
)
LINK = re.compile(r"\]\(([^)\s]+)\)")
LAB_NOTE = re.compile(r"this machine|\bissues? #?\d+|\bissue-\d+", re.IGNORECASE)
INDEX_INSTALL = re.compile(r"pip3? install\s+['\"]?onnx-edge-agent")


def _lines(p: Path) -> list[str]:
    return p.read_text(encoding="utf-8").splitlines()


def test_the_guides_are_found() -> None:
    names = {p.relative_to(REPO).as_posix() for p in GUIDES}
    assert {"README.md", "docs/collector.md", "cross-build/README.md", "cross-build/JETSON.md"} <= names


def test_every_relative_link_leads_to_a_file() -> None:
    broken = []
    for p in GUIDES:
        for n, line in enumerate(_lines(p), 1):
            for target in LINK.findall(line):
                if re.match(r"[a-z]+:", target) or target.startswith("#"):
                    continue  # a URL, or an anchor on the same page
                path = target.split("#", 1)[0]
                if not (p.parent / path).exists():
                    broken.append(f"{p.relative_to(REPO)}:{n}: {target}")
    assert broken == []


def test_no_lab_notes_in_the_guides() -> None:
    notes = [
        f"{p.relative_to(REPO)}:{n}: {m.group(0)}"
        for p in GUIDES
        for n, line in enumerate(_lines(p), 1)
        for m in LAB_NOTE.finditer(line)
    ]
    assert notes == []


def test_an_install_from_the_index_always_says_it_is_not_published_yet() -> None:
    bad = [
        f"{p.relative_to(REPO)}:{n}: {line.strip()}"
        for p in GUIDES
        for n, line in enumerate(_lines(p), 1)
        if INDEX_INSTALL.search(line) and "once published" not in line
    ]
    assert bad == []
