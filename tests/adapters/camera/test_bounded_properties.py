"""Property tests (hypothesis) for what comes from outside: the MJPEG stream parser, image headers,
and the config values that become MQTT names or bounds. Whatever the bytes, only the project's
error type escapes, and the bounds hold."""

from __future__ import annotations

import math
import struct
from typing import Any

import annotated_types
import cv2
import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel
from support import cli

from edge_agent.adapters.camera.images import check_pixels
from edge_agent.adapters.camera.mjpeg_http import decode_jpeg
from edge_agent.core.camera.mjpeg_parts import MultipartError, MultipartParser
from edge_agent.core.config.schema import Config, parse_config
from edge_agent.core.messages.mqtt_names import utf8_text_problem
from edge_agent.core.vision.image_header import HeaderError, image_dimensions, jpeg_size
from edge_agent.errors import ConfigError, EdgeAgentError, ImageError

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ---- the MJPEG multipart parser --------------------------------------------------------------
def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    out, prev = [], 0
    for p in [*points, len(data)]:
        out.append(data[prev:p])
        prev = p
    return out


header_line = st.sampled_from(
    [
        b"Content-Length: 5",
        b"Content-Length: \xb2",
        b"Content-Length: " + b"9" * 5000,
        b"content-length:-1",
        b"Content-Type: image/jpeg",
        b"X: y",
        b"",
    ]
)
stream_bytes = st.lists(
    st.one_of(st.binary(max_size=64), st.just(b"--bd"), st.just(b"\r\n"), st.just(b"\r\n\r\n"), header_line),
    max_size=40,
).map(b"".join)


@FAST
@given(data=stream_bytes, cuts=st.lists(st.integers(0, 10_000), max_size=8), max_part=st.integers(1, 300))
def test_parser_raises_only_its_error_and_keeps_its_bounds(
    data: bytes, cuts: list[int], max_part: int
) -> None:
    p = MultipartParser("bd", max_part=max_part)
    try:
        for chunk in _split(data, cuts):
            for part in p.feed(chunk):
                assert len(part.body) <= max_part
            assert len(p._buf) <= max_part  # what stays in memory between reads
    except MultipartError as exc:
        assert isinstance(exc, EdgeAgentError) and "\n" not in str(exc)


@FAST
@given(
    bodies=st.lists(
        st.binary(min_size=1, max_size=200).filter(lambda b: b"--bd" not in b), min_size=1, max_size=6
    ),
    cuts=st.lists(st.integers(0, 10_000), max_size=10),
    length=st.booleans(),
)
def test_parser_returns_every_body_whatever_the_read_boundaries(
    bodies: list[bytes], cuts: list[int], length: bool
) -> None:
    # bodies ending in CR/LF lose it to the delimiter (RFC 2046): not what cameras send
    assume(all(not b.endswith((b"\r", b"\n", b"-")) for b in bodies))
    data = b""
    for b in bodies:
        cl = f"Content-Length: {len(b)}\r\n" if length else ""
        data += f"--bd\r\nContent-Type: image/jpeg\r\n{cl}\r\n".encode() + b + b"\r\n"
    data += b"--bd\r\n"
    p = MultipartParser("bd")
    got = [part.body for chunk in _split(data, cuts) for part in p.feed(chunk)]
    assert got == bodies


# ---- image headers ----------------------------------------------------------------------------
MAGICS = [b"\x89PNG\r\n\x1a\n", b"\xff\xd8", b"GIF89a", b"BM", b"RIFF\0\0\0\0WEBP", b"II*\0", b"P6\n"]


@FAST
@given(magic=st.sampled_from([b"", *MAGICS]), rest=st.binary(max_size=80), limit=st.integers(1, 10**9))
def test_header_readers_raise_only_image_errors_and_bound_the_pixels(
    magic: bytes, rest: bytes, limit: int
) -> None:
    data = magic + rest
    try:
        dims = image_dimensions(data)
    except HeaderError as exc:
        assert isinstance(exc, ImageError)
    else:
        assert dims is None or (dims[0] >= 0 and dims[1] >= 0)
    try:
        w, h = check_pixels(data, "x", limit)
    except ImageError as exc:
        assert "\n" not in str(exc) and str(exc).startswith("x: ")
    else:
        assert w * h <= limit  # whatever passes is within the bound


