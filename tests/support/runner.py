"""The one way a test runs the CLI as a user does: ``python -m edge_agent ...`` in a child process.

A child process, not ``main()`` in-process, because these tests check what a user sees: the exit
code, stdout and stderr (one clear line, never a traceback), logging set up from scratch and no
state left over from another test. Tests that call ``edge_agent.app.cli.main.main([...])`` in-process
(with ``capsys``) do so on purpose, to reach the code under mutation testing.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Optional, Union


def cli(
    *args: str,
    quiet: bool = True,
    timeout: float = 120.0,
    env: Optional[Mapping[str, str]] = None,
    stdin: Union[int, IO[bytes], None] = subprocess.DEVNULL,
    cwd: Optional[Path] = None,
    input: Optional[str] = None,
) -> subprocess.CompletedProcess[str]:
    """``python -m edge_agent [-q] ARGS``: captured text output, never raises on a non-zero exit.

    ``quiet`` passes ``-q`` (warnings and errors only) so stderr holds just what a user must read;
    ``env`` is added to this process's environment; stdin is /dev/null unless a test feeds it, so a
    command never waits on the terminal the tests were started from; ``input`` is text piped to it.
    """
    return subprocess.run(
        [sys.executable, "-m", "edge_agent", *(["-q"] if quiet else []), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **env} if env else None,
        stdin=None if input is not None else stdin,
        input=input,
        cwd=cwd,
    )
