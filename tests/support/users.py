"""Another local user, in process, for the checks that depend on who runs a command.

The suite runs as root in CI and here, where ``os.access`` says yes to everything: a check such as
"the service user cannot write this folder" has no case then. As root, ``as_user`` makes ``uid``
the *real* uid (what ``os.access`` judges) for the block and keeps root as the effective one, so
the uid can be put back; as anyone else the block runs as that user (there is no other)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = os.geteuid() == 0
# daemon and nobody as root; the user running the tests otherwise
OTHER_USERS = [1, 65534] if ROOT else [os.getuid()]


@contextmanager
def as_user(uid: int) -> Iterator[None]:
    if not ROOT:
        yield
        return
    os.setreuid(uid, 0)
    try:
        yield
    finally:
        os.setreuid(0, 0)


@contextmanager
def open_dir() -> Iterator[Path]:
    """A folder every user may reach (pytest's tmp_path is 0700 to root: no other user gets in)."""
    with tempfile.TemporaryDirectory() as name:
        os.chmod(name, 0o755)
        yield Path(name)
