"""The multipart MJPEG parser (core.mjpeg) on the exact bytes field cameras send: boundary forms,
header separators, Content-Length handling at its limits, and the reduced decode scale."""

from __future__ import annotations

import pytest

from edge_agent.core.camera.mjpeg_parts import (
    MAX_PART_BYTES,
    MultipartError,
    MultipartParser,
    Part,
    boundary_from_content_type,
    is_complete_jpeg,
    reduced_scale,
)

JPG = b"\xff\xd8" + bytes(range(256)) * 4 + b"\xff\xd9"


def part(body: bytes, boundary: bytes = b"--bd", length: object = None, sep: bytes = b"\r\n") -> bytes:
    head = boundary + sep + b"Content-Type: image/jpeg" + sep
    if length is not None:
        head += b"Content-Length: " + str(length).encode() + sep
    return head + sep + body + b"\r\n"


# ---- the boundary ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("header", "boundary"),
    [
        ("multipart/x-mixed-replace;boundary=abc", "abc"),
        ("Multipart/X-Mixed-Replace; BOUNDARY=abc", "abc"),
        ("  multipart/x-mixed-replace ;  charset=x ; boundary = abc ", "abc"),
        ('multipart/x-mixed-replace; boundary="--x y"', "--x y"),
        ("multipart/x-mixed-replace; boundary=a=b", "a=b"),
        ("multipart/x-mixed-replace; boundary=abc; charset=x", "abc"),  # not only the last param
        ("multipart/x-mixed-replace; boundary=XframeX", "XframeX"),  # only quotes are stripped
        ("multipart/x-mixed-replace; boundary=", None),
        ("multipart/x-mixed-replace; boundary=  ", None),
        ("multipart/x-mixed-replace; boundaryx=abc", None),
        ("multipart/x-mixed-replace; xboundary=abc", None),
        ("image/jpeg; boundary=abc", None),
        ("text/multipart; boundary=abc", None),
        ("", None),
    ],
)
def test_the_boundary_comes_only_from_a_multipart_header(header: str, boundary: str | None) -> None:
    assert boundary_from_content_type(header) == boundary


# ---- splitting -------------------------------------------------------------------------------
def test_a_part_is_returned_with_its_headers_lower_cased_and_trimmed() -> None:
    data = (
        b"--bd\r\nContent-Type:  image/jpeg \r\nX-Timestamp: 12.5\r\nnot a header\r\n\r\n"
        + JPG
        + b"\r\n--bd\r\n"
    )
    (got,) = MultipartParser("bd").feed(data)
    assert got == Part(JPG, {"content-type": "image/jpeg", "x-timestamp": "12.5"}, False)


def test_a_header_value_keeps_its_colons() -> None:
    data = b"--bd\r\nX-Time: 12:30:01\r\n\r\n" + JPG + b"\r\n--bd\r\n"
    (got,) = MultipartParser("bd").feed(data)
    assert got.headers == {"x-time": "12:30:01"}


@pytest.mark.parametrize("length", [None, len(JPG)])
def test_headers_ended_by_bare_newlines_are_understood(length: int | None) -> None:
    # some cameras (and mjpg-streamer forks) send LF only
    data = part(JPG, length=length, sep=b"\n") + part(JPG, length=length, sep=b"\n") + b"--bd\n"
    got = MultipartParser("bd").feed(data)
    assert [p.body for p in got] == [JPG, JPG]
    assert got[0].headers["content-type"] == "image/jpeg"


