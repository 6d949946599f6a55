"""The enrollment directory: read it, change it, write every file atomically with tight modes.

Everything is regenerated from ``enrolled.json`` and the kept passwords on every run, so a run
cut anywhere is finished by the next one, and fails closed: first the passwords of revoked
identities are deleted (cut here, the next run gives them a new password nobody has, so a stolen
one is dead), then new passwords are made (a passwd line never exists for a password nobody kept),
then ``passwd``, ``acl``, the snippet, and ``enrolled.json`` last (cut before it, a revoked
identity is still listed and the next run cannot mistake its passwd lines for hand-added ones).
A password is made once per identity and kept (``--rotate`` makes a new one); passwd lines of
users this tool does not know are kept, with a warning. One run at a time (``flock``).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import stat
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from edge_agent.adapters.host.durable import write_durable
from edge_agent.core.broker.files import (
    SALT_BYTES,
    BrokerSettings,
    acl_text,
    parse_passwd,
    parse_settings,
    passwd_line,
    passwd_matches,
    passwd_text,
)
from edge_agent.core.broker.identity import MAX_IDENTITIES, EnrollError, Enrollment, parse_enrolled

DIR_MODE = 0o750  # the broker's group may read passwd/acl where the directory is deployed
SECRETS_MODE = 0o700
SECRET_MODE = 0o600
BROKER_FILE_MODE = 0o640
MAX_FILE_BYTES = 64 * 1024 * 1024


@dataclass
class Change:
    """What one run did, for the CLI to print."""

    new_secrets: list[str] = field(default_factory=list)  # identities with a newly made password
    removed: list[str] = field(default_factory=list)
    foreign_users: list[str] = field(default_factory=list)  # passwd users kept though not enrolled
    mismatched: list[str] = field(default_factory=list)  # passwd line does not take the kept password


@dataclass(frozen=True)
class Layout:
    root: Path

    @property
    def secrets(self) -> Path:
        return self.root / "secrets"

    def secret(self, name: str) -> Path:
        return self.secrets / f"{name}.password"

    @property
    def enrolled(self) -> Path:
        return self.root / "enrolled.json"

    @property
    def passwd(self) -> Path:
        return self.root / "passwd"

    @property
    def acl(self) -> Path:
        return self.root / "acl"

    @property
    def conf(self) -> Path:
        return self.root / "mosquitto.conf"

    @property
    def settings(self) -> Path:
        return self.root / "broker.json"


def _real_dir(path: Path, mode: int) -> None:
    """Create ``path`` with ``mode`` or check the existing one is a directory (not a symlink that
    would send the passwords elsewhere), then set ``mode`` whatever the umask."""
    with contextlib.suppress(FileExistsError):
        os.makedirs(path, mode)
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise EnrollError(f"{path}: not a directory (a symlink or a file is refused)")
    os.chmod(path, mode)


def _read(path: Path) -> Optional[str]:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode):
        raise EnrollError(f"{path}: not a regular file")
    if st.st_size > MAX_FILE_BYTES:
        raise EnrollError(f"{path}: {st.st_size} bytes, at most {MAX_FILE_BYTES}")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise EnrollError(f"{path}: not UTF-8 text") from None


@contextlib.contextmanager
def _locked(layout: Layout) -> Iterator[None]:
    _real_dir(layout.root, DIR_MODE)
    _real_dir(layout.secrets, SECRETS_MODE)
    fd = os.open(str(layout.root / ".lock"), os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def load(root: Path) -> Enrollment:
    """The enrollment in ``root`` (empty when there is none yet)."""
    text = _read(Layout(root).enrolled)
    return Enrollment() if text is None else parse_enrolled(text)


def read_secret(root: Path, name: str) -> Optional[str]:
    text = _read(Layout(root).secret(name))
    return None if text is None else text.strip() or None


def load_settings(root: Path) -> BrokerSettings:
    """The broker settings of the last run (``broker.json``), or the defaults."""
    text = _read(Layout(root).settings)
    return BrokerSettings() if text is None else parse_settings(text)


def apply(
    root: Path,
    settings: BrokerSettings,
    change_fn: Callable[[Enrollment], None],
    rotate: Sequence[str] = (),
) -> Change:
    """Lock, load, let ``change_fn`` edit the enrollment (it raises EnrollError to refuse), then
    write every file. ``rotate``: identities that get a new password."""
    layout = Layout(root)
    change = Change()
    with _locked(layout):
        enrollment = load(root)
        before = set(enrollment.names())
        old_users = set(enrollment.users())
        change_fn(enrollment)
        if len(enrollment.names()) > MAX_IDENTITIES:
            raise EnrollError(f"more than {MAX_IDENTITIES} identities in one enrollment")
        users = enrollment.users()
        after = set(enrollment.names())
        change.removed = sorted(before - after)
        old_lines = parse_passwd(_read(layout.passwd) or "")
        for name in change.removed:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(layout.secret(name))
        lines: dict[str, str] = {}
        for name in sorted(after):
            password = None if name in rotate else read_secret(root, name)
            fresh = password is None
            if password is None:
                password = secrets.token_urlsafe(24)  # 192 random bits
                write_durable(layout.secret(name), (password + "\n").encode(), SECRET_MODE)
                change.new_secrets.append(name)
            for user in enrollment.identity_users(name):
                kept = old_lines.get(user)
                if kept is not None and not fresh and passwd_matches(kept, password):
                    lines[user] = kept  # unchanged: re-running rewrites the same bytes
                    continue
                if kept is not None and not fresh:
                    change.mismatched.append(user)  # the kept password file wins
                lines[user] = passwd_line(user, password, secrets.token_bytes(SALT_BYTES))
        for user, line in old_lines.items():
            if user not in users and user not in old_users:  # a user added by hand: keep it
                lines[user] = line
                change.foreign_users.append(user)
        write_durable(layout.passwd, passwd_text(lines).encode(), BROKER_FILE_MODE)
        write_durable(layout.acl, acl_text(enrollment, settings.prefix).encode(), BROKER_FILE_MODE)
        write_durable(layout.conf, settings.conf().encode(), BROKER_FILE_MODE)
        write_durable(layout.settings, settings.to_json().encode(), BROKER_FILE_MODE)
        write_durable(layout.enrolled, enrollment.to_json().encode(), BROKER_FILE_MODE)
    return change
