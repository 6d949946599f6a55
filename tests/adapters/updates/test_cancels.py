"""The cancel marks in the inbox, on real files (issue 36: adapters/updates/cancels.py had no score):
a mark counts only when its secret opens the request's commitment, a mark not believed is said in
one line and removed, a mark whose package went is dropped, and each refused cancel says why."""

from __future__ import annotations

import json
import logging
import stat
from pathlib import Path

import pytest

from edge_agent.adapters.updates import cancels
from edge_agent.adapters.updates.transfers import Refused
from edge_agent.core.updates import cancel

TID = "0011223344556677"


@pytest.fixture
def inbox(tmp_path: Path) -> Path:
    d = tmp_path / "inbox"
    d.mkdir()
    return d


def request(inbox: Path, committed: object, origin: str = f"mqtt:{TID}") -> dict[str, object]:
    req = {"origin": origin, "cancel_sha256": committed}
    (inbox / f"{TID}.request.json").write_text(json.dumps(req))
    (inbox / f"{TID}.pkg").write_bytes(b"pkg")
    return req


def test_a_mark_is_written_private_and_counts_only_with_the_committed_secret(inbox: Path) -> None:
    secret = cancel.new_secret()
    assert cancels.cancel_mark(inbox, TID, cancel.commitment(secret)) == (False, None)  # no mark
    cancels.mark_cancelled(inbox, TID, secret.encode())
    mark = inbox / f"{TID}.cancel"
    assert mark.read_bytes() == secret.encode() and stat.S_IMODE(mark.stat().st_mode) == 0o600
    assert cancels.cancel_mark(inbox, TID, cancel.commitment(secret)) == (True, None)
    ok, why = cancels.cancel_mark(inbox, TID, cancel.commitment(cancel.new_secret()))
    assert (
        not ok
        and why == f"{mark}: the cancel mark's secret does not open the request's commitment; not believed"
    )


def test_a_damaged_or_unreadable_mark_is_not_believed_and_says_why(inbox: Path) -> None:
    mark = inbox / f"{TID}.cancel"
    mark.write_bytes(b"f" * 63)
    ok, why = cancels.cancel_mark(inbox, TID, cancel.commitment(cancel.new_secret()))
    assert not ok and why == f"{mark}: a damaged cancel mark (63 bytes, not a secret); not believed"
    mark.write_bytes(b"f" * 1000)  # only the head is read
    assert (
        cancels.cancel_mark(inbox, TID, None)[1]
        == f"{mark}: a damaged cancel mark (256 bytes, not a secret); not believed"
    )
    mark.unlink()
    mark.mkdir()
    ok, why = cancels.cancel_mark(inbox, TID, None)
    assert not ok and why == f"{mark}: cannot read the cancel mark: Is a directory; not believed"


def test_an_inbox_package_with_a_believed_mark_is_refused_in_one_line(inbox: Path) -> None:
    secret = cancel.new_secret()
    req = request(inbox, cancel.commitment(secret))
    pkg = inbox / f"{TID}.pkg"
    assert cancels.refused_as_cancelled(inbox, pkg, req) is None  # no mark yet
    cancels.mark_cancelled(inbox, TID, secret.encode())
    assert cancels.refused_as_cancelled(inbox, pkg, req) == (
        f"{TID}.pkg: transfer {TID} was cancelled by its sender before the install: not installed"
    )
    # a package not pushed over MQTT has no transfer to cancel, whatever lies beside it
    assert cancels.refused_as_cancelled(inbox, pkg, {**req, "origin": f"file:{TID}"}) is None
    assert cancels.refused_as_cancelled(inbox, pkg, {**req, "origin": None}) is None
    assert (inbox / f"{TID}.cancel").exists()


@pytest.mark.parametrize("committed", [None, 5, "not the commitment"])
def test_a_mark_not_believed_is_said_once_and_removed(
    inbox: Path, caplog: pytest.LogCaptureFixture, committed: object
) -> None:
    req = request(inbox, committed)
    cancels.mark_cancelled(inbox, TID, cancel.new_secret().encode())
    with caplog.at_level(logging.WARNING, logger="edge_agent.model_update"):
        assert cancels.refused_as_cancelled(inbox, inbox / f"{TID}.pkg", req) is None
    (line,) = [r.getMessage() for r in caplog.records]
    assert line.startswith(f"{inbox / TID}.cancel: ") and line.endswith("; not believed")
    assert not (inbox / f"{TID}.cancel").exists() and (inbox / f"{TID}.pkg").exists()


def test_only_the_marks_whose_package_went_are_dropped(inbox: Path) -> None:
    for tid in ("aaaa", "bbbb"):
        cancels.mark_cancelled(inbox, tid, b"x")
    (inbox / "aaaa.pkg").write_bytes(b"pkg")
    (inbox / "cccc.pkg").write_bytes(b"pkg")
    cancels.drop_marks(inbox)
    assert sorted(p.name for p in inbox.iterdir()) == ["aaaa.cancel", "aaaa.pkg", "cccc.pkg"]


def test_the_inbox_commitment_is_the_requests_string_or_none(inbox: Path) -> None:
    assert cancels.inbox_commitment(inbox, TID) is None  # no request
    c = cancel.commitment(cancel.new_secret())
    request(inbox, c)
    assert cancels.inbox_commitment(inbox, TID) == c
    for body in ("{half", "[1, 2]", json.dumps({"cancel_sha256": 7}), json.dumps({"origin": "mqtt:x"})):
        (inbox / f"{TID}.request.json").write_text(body)
        assert cancels.inbox_commitment(inbox, TID) is None, body


def test_a_cancel_is_refused_unless_its_body_is_the_committed_secret() -> None:
    secret = cancel.new_secret()
    cancels.check_cancel(TID, secret.encode(), cancel.commitment(secret))  # accepted: no exception
    cases = [
        (b"nonsense", cancel.commitment(secret), "a cancel's body must be its transfer's secret"),
        (secret.encode(), None, "no such transfer waiting here, or its begin named no secret"),
        (
            secret.encode(),
            cancel.commitment(cancel.new_secret()),
            "the secret does not match the one its begin committed to",
        ),
    ]
    for body, committed, says in cases:
        with pytest.raises(Refused) as ei:
            cancels.check_cancel(TID, body, committed)
        assert str(ei.value).startswith(f"cancel of transfer {TID}: {says}"), str(ei.value)