def test_the_first_blank_line_ends_the_headers_whichever_form_it_has() -> None:
    # CRLF headers whose body happens to contain "\n\n": the CRLF blank line comes first
    body = b"\xff\xd8\n\nxx\xff\xd9"
    data = b"--bd\r\nContent-Length: %d\r\n\r\n" % len(body) + body + b"\r\n"
    (got,) = MultipartParser("bd").feed(data)
    assert got.body == body and got.headers == {"content-length": str(len(body))}
    # and LF headers whose body contains "\r\n\r\n"
    body2 = b"\xff\xd8\r\n\r\nxx\xff\xd9"
    data2 = b"--bd\nContent-Length: %d\n\n" % len(body2) + body2 + b"\r\n"
    (got2,) = MultipartParser("bd").feed(data2)
    assert got2.body == body2 and got2.headers == {"content-length": str(len(body2))}


def test_the_earliest_delimiter_wins_when_the_boundary_carries_its_dashes() -> None:
    # boundary "--bd": the delimiters are "----bd" (RFC) and "--bd" (what cameras send)
    p = MultipartParser("--bd")
    got = p.feed(b"----bd\r\n\r\n" + JPG + b"\r\n--bd\r\n\r\n" + JPG + b"\r\n----bd\r\n")
    assert [g.body for g in got] == [JPG, JPG]


def test_a_boundary_without_dashes_matches_only_with_them() -> None:
    # "bd" alone in a body is not a delimiter
    body = b"\xff\xd8 bd bd \xff\xd9"
    got = MultipartParser("bd").feed(b"--bd\r\n\r\n" + body + b"\r\n--bd\r\n")
    assert [g.body for g in got] == [body]


def test_a_delimiter_split_across_reads_is_still_found() -> None:
    p = MultipartParser("bd")
    got = p.feed(b"garbage before the stream " * 10 + b"-")
    assert got == [] and not p.in_part
    got = p.feed(b"-bd\r\nContent-Length: %d\r\n\r\n" % len(JPG))
    assert got == [] and p.in_part
    got = p.feed(JPG + b"\r\n")
    assert [g.body for g in got] == [JPG] and not p.in_part
    assert p.bytes_seen == 10 * 26 + 1 + len(b"-bd\r\nContent-Length: %d\r\n\r\n" % len(JPG)) + len(JPG) + 2


def test_garbage_before_a_delimiter_is_not_kept() -> None:
    p = MultipartParser("bd", max_part=100)
    for _ in range(50):  # 5000 bytes of noise in 100-byte reads: never over the 100-byte bound
        assert p.feed(b"x" * 100) == []
    assert len(p._buf) <= len(b"--bd")
    assert [g.body for g in p.feed(b"--bd\r\n\r\nabc\r\n--bd")] == [b"abc"]


def test_only_the_crlf_before_the_delimiter_is_taken_from_the_body() -> None:
    got = MultipartParser("bd").feed(b"--bd\r\n\r\nab\n\r\n--bd\r\n\r\nab\r\r\n--bd\r\n\r\nab\r\n\r\n--bd")
    assert [g.body for g in got] == [b"ab\n", b"ab\r", b"ab\r\n"]


# ---- Content-Length -----------------------------------------------------------------------------
def test_content_length_bytes_make_the_part_even_if_a_delimiter_follows_later() -> None:
    p = MultipartParser("bd")
    got = p.feed(part(JPG, length=len(JPG))[:-2])  # no delimiter after it yet
    assert [(g.body, g.truncated) for g in got] == [(JPG, False)]


def test_a_part_waits_for_its_last_byte() -> None:
    p = MultipartParser("bd")
    data = part(JPG, length=len(JPG))
    assert p.feed(data[: data.index(JPG) + len(JPG) - 1]) == []
    assert p.in_part
    assert [g.body for g in p.feed(data[data.index(JPG) + len(JPG) - 1 :])] == [JPG]


def test_a_delimiter_right_after_the_body_is_not_a_cut() -> None:
    # the delimiter at exactly Content-Length bytes: a whole part, not a truncated one
    body = b"\xff\xd8xyz\xff\xd9"
    data = b"--bd\r\nContent-Length: %d\r\n\r\n" % len(body) + body + b"--bd\r\n\r\n"
    (got,) = MultipartParser("bd").feed(data)
    assert got == Part(body, {"content-length": str(len(body))}, False)


