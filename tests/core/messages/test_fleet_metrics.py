"""core.messages.fleet_metrics: the collector's /metrics text follows Prometheus' conventions
(``# HELP`` and ``# TYPE`` per family, ``_total`` counters typed counter, base units, label
values escaped), checked by ``promtool check metrics`` (Debian's ``prometheus`` package), and
a device that reported nothing gets no made-up figures."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from edge_agent.app.collector.round_stats import Metrics
from edge_agent.core.messages.fleet_metrics import COLLECTOR, Family, render
from edge_agent.core.messages.health_history import health

ROWS = [
    {
        "device": "cam-1",
        "state": "running",
        "last_seen": 1796000000.5,
        "crashes": 2,
        "conflicts": 1,
        "gaps": 1,
        "missing": 4,
        "health": health(
            {
                "fps": 9.5,
                "queue": {
                    "pending": 3,
                    "oldest_unconfirmed_s": 2.0,
                    "disk_free_bytes": 10**9,
                    "disk_full": False,
                },
                "models": {"detector": {"id": 'we"ird\\id\nx'}},
                "model_update": {"last": {"outcome": "refused", "at": 1.0}},
            }
        ),
    },
    {"device": "cam-2", "state": "offline", "last_seen": None, "crashes": None, "health": None},
]


def exposition() -> str:
    m = Metrics()
    m.device_rows = ROWS
    m.purged = {"results": 12, "objects": 0, "counts": 3, "statuses": 1}
    return m.exposition(0, True, {"collector": "c1"})


def samples(text: str) -> dict[str, float]:
    return {
        ln.rsplit(" ", 1)[0]: float(ln.rsplit(" ", 1)[1]) for ln in text.splitlines() if ln and ln[0] != "#"
    }


def test_per_device_series_with_the_device_label() -> None:
    s = samples(exposition())
    assert s['edge_agent_device_online{device="cam-1"}'] == 1
    assert s['edge_agent_device_online{device="cam-2"}'] == 0
    assert s['edge_agent_device_last_seen_seconds{device="cam-1"}'] == 1796000000.5
    assert s['edge_agent_device_backlog{device="cam-1"}'] == 3
    assert s['edge_agent_device_oldest_unconfirmed_seconds{device="cam-1"}'] == 2
    assert s['edge_agent_device_fps{device="cam-1"}'] == 9.5
    assert s['edge_agent_device_disk_free_bytes{device="cam-1"}'] == 10**9
    assert s['edge_agent_device_crashes_total{device="cam-1"}'] == 2
    assert s['edge_agent_device_gaps{device="cam-1"}'] == 1
    assert s['edge_agent_device_conflicts_total{device="cam-1"}'] == 1
    assert s['edge_agent_device_update_refused{device="cam-1"}'] == 1
    assert s['edge_agent_device_update_rolled_back{device="cam-1"}'] == 0
    # the label value escaped as the exposition format wants: backslash, quote, newline
    assert s['edge_agent_device_model_info{device="cam-1",model_id="we\\"ird\\\\idx",version=""}'] == 1
    # what cam-2 never reported is absent, not 0
    assert not any("cam-2" in k for k in s if "backlog" in k or "fps" in k or "model_info" in k)
    assert s['edge_agent_collector_devices_exported{collector="c1"}'] == 2


def test_every_family_has_help_and_type_and_counters_end_in_total() -> None:
    text = exposition()
    helps = [ln.split()[2] for ln in text.splitlines() if ln.startswith("# HELP ")]
    types = {ln.split()[2]: ln.split()[3] for ln in text.splitlines() if ln.startswith("# TYPE ")}
    names = {ln.split("{")[0].split(" ")[0] for ln in text.splitlines() if ln and ln[0] != "#"}
    assert names <= set(types) and set(helps) == set(types)
    assert all((t == "counter") == n.endswith("_total") for n, t in types.items()), types
    assert set(Metrics().values(0, True)) <= set(COLLECTOR)  # no collector value without its help


def test_rows_deleted_for_age_are_one_counter_by_kind() -> None:
    got = samples(exposition())
    name = "edge_agent_collector_expired_rows_total"
    assert got[f'{name}{{collector="c1",kind="results"}}'] == 12
    assert got[f'{name}{{collector="c1",kind="counts"}}'] == 3
    assert f"# TYPE {name} counter" in exposition()


def test_render_of_no_labels_and_odd_numbers() -> None:
    text = render([Family("x_total", "counter", "a\\b\nc", [({}, 2**40), ({"a": 'q"\n'}, float("nan"))])])
    assert text.splitlines() == [
        "# HELP edge_agent_x_total a\\\\b c",
        "# TYPE edge_agent_x_total counter",
        f"edge_agent_x_total {2**40}",
        'edge_agent_x_total{a="q\\"\\n"} NaN',
    ]


def test_promtool_finds_nothing_to_lint() -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip(
            "promtool absent (Debian package 'prometheus', .ci/packages.d/issue33.txt): exposition not linted"
        )
    out = subprocess.run(
        [promtool, "check", "metrics"], input=exposition(), capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0 and not out.stdout.strip() and not out.stderr.strip(), out.stdout + out.stderr
    # and the linter does catch what the old exposition did (a _total typed gauge, no HELP)
    bad = "# TYPE edge_agent_x_total gauge\nedge_agent_x_total 1\n"
    out = subprocess.run(
        [promtool, "check", "metrics"], input=bad, capture_output=True, text=True, timeout=60
    )
    assert out.returncode != 0 and "no help text" in out.stdout + out.stderr
