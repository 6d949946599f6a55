"""The log setup in process (issue 36: test_logsetup.py runs it in subprocesses, which mutmut cannot
credit): which stderr counts as the journal, the level each flag gives, the line format each place
gets, and the prefix on every line of a message with spaces."""

from __future__ import annotations

import io
import logging
import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import pytest

from edge_agent.app.cli.logsetup import JournalFormatter, setup_logging, stderr_is_journal


def _stream_id(f: IO[str]) -> str:
    st = os.fstat(f.fileno())
    return f"{st.st_dev}:{st.st_ino}"


@pytest.fixture
def stderr(tmp_path: Path) -> Iterator[IO[str]]:
    with open(tmp_path / "stderr", "w") as f:
        yield f


@contextmanager
def fresh_root(stderr: IO[str]) -> Iterator[logging.Logger]:
    """For the block: ``stderr`` as sys.stderr and a root logger without handlers (pytest sets its
    own capture and handlers per test phase: basicConfig would be a no-op), both put back after."""
    root = logging.getLogger()
    saved = (root.handlers[:], root.level, sys.stderr)
    root.handlers = []
    sys.stderr = stderr
    try:
        yield root
    finally:
        root.handlers, level, sys.stderr = saved
        root.setLevel(level)


def _line(levelno: int, msg: str = "hello world") -> str:
    (handler,) = logging.getLogger().handlers
    return handler.format(logging.LogRecord("edge_agent.x", levelno, "f", 1, msg, None, None))


def test_only_the_stream_journal_stream_names_is_the_journal(tmp_path: Path) -> None:
    with open(tmp_path / "a", "w") as f, open(tmp_path / "b", "w") as other:
        dev, ino = _stream_id(f).split(":")
        assert stderr_is_journal({"JOURNAL_STREAM": f"{dev}:{ino}"}, f)
        assert not stderr_is_journal({"JOURNAL_STREAM": _stream_id(other)}, f)
        for value in ("", f"{ino}:{dev}", f"{dev}:", f":{ino}", dev, f"{dev}:{ino}x", f"-{dev}:{ino}"):
            assert not stderr_is_journal({"JOURNAL_STREAM": value}, f), value
        assert not stderr_is_journal({}, f)
        assert not stderr_is_journal({"OTHER": f"{dev}:{ino}"}, f)


def test_a_stderr_without_a_file_behind_it_is_not_the_journal(tmp_path: Path) -> None:
    env = {"JOURNAL_STREAM": "1:2"}
    assert not stderr_is_journal(env, io.StringIO())  # fileno: io.UnsupportedOperation
    with open(tmp_path / "c", "w") as closed:
        pass
    assert not stderr_is_journal(env, closed)  # fileno: ValueError
    bare: Any = object()
    assert not stderr_is_journal(env, bare)  # no fileno at all


@pytest.mark.parametrize(
    ("verbose", "quiet", "level"),
    [
        (0, False, logging.INFO),
        (1, False, logging.INFO),
        (2, False, logging.DEBUG),
        (3, False, logging.DEBUG),
        (0, True, logging.WARNING),
        (2, True, logging.WARNING),
    ],
)
def test_each_flag_gives_its_level(stderr: IO[str], verbose: int, quiet: bool, level: int) -> None:
    with fresh_root(stderr) as root:
        setup_logging(verbose, quiet, env={})
        assert root.level == level


def test_on_a_terminal_a_line_has_time_level_name_and_message_on_stderr(stderr: IO[str]) -> None:
    with fresh_root(stderr) as root:
        setup_logging(0, False, env={"JOURNAL_STREAM": "1:2"})
        (handler,) = root.handlers
        assert isinstance(handler, logging.StreamHandler) and handler.stream is stderr
        assert re.fullmatch(
            r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} WARNING edge_agent\.x: hello world", _line(30)
        )


def test_under_journald_a_line_has_its_priority_and_no_time(stderr: IO[str]) -> None:
    with fresh_root(stderr) as root:
        setup_logging(0, False, env={"JOURNAL_STREAM": _stream_id(stderr)})
        (handler,) = root.handlers
        assert isinstance(handler, logging.StreamHandler) and handler.stream is stderr
        assert _line(logging.WARNING) == "<4>edge_agent.x: hello world"
        assert _line(logging.ERROR, "two words\nand more") == "<3>edge_agent.x: two words\n<3>and more"


def test_without_env_the_process_environment_is_read(
    stderr: IO[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JOURNAL_STREAM", _stream_id(stderr))
    with fresh_root(stderr):
        setup_logging(0, False)
        assert _line(logging.INFO) == "<6>edge_agent.x: hello world"


def test_every_line_of_a_message_with_spaces_carries_the_prefix() -> None:
    rec = logging.LogRecord(
        "n", logging.ERROR, "f", 1, "Traceback (most recent call last):\n  File x", None, None
    )
    assert JournalFormatter("%(message)s").format(rec) == "<3>Traceback (most recent call last):\n<3>  File x"