def test_a_delimiter_one_byte_early_is_a_cut() -> None:
    body = b"\xff\xd8xyz\xff\xd9"
    data = b"--bd\r\nContent-Length: %d\r\n\r\n" % (len(body) + 1) + body + b"--bd\r\n\r\n"
    got = MultipartParser("bd").feed(data)
    assert [(g.body, g.truncated) for g in got] == [(body, True)]
    assert got[0].headers == {"content-length": str(len(body) + 1)}  # a cut part keeps its headers


@pytest.mark.parametrize("raw", ["-5", "5.0", "0x10", " ", "\u00b2", "\u0665", "five"])
def test_a_content_length_that_is_not_ascii_digits_is_ignored(raw: str) -> None:
    # then the part ends at the next delimiter, as without the header
    data = b"--bd\r\nContent-Length: " + raw.encode("latin-1", "replace") + b"\r\n\r\n" + JPG + b"\r\n--bd"
    got = MultipartParser("bd").feed(data)
    assert [(g.body, g.truncated) for g in got] == [(JPG, False)]


def test_content_length_up_to_the_limit_is_taken_and_above_it_refused() -> None:
    body = b"x" * 100
    (got,) = MultipartParser("bd", max_part=100).feed(part(body, length=100))
    assert got.body == body
    with pytest.raises(MultipartError, match=r"^part Content-Length 101 exceeds 100 bytes$"):
        MultipartParser("bd", max_part=100).feed(part(body, length=101))


def test_a_twelve_digit_length_is_compared_and_a_longer_one_refused_without_int() -> None:
    p = MultipartParser("bd")
    with pytest.raises(
        MultipartError, match=f"^part Content-Length 999999999999 exceeds {MAX_PART_BYTES} bytes$"
    ):
        p.feed(part(b"x", length="999999999999"))
    # 13 digits are refused as "too large" whatever their value, even 0000000000001; the error
    # names what the camera sent (cut at 20 digits)
    with pytest.raises(
        MultipartError, match=f"^part Content-Length 0000000000001 exceeds {MAX_PART_BYTES} bytes$"
    ):
        MultipartParser("bd").feed(part(b"x", length="0000000000001"))
    with pytest.raises(MultipartError, match=f"^part Content-Length {'9' * 20}[.][.][.] exceeds"):
        MultipartParser("bd").feed(part(b"x", length="9" * 5000))
    with pytest.raises(MultipartError, match=f"^part Content-Length {'9' * 20} exceeds"):  # 20: whole
        MultipartParser("bd").feed(part(b"x", length="9" * 20))
    with pytest.raises(MultipartError, match=f"^part Content-Length {'9' * 20}[.][.][.] exceeds"):
        MultipartParser("bd").feed(part(b"x", length="9" * 21))
    # 12 digits of a small value are just that value
    (got,) = MultipartParser("bd").feed(part(b"x", length="000000000001"))
    assert got.body == b"x"


def test_the_default_part_limit_is_16_mib() -> None:
    assert MAX_PART_BYTES == 16 * 1024 * 1024
    with pytest.raises(MultipartError, match="16777217"):
        MultipartParser("bd").feed(part(b"x", length=MAX_PART_BYTES + 1))


def test_a_part_completed_by_one_big_read_is_still_bounded() -> None:
    # no Content-Length: the whole 101-byte body and its delimiter come in one read
    with pytest.raises(MultipartError, match=r"^part of 101 bytes exceeds 100 bytes$"):
        MultipartParser("bd", max_part=100).feed(b"--bd\r\n\r\n" + b"x" * 101 + b"--bd")
    (got,) = MultipartParser("bd", max_part=100).feed(b"--bd\r\n\r\n" + b"x" * 100 + b"--bd")
    assert len(got.body) == 100