def _bmp(w: int, h: int, header_size: int = 40) -> bytes:
    if header_size == 12:
        info = struct.pack("<IHHHH", 12, w, h, 1, 24)
    else:
        info = struct.pack("<Iii", header_size, w, h) + struct.pack("<HH", 1, 24) + b"\0" * (header_size - 16)
    return b"BM" + struct.pack("<IHHI", 14 + len(info) + 16, 0, 0, 14 + len(info)) + info + b"\0" * 16


@FAST
@given(
    w=st.integers(1, 2**31 - 1),
    h=st.integers(-(2**31) + 1, 2**31 - 1).filter(bool),
    header=st.sampled_from([40, 52, 56, 108, 124]),
    limit=st.integers(1, 10**8),
)
def test_bmp_size_is_read_for_every_header_form_and_sign(w: int, h: int, header: int, limit: int) -> None:
    data = _bmp(w, h, header)
    assert image_dimensions(data) == (w, abs(h))  # negative height = top-down, same pixel count
    if w * abs(h) > limit:
        with pytest.raises(ImageError, match="exceeds the limit"):
            check_pixels(data, "x.bmp", limit)
    else:
        assert check_pixels(data, "x.bmp", limit) == (w, abs(h))


@FAST
@given(w=st.integers(1, 65535), h=st.integers(1, 65535))
def test_os2_core_bmp_header_reads_16_bit_sizes(w: int, h: int) -> None:
    # read as a Windows header, 65535x65535 came out as 1 x 1.5 M pixels and passed the 40 MP check
    assert image_dimensions(_bmp(w, h, 12)) == (w, h)


def _tiny_jpeg() -> bytes:
    ok, buf = cv2.imencode(".jpg", np.full((16, 24, 3), 128, np.uint8))
    assert ok
    return bytes(buf.tobytes())


JPEG = _tiny_jpeg()
SOF = JPEG.find(b"\xff\xc0")


def _jpeg_claiming(w: int, h: int, garbage: bytes = b"") -> bytes:
    # garbage between two segments: libjpeg skips it to the next marker, so must the size reader
    data = bytearray(JPEG)
    data[SOF + 5 : SOF + 9] = struct.pack(">HH", h, w)
    return bytes(data[:SOF]) + garbage + bytes(data[SOF:])


@FAST
@given(
    w=st.integers(1, 65535),
    h=st.integers(1, 65535),
    garbage=st.binary(max_size=8).filter(lambda g: b"\xff" not in g),
    limit=st.integers(1, 10**9),
)
def test_jpeg_size_finds_the_sof_and_decode_refuses_above_the_limit(
    w: int, h: int, garbage: bytes, limit: int
) -> None:
    data = _jpeg_claiming(w, h, garbage)
    assert jpeg_size(data) == (w, h)
    if w * h > limit:
        with pytest.raises(ImageError, match=r"^JPEG part of \d+x\d+ pixels .*exceeds the limit"):
            decode_jpeg(data, (8, 8), limit)
        with pytest.raises(ImageError, match="exceeds the limit"):
            check_pixels(data, "x.jpg", limit)


def test_a_real_top_down_bmp_is_measured_and_decoded(tmp_path: Any) -> None:
    img = np.zeros((30, 50, 3), np.uint8)
    img[:10] = 255  # white on top
    _ok, buf = cv2.imencode(".bmp", img)
    bottom_up = bytearray(buf.tobytes())
    # flip to the top-down form: height -30 and the rows reversed
    off = struct.unpack("<I", bottom_up[10:14])[0]
    stride = (50 * 3 + 3) & ~3
    rows = [bottom_up[off + i * stride : off + (i + 1) * stride] for i in range(30)]
    top_down = bottom_up[:22] + struct.pack("<i", -30) + bottom_up[26:off] + b"".join(reversed(rows))
    assert image_dimensions(bytes(top_down)) == (50, 30)
    with pytest.raises(ImageError, match="50x30 pixels"):
        check_pixels(bytes(top_down), "t.bmp", 50 * 30 - 1)
    decoded = cv2.imdecode(np.frombuffer(bytes(top_down), np.uint8), cv2.IMREAD_COLOR)
    assert decoded.shape == (30, 50, 3) and decoded[0].mean() == 255 and decoded[-1].mean() == 0


