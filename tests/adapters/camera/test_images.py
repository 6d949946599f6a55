"""Image files in (``infer``, ``quantize``, the update gate, the folder camera): the pixel cap from
the header before any decode, including TIFF headers only Pillow reads; one line per bad file; and
which files a folder or a glob stands for."""

from __future__ import annotations

import struct
from pathlib import Path

import cv2
import numpy as np
import pytest

from edge_agent.adapters.camera.images import check_pixels, expand_inputs, read_image
from edge_agent.errors import ImageError


def png(w: int, h: int, bgr: tuple[int, int, int] = (0, 0, 255)) -> bytes:
    img = np.zeros((h, w, 3), np.uint8)
    img[:] = bgr
    ok, buf = cv2.imencode(".png", img)
    assert ok
    return buf.tobytes()


def tiff_header(w: int, h: int) -> bytes:
    """A little-endian TIFF whose first IFD claims w x h 8-bit gray pixels (one strip, no data)."""
    tags = [(256, 4, w), (257, 4, h), (258, 3, 8), (259, 3, 1), (262, 3, 1), (273, 4, 200), (277, 3, 1)]
    tags += [(278, 4, h), (279, 4, w * h)]
    ifd = struct.pack("<H", len(tags))
    for tag, typ, val in tags:
        ifd += (
            struct.pack("<HHII", tag, typ, 1, val) if typ == 4 else struct.pack("<HHIHH", tag, typ, 1, val, 0)
        )
    return b"II*\x00" + struct.pack("<I", 8) + ifd + struct.pack("<I", 0) + b"\x00" * 64


def test_check_pixels_returns_the_header_size_and_honours_the_cap_given() -> None:
    data = png(40, 30)
    assert check_pixels(data, "a.png") == (40, 30)
    assert check_pixels(data, "a.png", max_pixels=1200) == (40, 30)  # at the cap: allowed
    with pytest.raises(ImageError) as e:
        check_pixels(data, "a.png", max_pixels=1199)
    assert (
        str(e.value)
        == "a.png: 40x30 pixels (0.0012 MP) exceeds the limit of 0.0012 MP (max_pixels); not decoded"
    )


def test_a_tiff_size_comes_from_pillow_and_is_capped_too() -> None:
    assert check_pixels(tiff_header(300, 200), "t.tif") == (300, 200)
    with pytest.raises(ImageError) as e:
        check_pixels(tiff_header(300, 200), "t.tif", max_pixels=59_999)
    assert str(e.value).startswith("t.tif: 300x200 pixels (") and str(e.value).endswith("; not decoded")
    # 12000 x 12000: past Pillow's warning, under its bomb error: our 40 MP default refuses it
    with pytest.raises(ImageError) as e:
        check_pixels(tiff_header(12000, 12000), "big.tif")
    assert str(e.value).startswith("big.tif: 12000x12000 pixels (")


def test_a_tiff_header_pillow_calls_a_bomb_is_refused_with_pillows_reason() -> None:
    with pytest.raises(ImageError) as e:
        check_pixels(tiff_header(20000, 20000), "bomb.tif", max_pixels=10**12)
    assert str(e.value).startswith("bomb.tif: Image size (400000000 pixels) exceeds limit of ")
    assert str(e.value).endswith("; not decoded")


def test_bytes_no_parser_can_size_are_refused_in_one_line() -> None:
    with pytest.raises(ImageError) as e:
        check_pixels(b"plain text, no image at all", "x.jpg")
    assert str(e.value) == "x.jpg: not a decodable image (27 bytes), expected JPEG/PNG/WebP/BMP/TIFF"


def test_a_header_cut_short_is_refused_before_decoding() -> None:
    with pytest.raises(ImageError) as e:
        check_pixels(png(8, 8)[:20], "cut.png")
    assert str(e.value).startswith("cut.png: ") and str(e.value).endswith("; not decoded")


def test_read_image_decodes_bgr(tmp_path: Path) -> None:
    f = tmp_path / "red.png"
    f.write_bytes(png(6, 4, (0, 0, 255)))
    img = read_image(f)
    assert img.shape == (4, 6, 3) and img.dtype == np.uint8 and img[0, 0].tolist() == [0, 0, 255]
    assert read_image(str(f)).shape == (4, 6, 3)


def test_read_image_uses_the_cap_it_is_given(tmp_path: Path) -> None:
    f = tmp_path / "a.png"
    f.write_bytes(png(40, 30))
    with pytest.raises(ImageError, match=r"a\.png: 40x30 pixels"):
        read_image(f, max_pixels=1000)


def test_read_image_names_each_kind_of_bad_file(tmp_path: Path) -> None:
    cases = {
        tmp_path / "none.png": f"{tmp_path / 'none.png'}: no such file",
        tmp_path: f"{tmp_path}: is a directory, expected an image file",
    }
    (tmp_path / "empty.png").write_bytes(b"")
    cases[tmp_path / "empty.png"] = (
        f"{tmp_path / 'empty.png'}: empty file, expected a JPEG/PNG/WebP/BMP image"
    )
    (tmp_path / "afile").write_bytes(b"x")
    cases[tmp_path / "afile" / "x.png"] = f"{tmp_path / 'afile' / 'x.png'}: cannot read: Not a directory"
    good = png(16, 16)
    broken = good[:40] + b"\x00" * (len(good) - 40)  # header intact, pixel data garbage
    (tmp_path / "broken.png").write_bytes(broken)
    cases[tmp_path / "broken.png"] = (
        f"{tmp_path / 'broken.png'}: not a decodable image ({len(broken)} bytes), expected JPEG/PNG/WebP/BMP"
    )
    for path, message in cases.items():
        with pytest.raises(ImageError) as e:
            read_image(path)
        assert str(e.value) == message


def test_a_folder_stands_for_its_images_in_name_order_whatever_the_suffix_case(tmp_path: Path) -> None:
    d = tmp_path / "in"
    d.mkdir()
    for name in ("b.JPG", "a.png", "c.Tiff", "notes.txt", "d.webp", "e.BMP", "f.jpeg"):
        (d / name).write_bytes(b"x")
    (d / "sub.png").mkdir()  # a folder named like an image is not one
    assert [p.name for p in expand_inputs([str(d)])] == [
        "a.png",
        "b.JPG",
        "c.Tiff",
        "d.webp",
        "e.BMP",
        "f.jpeg",
    ]


def test_files_globs_and_missing_names(tmp_path: Path) -> None:
    for name in ("x2.png", "x1.png", "y.png"):
        (tmp_path / name).write_bytes(b"x")
    (tmp_path / "x3.png").mkdir()
    out = list(
        expand_inputs(
            [
                str(tmp_path / "y.png"),
                str(tmp_path / "x*.png"),
                str(tmp_path / "gone.png"),
                str(tmp_path / "z*.png"),
            ]
        )
    )
    assert out == [tmp_path / "y.png", tmp_path / "x1.png", tmp_path / "x2.png", tmp_path / "gone.png"]
