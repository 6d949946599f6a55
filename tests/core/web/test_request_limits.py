"""Request bounds: the declared body size before reading, the image out of a form or a raw body."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edge_agent.core.web.request_limits import (
    RequestError,
    body_length,
    header_params,
    image_from_body,
    multipart_fields,
)


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


# ---- issue 36: what mutation testing (core-web-request) found loose -------------------------------
def test_the_error_is_its_one_line_and_names_the_missing_header() -> None:
    with pytest.raises(RequestError) as err:
        body_length(None, 10)
    assert str(err.value) == err.value.message and "Content-Length" in str(err.value)


def test_an_empty_body_is_a_length_of_zero_not_a_negative_one() -> None:
    assert body_length(" 0 ", 10) == 0
    with pytest.raises(RequestError) as err:
        image_from_body("image/jpeg", b"")
    assert err.value.status == 400


def test_header_parameters_keep_equals_signs_and_unquote() -> None:
    """Mail-style boundaries hold '=' ("----=_Part_0_1"); an empty quoted value is empty."""
    assert header_params('Multipart/Form-Data; Boundary="----=_Part_0_1"; x=""') == (
        "multipart/form-data",
        {"boundary": "----=_Part_0_1", "x": ""},
    )
    ctype, body = form({"image": b"abc"}, boundary="----=_Part_0_1")
    assert image_from_body(ctype, body) == b"abc"


def test_a_boundary_up_to_200_characters_is_read_and_a_longer_one_refused() -> None:
    ctype, body = form({"image": b"abc"}, boundary="b" * 200)
    assert image_from_body(ctype, body) == b"abc"
    ctype, body = form({"image": b"abc"}, boundary="b" * 201)
    with pytest.raises(RequestError, match="usable boundary") as err:
        image_from_body(ctype, body)
    assert err.value.status == 400
    with pytest.raises(RequestError, match="without a usable boundary"):
        image_from_body("multipart/form-data", body)  # no boundary parameter at all


def test_the_image_is_read_among_the_first_16_parts_only() -> None:
    many = {f"f{i:02}": b"x" for i in range(15)}
    ctype, body = form({**many, "image": b"16th"})
    assert image_from_body(ctype, body) == b"16th"
    ctype, body = form({**many, "extra": b"x", "image": b"17th"})
    with pytest.raises(RequestError, match="no form field 'image'"):
        image_from_body(ctype, body)


def test_a_part_with_its_disposition_second_and_a_windows_file_name() -> None:
    b = "xYz"
    body = (
        f"--{b}\r\nContent-Type: image/jpeg\r\n"
        'Content-Disposition: form-data; name="image"; filename="C:\\pics\\bus.jpg"\r\n\r\nJPEG\r\n'
        f"--{b}--\r\n"
    ).encode()
    assert image_from_body(f"multipart/form-data; boundary={b}", body) == b"JPEG"


def test_a_part_not_ended_by_a_line_break_keeps_all_its_bytes() -> None:
    body = b'--b\r\nContent-Disposition: form-data; name="image"\r\n\r\nJPEG--b--'
    assert multipart_fields(body, "b") == {"image": b"JPEG"}


def test_broken_forms_are_bad_requests() -> None:
    for body in (b"--b\r\nno blank line\r\n--b--", b"no delimiter at all"):
        with pytest.raises(RequestError) as err:
            multipart_fields(body, "b")
        assert err.value.status == 400


def test_the_fields_a_form_had_are_listed_or_none() -> None:
    ctype, body = form({"picture": b"a", "note": b"b"})
    with pytest.raises(RequestError, match=r"\(fields: note, picture\)"):
        image_from_body(ctype, body)
    nameless = b"--b\r\nContent-Type: text/plain\r\n\r\nx\r\n--b--\r\n"
    with pytest.raises(RequestError, match=r"\(fields: none\)"):
        image_from_body("multipart/form-data; boundary=b", nameless)


def test_an_octet_stream_body_is_the_image_and_no_type_is_named_none() -> None:
    assert image_from_body("application/octet-stream", b"\x89PNG") == b"\x89PNG"
    with pytest.raises(RequestError, match="Content-Type 'none'") as err:
        image_from_body("", b"x")
    assert err.value.status == 415
