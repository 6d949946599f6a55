"""Image headers read before any decode (core.image_header): every form's exact field layout and
the boundaries a crafted file would sit on. A size read wrong here is a decode the pixel limit
does not stop (or a good image refused)."""

from __future__ import annotations

import struct

import cv2
import numpy as np
import pytest

from edge_agent.core.vision.image_header import (
    DEFAULT_MAX_PIXELS,
    HeaderError,
    image_dimensions,
    jpeg_size,
    pixel_problem,
)


# ---- JPEG -------------------------------------------------------------------------------------
def sof(marker: int, w: int, h: int) -> bytes:
    # length 17: precision, height, width, 3 components of 3 bytes
    return bytes([0xFF, marker]) + struct.pack(">HBHHB", 17, 8, h, w, 3) + b"\x01\x22\x00" * 3


def seg(marker: int, payload: bytes = b"") -> bytes:
    return bytes([0xFF, marker]) + struct.pack(">H", 2 + len(payload)) + payload


SOI = b"\xff\xd8"
APP0 = seg(0xE0, b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00")
SOF_MARKERS = [0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF]


@pytest.mark.parametrize("marker", SOF_MARKERS)
def test_every_sof_form_gives_width_then_height(marker: int) -> None:
    # baseline, progressive, lossless, arithmetic...: libjpeg takes the size from any of them
    assert jpeg_size(SOI + APP0 + sof(marker, 640, 480) + b"\xff\xd9") == (640, 480)


@pytest.mark.parametrize("marker", [0xC4, 0xC8, 0xCC, 0xDB, 0xDD, 0xE1, 0xFE])
def test_tables_and_app_segments_are_skipped_not_read_as_a_size(marker: int) -> None:
    # DHT (C4), JPG (C8) and DAC (CC) sit among the SOF codes but are not frame headers
    decoy = seg(marker, struct.pack(">BHH", 8, 9999, 9999) + b"\x00" * 6)
    assert jpeg_size(SOI + decoy + sof(0xC0, 32, 16)) == (32, 16)


def test_a_real_encoder_output_is_measured() -> None:
    ok, buf = cv2.imencode(".jpg", np.zeros((37, 53, 3), np.uint8))
    assert ok and jpeg_size(buf.tobytes()) == (53, 37)


@pytest.mark.parametrize(
    "between",
    [
        b"\xff\xff\xff",  # fill bytes before a marker
        b"\xff\x00",  # a stuffed zero
        b"\xff\x01",  # TEM
        b"\xff\xd8",  # a second SOI
        b"\xff\xd0",  # RST0
        b"\xff\xd7",  # RST7
        b"junk",  # garbage: resync at the next 0xFF
        seg(0xE1),  # an empty segment (length 2 is legal)
    ],
)
def test_markers_without_a_length_and_garbage_are_stepped_over(between: bytes) -> None:
    assert jpeg_size(SOI + APP0 + between + sof(0xC2, 4000, 3000)) == (4000, 3000)


@pytest.mark.parametrize(
    "data",
    [
        SOI,  # nothing after SOI
        SOI + b"\xff",  # one byte of a marker
        SOI + APP0 + b"garbage without a marker",
        SOI + APP0 + b"\xff\xda" + sof(0xC0, 640, 480),  # start of scan before any frame header
        SOI + APP0 + b"\xff\xd9" + sof(0xC0, 640, 480),  # end of image before it
        SOI + b"\xff\xe0\x00",  # a length cut in half
        SOI + sof(0xC0, 640, 480)[:8],  # a frame header cut before its width
        SOI + sof(0xC0, 0, 480),  # width 0 (the DNL form): not a size
        SOI + sof(0xC0, 640, 0),  # height 0
        SOI + b"\xff\xe0\x00\x01" + sof(0xC0, 640, 480),  # "bogus marker length" 1: libjpeg stops
        SOI + b"\xff\xe0\x00\x00" + sof(0xC0, 640, 480),  # length 0
        b"\xff\xd9" + sof(0xC0, 640, 480),  # no SOI
    ],
)
def test_no_size_is_guessed_where_libjpeg_would_not_find_one(data: bytes) -> None:
    assert jpeg_size(data) is None


def test_the_frame_header_ending_exactly_at_the_last_byte_is_read() -> None:
    # SOF needs 9 bytes from its marker; a part cut right after the width is still measurable
    data = SOI + sof(0xC0, 300, 200)[:9]
    assert jpeg_size(data) == (300, 200)
    assert jpeg_size(data[:-1]) is None


def test_the_segment_length_jumps_over_a_payload_that_looks_like_a_frame_header() -> None:
    # the SOF inside an APP1 payload must be skipped by the length, not read
    decoy = seg(0xE1, sof(0xC0, 9999, 9999))
    assert jpeg_size(SOI + decoy + sof(0xC0, 64, 48)) == (64, 48)


def test_a_segment_over_32_kib_is_skipped_by_its_unsigned_length() -> None:
    # EXIF with a thumbnail or an ICC profile easily exceeds 32 KiB: its length is unsigned
    big = seg(0xE2, b"ICC_PROFILE\x00" + b"\x00" * 40_000)
    assert jpeg_size(SOI + APP0 + big + sof(0xC0, 1920, 1080)) == (1920, 1080)


def test_a_frame_header_after_the_end_of_image_is_not_read() -> None:
    # EOI has no length: the two bytes after it are not one, whatever they say
    assert jpeg_size(SOI + APP0 + b"\xff\xd9\x00\x02" + sof(0xC0, 640, 480)) is None


def test_image_dimensions_reads_jpeg_through_the_same_parser() -> None:
    assert image_dimensions(SOI + APP0 + sof(0xC0, 640, 480)) == (640, 480)
    assert image_dimensions(SOI + APP0) is None


# ---- PNG / GIF --------------------------------------------------------------------------------
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def png(w: int, h: int) -> bytes:
    return PNG_MAGIC + struct.pack(">I", 13) + b"IHDR" + struct.pack(">II", w, h)


def test_png_width_and_height_are_big_endian_in_that_order() -> None:
    assert image_dimensions(png(20000, 300)) == (20000, 300)
    assert image_dimensions(png(2**32 - 1, 1)) == (2**32 - 1, 1)


def test_png_needs_ihdr_first_and_all_of_it() -> None:
    assert image_dimensions(png(5, 7)) == (5, 7)  # exactly 24 bytes
    with pytest.raises(HeaderError, match=r"^PNG without an IHDR chunk first$"):
        image_dimensions(png(5, 7)[:23])
    with pytest.raises(HeaderError, match="IHDR"):
        image_dimensions(png(5, 7).replace(b"IHDR", b"IDAT"))


@pytest.mark.parametrize("magic", [b"GIF87a", b"GIF89a"])
def test_gif_sizes_are_little_endian_width_first(magic: bytes) -> None:
    data = magic + struct.pack("<HH", 513, 2)
    assert image_dimensions(data) == (513, 2)  # exactly 10 bytes
    with pytest.raises(HeaderError, match=r"^GIF header cut short$"):
        image_dimensions(data[:9])


# ---- BMP --------------------------------------------------------------------------------------
def bmp(w: int, h: int, header_size: int = 40) -> bytes:
    if header_size == 12:
        info = struct.pack("<IHHHH", 12, w, h, 1, 24)
    else:
        info = struct.pack("<Iii", header_size, w, h) + b"\0" * (header_size - 12)
    return b"BM" + struct.pack("<IHHI", 14 + len(info), 0, 0, 14 + len(info)) + info


@pytest.mark.parametrize("size", [16, 40, 52, 56, 64, 108, 124])
def test_every_windows_and_os2_v2_header_size_is_read_signed(size: int) -> None:
    assert image_dimensions(bmp(640, -480, size)) == (640, 480)
    assert image_dimensions(bmp(1, 1, size)) == (1, 1)


@pytest.mark.parametrize("size", [0, 11, 13, 15, 17, 39, 41, 63, 65, 107, 123, 125, 2**32 - 1])
def test_any_other_bmp_header_size_is_refused_naming_it(size: int) -> None:
    data = b"BM" + b"\0" * 12 + struct.pack("<I", size) + struct.pack("<ii", 640, 480)
    with pytest.raises(HeaderError, match=f"BMP header size {size} is not one of 12, 16, 40"):
        image_dimensions(data)


def test_a_bmp_header_is_read_from_26_bytes_and_refused_below() -> None:
    data = bmp(640, 480)[:26]
    assert image_dimensions(data) == (640, 480)
    with pytest.raises(HeaderError, match=r"BMP header cut short \(25 bytes\)"):
        image_dimensions(data[:25])


def test_os2_core_header_sizes_are_unsigned_16_bit() -> None:
    # 0xFFFF read as signed would be -1; read as the Windows form it would be 1 x 1.5 M pixels
    assert image_dimensions(bmp(65535, 65535, 12)) == (65535, 65535)
    assert image_dimensions(bmp(1, 2, 12)) == (1, 2)


@pytest.mark.parametrize(
    ("w", "h", "ok"),
    [(1, 1, True), (0, 1, False), (-1, 1, False), (1, 0, False), (1, -1, True), (1, -(2**31), False)],
)
def test_bmp_size_boundaries(w: int, h: int, ok: bool) -> None:
    if ok:
        assert image_dimensions(bmp(w, h)) == (w, abs(h))
    else:
        with pytest.raises(HeaderError, match=rf"impossible size {w}x{h}$"):
            image_dimensions(bmp(w, h))


# ---- WebP -------------------------------------------------------------------------------------
def riff(kind: bytes, payload: bytes) -> bytes:
    return (
        b"RIFF"
        + struct.pack("<I", 4 + 8 + len(payload))
        + b"WEBP"
        + kind
        + struct.pack("<I", len(payload))
        + payload
    )


def test_webp_extended_header_stores_sizes_minus_one_in_24_bits() -> None:
    # flags (4 bytes), then width-1 and height-1 as 24-bit little-endian
    data = riff(b"VP8X", b"\0" * 4 + (16383).to_bytes(3, "little") + (0xFFFFFF).to_bytes(3, "little"))
    assert len(data) == 30
    assert image_dimensions(data) == (16384, 0x1000000)
    # little-endian, and only the 3 bytes: the next chunk follows right after in a real file
    data = riff(b"VP8X", b"\0" * 4 + (639).to_bytes(3, "little") + (479).to_bytes(3, "little")) + b"ICCP"
    assert image_dimensions(data) == (640, 480)
    with pytest.raises(HeaderError, match=r"WebP header of kind b'VP8X' not readable \(29 bytes\)"):
        image_dimensions(data[:29])


def test_webp_lossy_sizes_are_14_bits_with_the_scale_bits_masked() -> None:
    # frame tag (3), start code (3), then width and height: top 2 bits are the upscale factor
    payload = b"\0\0\0\x9d\x01\x2a" + struct.pack("<HH", 0xC000 | 1000, 0x4000 | 700)
    data = riff(b"VP8 ", payload)
    assert len(data) == 30
    assert image_dimensions(data) == (1000, 700)
    with pytest.raises(HeaderError, match="VP8 "):
        image_dimensions(data[:29])


def test_webp_lossless_packs_both_sizes_minus_one_in_14_bits() -> None:
    bits = (1234 - 1) | ((567 - 1) << 14) | (1 << 28)  # bit 28: alpha, not part of the height
    data = riff(b"VP8L", b"\x2f" + bits.to_bytes(4, "little"))
    assert len(data) == 25
    assert image_dimensions(data) == (1234, 567)
    with pytest.raises(HeaderError, match="VP8L"):
        image_dimensions(data[:24])


@pytest.mark.parametrize(("lossless", "shape"), [(False, (37, 53)), (True, (300, 17))])
def test_webp_from_the_encoder_is_measured(lossless: bool, shape: tuple[int, int]) -> None:
    q = 101 if lossless else 80  # OpenCV: quality above 100 selects lossless (VP8L)
    ok, buf = cv2.imencode(".webp", np.zeros((*shape, 3), np.uint8), [cv2.IMWRITE_WEBP_QUALITY, q])
    assert ok
    data = buf.tobytes()
    assert data[12:16] == (b"VP8L" if lossless else b"VP8 ")
    assert image_dimensions(data) == (shape[1], shape[0])


def test_a_webp_of_an_unknown_kind_is_refused() -> None:
    with pytest.raises(HeaderError, match="WebP header of kind b'VP9 '"):
        image_dimensions(riff(b"VP9 ", b"\0" * 20))


@pytest.mark.parametrize(
    "data", [b"", b"RIFF\0\0\0\0WAVEfmt ", b"II*\0", b"P6\n3 2\n255\n", b"B", b"GIF90a1234"]
)
def test_unrecognised_headers_are_left_to_pillow(data: bytes) -> None:
    assert image_dimensions(data) is None


# ---- the pixel limit --------------------------------------------------------------------------
def test_the_limit_is_inclusive_and_the_message_names_size_limit_and_key() -> None:
    assert DEFAULT_MAX_PIXELS == 40_000_000
    assert pixel_problem((8000, 5000), 40_000_000) is None  # exactly the limit passes
    assert (
        pixel_problem((8001, 5000), 40_000_000)
        == "8001x5000 pixels (40 MP) exceeds the limit of 40 MP (max_pixels)"
    )
    assert (
        pixel_problem((2000, 1000), 1_500_000, "camera.max_pixels")
        == "2000x1000 pixels (2 MP) exceeds the limit of 1.5 MP (camera.max_pixels)"
    )
    # below 10 MP three significant digits; from 10 MP whole megapixels
    assert pixel_problem((4000, 3000), 9_990_000) == (
        "4000x3000 pixels (12 MP) exceeds the limit of 9.99 MP (max_pixels)"
    )
    assert pixel_problem((4200, 3000), 10_000_000) == (
        "4200x3000 pixels (13 MP) exceeds the limit of 10 MP (max_pixels)"  # 12.6: whole MP
    )
    # the unit is 10^6 exactly: 12.500010 MP rounds up, 1.235001 MP to 1.24
    assert pixel_problem((6250005, 2), 10_000_000) == (
        "6250005x2 pixels (13 MP) exceeds the limit of 10 MP (max_pixels)"
    )
    assert pixel_problem((1235001, 1), 1_000_000) == (
        "1235001x1 pixels (1.24 MP) exceeds the limit of 1 MP (max_pixels)"
    )
    assert pixel_problem((20000, 20000), 10_000_000) == (
        "20000x20000 pixels (400 MP) exceeds the limit of 10 MP (max_pixels)"
    )
