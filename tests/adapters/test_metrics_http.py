from __future__ import annotations

import urllib.error
import urllib.request

import pytest

from edge_agent.adapters.metrics_http import MetricsServer, render


def test_render_is_prometheus_text() -> None:
    text = render({"fps": 7.5, "queue_pending": 3}, {"device": "d1"})
    assert text.splitlines() == [
        "# TYPE edge_agent_fps gauge",
        'edge_agent_fps{device="d1"} 7.5',
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
