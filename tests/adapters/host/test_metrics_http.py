from __future__ import annotations

import urllib.error
import urllib.request

import pytest
from hypothesis import given
from hypothesis import strategies as st

from edge_agent.adapters.host.metrics_http import MetricsServer, number, render


def test_render_is_prometheus_text() -> None:
    text = render({"fps": 7.5, "queue_pending": 3}, {"device": "d1"})
    assert text.splitlines() == [
        "# HELP edge_agent_fps frames per second over the recent window",
        "# TYPE edge_agent_fps gauge",
        'edge_agent_fps{device="d1"} 7.5',
        "# HELP edge_agent_queue_pending messages waiting in the outbox for the broker",
        "# TYPE edge_agent_queue_pending gauge",
        'edge_agent_queue_pending{device="d1"} 3',
    ]


def test_server_serves_metrics_on_loopback_only() -> None:
    values = {"fps": 1.0}
    srv = MetricsServer(0, lambda: (values, {"device": "x"}))
    srv.start()
    try:
        assert srv.server.server_address[0] == "127.0.0.1"
        url = f"http://127.0.0.1:{srv.port}/metrics"
        assert 'edge_agent_fps{device="x"} 1' in urllib.request.urlopen(url, timeout=5).read().decode()
        values["fps"] = 2.5  # live values, not a snapshot taken at start
        assert 'edge_agent_fps{device="x"} 2.5' in urllib.request.urlopen(url, timeout=5).read().decode()
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(f"http://127.0.0.1:{srv.port}/", timeout=5)
    finally:
        srv.stop()


def test_large_counters_and_fractions_go_out_exactly() -> None:
    text = render({"frames": 1234567, "uptime_s": 1209600.25, "lag_s": 0.1, "big": 2.0**60}, {"device": "d1"})
    values = {ln.split("{")[0]: ln.rsplit(" ", 1)[1] for ln in text.splitlines() if not ln.startswith("#")}
    assert values == {
        "edge_agent_big": "1.152921504606847e+18",
        "edge_agent_frames_total": "1234567",  # was 1.23457e+06: two days of frames at 7 fps, rounded
        "edge_agent_lag_seconds": "0.1",
        "edge_agent_uptime_seconds": "1209600.25",
    }


def test_nan_and_infinities_are_spelled_as_prometheus_reads_them() -> None:
    text = render({"a": float("nan"), "b": float("inf"), "c": float("-inf")}, {})
    assert [ln.rsplit(" ", 1)[1] for ln in text.splitlines() if not ln.startswith("#")] == [
        "NaN",
        "+Inf",
        "-Inf",
    ]


def test_label_values_are_escaped() -> None:
    text = render({"x": 1}, {"model": 'a"b\\c\nd'})
    assert 'edge_agent_x{model="a\\"b\\\\c\\nd"} 1' in text.splitlines()


@given(st.floats(allow_nan=False, allow_infinity=False) | st.integers(-(2**53), 2**53))
def test_every_finite_value_reads_back_equal(v: float) -> None:
    assert float(number(v)) == float(v)


def test_what_a_scraper_gets_headers_query_and_errors() -> None:
    """Prometheus reads the version from Content-Type; a scrape URL may carry a query string; any
    other path is a 404 that says where the metrics are."""
    srv = MetricsServer(0, lambda: ({"fps": 1.0}, {"device": "x", "model": "m"}))
    srv.start()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{srv.port}/metrics?name[]=fps", timeout=5) as r:
            body = r.read()
            assert r.status == 200
            assert r.headers["Content-Type"] == "text/plain; version=0.0.4"
            assert r.headers["Content-Length"] == str(len(body))
        assert b'edge_agent_fps{device="x",model="m"} 1\n' in body
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(f"http://127.0.0.1:{srv.port}/metric", timeout=5)
        assert e.value.code == 404 and e.value.reason == "only /metrics here"
        assert srv.thread.name == "metrics" and srv.thread.daemon
    finally:
        srv.stop()


def test_a_token_is_asked_of_every_scrape_and_the_bind_address_is_kept() -> None:
    srv = MetricsServer(0, lambda: ({"fps": 1.0}, {}), bind="127.0.0.2", token="s3cret")
    srv.start()
    try:
        assert srv.server.server_address[0] == "127.0.0.2"
        url = f"http://127.0.0.2:{srv.port}/metrics"
        for auth in (None, "Bearer wrong", "s3cret", "Bearer s3cret "):
            req = urllib.request.Request(url, headers={"Authorization": auth} if auth else {})
            with pytest.raises(urllib.error.HTTPError) as info:
                urllib.request.urlopen(req, timeout=5)
            assert info.value.code == 401 and info.value.headers["WWW-Authenticate"].startswith("Bearer")
        req = urllib.request.Request(url, headers={"Authorization": "Bearer s3cret"})
        assert b"edge_agent_fps 1" in urllib.request.urlopen(req, timeout=5).read()
    finally:
        srv.stop()