# ---- config: MQTT names and numeric ranges ----------------------------------------------------
def toml_string(text: str) -> str:
    """A TOML basic string for any text without surrogates (every char escaped, so TOML's own
    control-character rule never hides ours)."""
    return '"' + "".join(f"\\U{ord(c):08X}" for c in text) + '"'


def _one_line_config_error(exc: ConfigError) -> None:
    assert "\n" not in str(exc)


@FAST
@given(prefix=st.text(max_size=20))
def test_topic_prefix_is_accepted_only_when_a_broker_takes_it(prefix: str) -> None:
    try:
        cfg = parse_config(f"[mqtt]\ntopic_prefix = {toml_string(prefix)}\n")
    except ConfigError as exc:
        _one_line_config_error(exc)
        assert "mqtt.topic_prefix" in str(exc)
        return
    p = cfg.mqtt.topic_prefix
    assert utf8_text_problem(p) is None
    assert not any(0xFDD0 <= ord(c) <= 0xFDEF or (ord(c) & 0xFFFE) == 0xFFFE for c in p)
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in p)
    assert "+" not in p and "#" not in p and p.strip("/") and not p.lstrip("/").startswith("$")


@FAST
@given(device=st.text(max_size=70))
def test_device_id_is_one_ascii_topic_level(device: str) -> None:
    try:
        cfg = parse_config(f"[device]\nid = {toml_string(device)}\n")
    except ConfigError as exc:
        _one_line_config_error(exc)
        assert "device.id" in str(exc)
        return
    d = cfg.device.id
    assert 1 <= len(d) <= 64 and d.isascii() and all(c.isalnum() or c in "_.-" for c in d)
    assert not d.startswith("$")


@FAST
@given(groups=st.lists(st.text(max_size=40), max_size=4))
def test_model_update_groups_are_single_topic_levels(groups: list[str]) -> None:
    """A group is one level of <prefix>/groups/<group>/model/#: '/', '+' and '#' would subscribe
    to other groups' packages; NUL and control characters make the broker drop the receiver."""
    listed = ", ".join(toml_string(g) for g in groups)
    try:
        cfg = parse_config(f"[model_update]\ngroups = [{listed}]\n")
    except ConfigError as exc:
        _one_line_config_error(exc)
        assert "model_update.groups" in str(exc) and "not a usable MQTT topic level" in str(exc)
        assert any(repr(g) in str(exc) for g in groups)  # the bad value, named
        return
    for g in cfg.model_update.groups:
        assert g and utf8_text_problem(g) is None and not g.startswith("$")
        assert not any(c in g for c in "/+#")
        assert not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in g)


@pytest.mark.parametrize("bad", ["a/b", "+", "#", "x\x00y", "tab\there", "$SYS"])
def test_each_bad_group_form_is_refused(bad: str) -> None:
    with pytest.raises(ConfigError, match=r"model_update\.groups = .*not a usable MQTT topic level"):
        parse_config(f'[model_update]\ngroups = ["ok", {toml_string(bad)}]\n')


def _numeric_fields() -> list[tuple[str, str, list[Any]]]:
    out = []
    for section, info in Config.model_fields.items():
        model = info.annotation
        model = next((a for a in getattr(model, "__args__", (model,)) if isinstance(a, type)), model)
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            continue
        for key, f in model.model_fields.items():
            bounds = [
                m
                for m in f.metadata
                if isinstance(
                    m, (annotated_types.Gt, annotated_types.Ge, annotated_types.Lt, annotated_types.Le)
                )
            ]
            if bounds:
                out.append((section, key, bounds))
    return out


NUMERIC = _numeric_fields()
REQUIRED = {
    "classifier": 'model = "c.onnx"\n',
    "sensor": 'port = "/dev/ttyUSB0"\n',
    "zones": 'name = "z"\npolygon = [[0.1, 0.1], [0.9, 0.1], [0.5, 0.9]]\n',
    "lines": 'name = "l"\npoints = [[0.5, 0.0], [0.5, 1.0]]\n',
    "cameras": 'id = "c"\n',
    # rate_hz: window_s/hop_s are converted with it (a rule across keys, not a bound)
    "sensor_models": 'name = "m"\nmodel = "m.onnx"\nfields = ["a"]\nrate_hz = 10.0\n',
}
AFTER = {"sensor_models": '[sensor]\nport = "/dev/ttyUSB0"\n'}  # a sensor model reads a [sensor]
TABLES = {
    "zones": "[[zones]]",
    "lines": "[[lines]]",
    "cameras": "[[cameras]]",
    "sensor_models": "[[sensor_models]]",
}  # lists of tables; the rest are tables
numbers = st.one_of(
    st.integers(-(10**30), 10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, -1, 1, 10**9, 2**63]),
)


