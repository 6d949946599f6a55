"""core.rtsp on exact replies, SDPs and challenges: what the RTSP probe reads from a server it
does not trust (the transport tests against a real server are tests/adapters/camera/test_rtsp_transport.py)."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edge_agent.core.camera.rtsp_options import (
    capture_options,
    digest_authorization,
    first_video_control,
    parse_reply,
)

_ITEM = st.text(alphabet=st.characters(blacklist_characters="|", blacklist_categories=("Cs",)), max_size=20)


@settings(deadline=None)  # mutmut's stats run traces every call: slow on a busy machine
@given(st.lists(_ITEM, max_size=6), st.sampled_from(["tcp", "udp"]))
def test_the_config_s_transport_replaces_the_operator_s_and_every_other_option_stays(
    items: list[str], transport: str
) -> None:
    out = capture_options(transport, "|".join(items)).split("|")
    assert out[-1] == f"rtsp_transport;{transport}"
    kept = [i for i in items if i.strip() and i.split(";", 1)[0].strip() != "rtsp_transport"]
    assert out[:-1] == kept


def test_a_malformed_transport_option_is_replaced_too() -> None:
    got = capture_options("udp", "rtsp_transport;tcp;x| stimeout;5000000 || rtsp_transport ;http")
    assert got == " stimeout;5000000 |rtsp_transport;udp"


def test_a_describe_reply_keeps_header_values_with_colons() -> None:
    head = (
        b"RTSP/1.0 401 Unauthorized\r\nCSeq: 2\r\nContent-Base: rtsp://10.0.0.5:554/s1/\r\n"
        b'WWW-Authenticate: Digest realm="IP Camera(C1234)", nonce="a:b"\r\nno colon here\r\n'
        b"Server: Hik\xe9vision"
    )
    status, headers = parse_reply(head)
    assert status == 401
    assert headers == {
        "cseq": "2",
        "content-base": "rtsp://10.0.0.5:554/s1/",
        "www-authenticate": 'Digest realm="IP Camera(C1234)", nonce="a:b"',
        "server": "Hik\u00e9vision",  # latin-1: any byte decodes
    }
    assert parse_reply(b"RTSP/1.1 200 OK")[0] == 200


def test_a_reply_that_is_not_rtsp_names_its_first_60_characters() -> None:
    with pytest.raises(ValueError) as err:
        parse_reply(b"X" * 500 + b"\r\nCSeq: 1")
    assert str(err.value) == "not an RTSP reply: " + repr("X" * 60)


@settings(deadline=None)  # mutmut's stats run traces every call: slow on a busy machine
@given(st.binary(max_size=300))
def test_any_bytes_give_a_status_or_a_value_error(head: bytes) -> None:
    try:
        status, headers = parse_reply(head)
    except ValueError as exc:
        assert str(exc).startswith("not an RTSP reply: ") and len(str(exc)) < 300
    else:
        assert 0 <= status <= 999 and all(k == k.strip().lower() for k in headers)


SDP_HEAD = "v=0\r\no=- 0 0 IN IP4 10.0.0.5\r\ns=cam\r\nt=0 0\r\n"


@pytest.mark.parametrize(
    ("body", "base", "url"),
    [
        # the usual camera: video first, audio after
        (
            "m=video 0 RTP/AVP 96\r\na=control:trackID=1\r\nm=audio 0 RTP/AVP 0\r\na=control:trackID=2\r\n",
            "rtsp://h/cam",
            "rtsp://h/cam/trackID=1",
        ),
        # a base that ends in "/" is not given a second one
        ("m=video 0 RTP/AVP 96\r\na=control:trackID=1\r\n", "rtsp://h/cam/", "rtsp://h/cam/trackID=1"),
        # a session-level control before any media is the aggregate, not a track
        ("a=control:rtsp://h/agg\r\nm=video 0 RTP/AVP 96\r\n", "rtsp://h/cam", "rtsp://h/cam"),
        ("a=control:rtsp://h/agg\r\n", "rtsp://h/cam", "rtsp://h/cam"),  # no media at all
        # "*" inside the media: the base URL itself, not base + "/*"
        ("m=video 0 RTP/AVP 96\r\na=control:*\r\n", "rtsp://h/cam/", "rtsp://h/cam/"),
        # a video without a control is the base URL; the audio's track is not taken instead
        (
            "m=video 0 RTP/AVP 96\r\nm=audio 0 RTP/AVP 0\r\na=control:trackID=2\r\n",
            "rtsp://h/c",
            "rtsp://h/c",
        ),
        # no video: the first media, not the last
        (
            "m=audio 0 RTP/AVP 0\r\na=control:trackID=5\r\nm=application 0 RTP/AVP 107\r\na=control:trackID=6\r\n",
            "rtsp://h/c",
            "rtsp://h/c/trackID=5",
        ),
        # absolute controls, any case, rtsps too, are taken as they are
        ("m=video 0 RTP/AVP 96\r\na=control:RTSP://o/v\r\n", "rtsp://h/c", "RTSP://o/v"),
        ("m=video 0 RTP/AVP 96\r\na=control:rtsps://o:322/v\r\n", "rtsp://h/c", "rtsps://o:322/v"),
        # LF-only lines and stray spaces (cheap cameras)
        ("m=video 0 RTP/AVP 96\n  a=control: track1 \n", "rtsp://h/c", "rtsp://h/c/track1"),
    ],
)
def test_the_setup_url_of_an_sdp(body: str, base: str, url: str) -> None:
    assert first_video_control(SDP_HEAD + body, base) == url


@settings(deadline=None)  # mutmut's stats run traces every call: slow on a busy machine
@given(st.text(max_size=200), st.sampled_from(["rtsp://h/c", "rtsp://h/c/"]))
def test_any_sdp_text_gives_a_url(sdp: str, base: str) -> None:
    assert isinstance(first_video_control(sdp, base), str)


def _md5(text: str) -> str:
    return hashlib.md5(text.encode("utf-8")).hexdigest()


def test_the_digest_header_names_every_field_of_the_answer() -> None:
    got = digest_authorization(
        'Digest realm="cam", nonce="n0", stale=FALSE', "admin", "pässword", "DESCRIBE", "rtsp://h/c"
    )
    ha1, ha2 = _md5("admin:cam:pässword"), _md5("DESCRIBE:rtsp://h/c")
    assert got == (
        f'Digest username="admin", realm="cam", nonce="n0", uri="rtsp://h/c", response="{_md5(f"{ha1}:n0:{ha2}")}"'
    )
    # unquoted values and a lower-case scheme name are read the same
    assert (
        digest_authorization(
            "digest realm=cam, nonce=n0, stale=FALSE", "admin", "pässword", "DESCRIBE", "rtsp://h/c"
        )
        == got
    )


def test_a_challenge_without_realm_or_nonce_is_answered_with_empty_ones() -> None:
    got = digest_authorization('Digest nonce="n1"', "u", "p", "SETUP", "rtsp://h/c/t1")
    assert got is not None and 'realm=""' in got
    assert f'response="{_md5(_md5("u::p") + ":n1:" + _md5("SETUP:rtsp://h/c/t1"))}"' in got
    got = digest_authorization('Digest realm="r"', "u", "p", "SETUP", "/")
    assert got is not None and 'nonce=""' in got
    assert f'response="{_md5(_md5("u:r:p") + "::" + _md5("SETUP:/"))}"' in got