def test_the_buffer_limit_is_inclusive() -> None:
    p = MultipartParser("bd", max_part=100)
    p.feed(b"--bd\r\n\r\n")
    p.feed(b"x" * 100)  # 100 bytes waiting for a delimiter: allowed
    with pytest.raises(MultipartError, match=r"^no part boundary within 100 bytes$"):
        p.feed(b"x")


# ---- JPEG completeness and the decode scale -----------------------------------------------------
def test_a_preamble_with_blank_lines_before_the_first_boundary_is_skipped() -> None:
    # RFC 2046 allows a preamble; servers often start with a bare CRLF CRLF
    data = b"\r\n\r\nthis is a preamble\n\n--bd\r\nContent-Length: 3\r\n\r\nabc\r\n--bd"
    (got,) = MultipartParser("bd").feed(data)
    assert got == Part(b"abc", {"content-length": "3"}, False)


@pytest.mark.parametrize("boundary", ["bd", "--bd"])
def test_an_empty_part_is_returned_and_the_next_one_follows(boundary: str) -> None:
    # the delimiter right after the headers: an empty body, not a wait for more bytes
    d = b"--" + boundary.encode()
    data = d + b"\r\n\r\n" + d + b"\r\n\r\n" + JPG + b"\r\n" + d
    got = MultipartParser(boundary).feed(data)
    assert [(g.body, g.truncated) for g in got] == [(b"", False), (JPG, False)]


def test_a_part_given_up_before_its_first_byte_is_an_empty_cut_part() -> None:
    data = b"--bd\r\nContent-Length: 1000\r\n\r\n--bd\r\nContent-Length: %d\r\n\r\n" % len(JPG) + JPG
    got = MultipartParser("bd").feed(data)
    assert [(g.body, g.truncated) for g in got] == [(b"", True), (JPG, False)]


@pytest.mark.parametrize(
    ("data", "complete"),
    [
        (JPG, True),
        (JPG + b"\r\n", True),
        (JPG + b"\x00\x00\n", True),
        (b"\xff\xd8\xff\xd9", True),  # the shortest: SOI + EOI
        (b"\xff\xd8\xd9", False),
        (JPG[:-1], False),
        (JPG + b" ", False),
        (b"\x00" + JPG, False),
        (b"", False),
    ],
)
def test_a_complete_jpeg_starts_with_soi_and_ends_with_eoi(data: bytes, complete: bool) -> None:
    assert is_complete_jpeg(data) is complete


def test_any_trailing_byte_but_padding_makes_a_jpeg_incomplete() -> None:
    for v in range(256):
        assert is_complete_jpeg(JPG + bytes([v])) is (v in b"\r\n\x00"), v


@pytest.mark.parametrize(
    ("size", "target", "d"),
    [
        ((1280, 720), (640, 640), 2),  # 640x360: exactly the letterbox
        ((1282, 720), (640, 640), 2),
        ((1279, 720), (640, 640), 1),  # 639 px wide at 1/2: one short
        ((720, 1280), (640, 640), 2),  # portrait: the height limits
        ((720, 1279), (640, 640), 1),
        ((2560, 1440), (640, 640), 4),
        ((2559, 1440), (640, 640), 2),
        ((5120, 2880), (640, 640), 8),
        ((5119, 2880), (640, 640), 4),
        ((1280, 1280), (320, 640), 4),  # a non-square model: the smaller scale decides
        ((1280, 721), (640, 640), 1),  # width fits at 1/2, height 360 < 360.5: both must fit
        ((721, 1280), (640, 640), 1),  # and the other way round
        ((640, 480), (640, 640), 1),  # smaller than the model: never reduced
        ((1280, 720), None, 1),
    ],
)
def test_reduced_scale_is_the_largest_that_keeps_the_letterbox_size(
    size: tuple[int, int], target: tuple[int, int] | None, d: int
) -> None:
    assert reduced_scale(size, target) == d