def _toml_number(v: float) -> str:
    if isinstance(v, float) and math.isnan(v):
        return "nan"
    if isinstance(v, float) and math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return repr(v)


def test_the_numeric_field_list_is_not_empty() -> None:
    assert len(NUMERIC) > 30 and ("camera", "max_pixels", NUMERIC[0][2]) is not None


@FAST
@given(field=st.sampled_from(NUMERIC), value=numbers)
def test_numeric_settings_are_refused_in_one_line_or_within_their_bounds(
    field: tuple[str, str, list[Any]], value: float
) -> None:
    section, key, bounds = field
    header = TABLES.get(section, f"[{section}]")
    required = "".join(
        ln + "\n" for ln in REQUIRED.get(section, "").splitlines() if not ln.startswith(f"{key} =")
    )
    text = f"{header}\n{required}{key} = {_toml_number(value)}\n{AFTER.get(section, '')}"
    try:
        cfg = parse_config(text, "c.toml")
    except ConfigError as exc:
        _one_line_config_error(exc)
        path = f"{section}.0.{key}" if section in TABLES else f"{section}.{key}"
        assert path in str(exc) and str(exc).startswith("c.toml: ")
        return
    part = getattr(cfg, section)
    got = getattr(part[0] if section in TABLES else part, key)
    assert not (isinstance(got, float) and math.isnan(got))
    for b in bounds:
        if isinstance(b, annotated_types.Gt):
            assert got > b.gt
        elif isinstance(b, annotated_types.Ge):
            assert got >= b.ge
        elif isinstance(b, annotated_types.Lt):
            assert got < b.lt
        elif isinstance(b, annotated_types.Le):
            assert got <= b.le


# ---- pinned examples --------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("prefix", "why"),
    [
        ("edge\\n", "control character (U+000A"),
        ("edge\\u0001", "control character (U+0001"),
        ("edge\\u0085", "control character (U+0085"),
        ("edge\\uFFFF", "non-character (U+FFFF"),
        ("edge\\uFFFE", "non-character (U+FFFE"),
        ("edge\\uFDD0", "non-character (U+FDD0"),
        ("edge\\U0001FFFF", "non-character (U+1FFFF"),
        ("/$SYS", "must not start with '$' or '/$'"),
        ("$SYS/x", "must not start with '$'"),
        ("a/+", "wildcard '+'"),
        ("///", "must not be empty"),
    ],
)
def test_config_check_refuses_topic_prefixes_brokers_drop_in_one_line(
    tmp_path: Any, prefix: str, why: str
) -> None:

    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[detector]\nmodel = "d.onnx"\n[mqtt]\ntopic_prefix = "{prefix}"\n', encoding="utf-8")
    r = cli(
        "config",
        "check",
        str(cfg),
        quiet=False,
        timeout=60,
    )
    assert r.returncode != 0
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "mqtt.topic_prefix" in lines[0] and why in lines[0], r.stderr


@pytest.mark.parametrize("prefix", ["edge", "a/b/c", "/edge", "caf\u00e9", "\u6771\u4eac", "x$", "a/$b"])
def test_topic_prefixes_brokers_take_are_accepted(prefix: str) -> None:
    assert parse_config(f"[mqtt]\ntopic_prefix = {toml_string(prefix)}\n").mqtt.topic_prefix == prefix


@pytest.mark.parametrize(("w", "h"), [(640, -480), (20000, -20000), (1, -(2**31) + 1)])
def test_negative_bmp_heights_count_their_rows(w: int, h: int) -> None:
    assert image_dimensions(_bmp(w, h)) == (w, -h)
    if w * -h > 40_000_000:
        with pytest.raises(ImageError, match=f"{w}x{-h} pixels"):
            check_pixels(_bmp(w, h), "t.bmp")


@pytest.mark.parametrize(("w", "h"), [(0, 10), (-640, 480), (640, 0), (640, -(2**31))])
def test_impossible_bmp_sizes_are_refused_not_decoded(w: int, h: int) -> None:
    with pytest.raises(ImageError, match="impossible size"):
        check_pixels(_bmp(w, h), "t.bmp")
