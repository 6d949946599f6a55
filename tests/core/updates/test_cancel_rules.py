"""core/updates/cancel.py without a receiver: what a cancel's body may be. Its refusal is the line
a device reports (adapters/updates/cancels.py: "cancel of transfer <id>: <this>"), so garbage of
any kind is refused with it, never with a decoding error."""

from __future__ import annotations

import pytest

from edge_agent.core.updates import cancel

WHY = r"^a cancel's body must be its transfer's secret: 64 lowercase hex digits$"


def test_the_secret_is_read_with_whitespace_around_it_up_to_200_bytes() -> None:
    s = cancel.new_secret()
    assert cancel.parse_secret(s.encode()) == s
    assert cancel.parse_secret(f"  {s}\n".encode()) == s
    exactly = (s + " " * (200 - len(s))).encode()
    assert len(exactly) == 200 and cancel.parse_secret(exactly) == s
    with pytest.raises(ValueError, match=WHY):
        cancel.parse_secret(exactly + b" ")  # 201 bytes: refused before it is read


@pytest.mark.parametrize(
    "body",
    [b"\xff" * 64, "é".encode() * 32, b"", b"0" * 63, b"g" * 64, b"A" * 64, b"0" * 65, b"\x00" * 300],
)
def test_anything_else_is_refused_in_the_one_line_the_device_reports(body: bytes) -> None:
    with pytest.raises(ValueError, match=WHY) as exc:
        cancel.parse_secret(body)
    assert type(exc.value) is ValueError  # not a UnicodeDecodeError's text


def test_a_secret_opens_only_the_commitment_made_for_it() -> None:
    s = cancel.new_secret()
    assert len(s) == 2 * cancel.SECRET_BYTES and cancel.is_sha256_hex(s) and s != cancel.new_secret()
    c = cancel.commitment(s)
    assert cancel.is_sha256_hex(c) and cancel.honours(s, c)
    assert not cancel.honours(s, c.upper()) and not cancel.honours(s, None)
    assert not cancel.is_sha256_hex(c + "\n") and not cancel.is_sha256_hex(c[:-1])
