"""Request bounds: the declared body size before reading, the image out of a form or a raw body."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edge_agent.core.web.request_limits import RequestError, body_length, image_from_body, multipart_fields


def form(fields: dict[str, bytes], boundary: str = "xYz") -> tuple[str, bytes]:
    parts = b"".join(
        f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"; filename="{k}.jpg"\r\n'
        "Content-Type: image/jpeg\r\n\r\n".encode()
        + v
        + b"\r\n"
        for k, v in fields.items()
    )
    return f"multipart/form-data; boundary={boundary}", parts + f"--{boundary}--\r\n".encode()


@pytest.mark.parametrize(
    ("given", "status"), [(None, 411), ("", 411), ("ten", 400), ("-1", 400), ("1025", 413)]
)
def test_a_body_size_is_checked_before_reading(given: str, status: int) -> None:
    with pytest.raises(RequestError) as err:
        body_length(given, 1024)
    assert err.value.status == status
    assert "\n" not in err.value.message


def test_a_body_at_the_limit_is_read() -> None:
    assert body_length("1024", 1024) == 1024
    with pytest.raises(RequestError) as err:
        body_length("2000", 1024)
    assert "web.max_body_mb" in err.value.message


def test_the_image_field_of_a_form_is_returned_byte_for_byte() -> None:
    data = b"\xff\xd8 binary \r\n--not-the-boundary \r\n\r\n more \xff\xd9"
    ctype, body = form({"note": b"hello", "image": data})
    assert image_from_body(ctype, body) == data
    assert multipart_fields(body, "xYz")["note"] == b"hello"


def test_a_raw_image_body_is_taken_as_it_is() -> None:
    assert image_from_body("image/jpeg", b"\xff\xd8abc") == b"\xff\xd8abc"


@pytest.mark.parametrize(
    ("ctype", "body", "status", "says"),
    [
        ("text/plain", b"x", 415, "expected multipart/form-data"),
        (None, b"x", 415, "none"),
        ("multipart/form-data", b"--a\r\n\r\nx\r\n--a--", 400, "boundary"),
        ("image/png", b"", 400, "empty"),
    ],
)
def test_what_is_not_an_image_request_is_one_line(ctype: str, body: bytes, status: int, says: str) -> None:
    with pytest.raises(RequestError) as err:
        image_from_body(ctype, body)
    assert err.value.status == status and says in err.value.message


def test_a_form_without_the_image_field_names_the_fields_it_had() -> None:
    ctype, body = form({"picture": b"abc"})
    with pytest.raises(RequestError) as err:
        image_from_body(ctype, body)
    assert err.value.status == 400 and "'image'" in err.value.message and "picture" in err.value.message


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60), st.binary(max_size=400))
def test_any_body_gives_bytes_or_the_request_error(ctype: str, body: bytes) -> None:
    try:
        out = image_from_body(ctype, body)
    except RequestError as exc:
        assert 400 <= exc.status < 500 and "\n" not in exc.message
    else:
        assert isinstance(out, bytes) and out
