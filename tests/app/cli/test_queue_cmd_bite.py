"""``edge-agent queue`` beyond test_queue_cmd_inproc.py (issue 36): what a drain tells the fleet
about the device while it runs, a drain that times out waiting for the collector's confirmation,
an export that cannot be written, one written under a locale that is not UTF-8, and the
figures of ``stats`` as a person reads them."""

from __future__ import annotations

import json
import locale
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.mqtt import Broker, Collector
from support.outbox import TOPIC, big_limits

from edge_agent.adapters.outbox.outbox import Outbox
from edge_agent.adapters.outbox.views import read_stats
from edge_agent.app.cli import queue_cmd
from edge_agent.app.cli.main import main


def _queue(tmp_path: Path, n: int, mqtt: str = "") -> tuple[Path, Path]:
    q = tmp_path / "q.db"
    with Outbox(q, big_limits(), flush_interval_s=60, flush_batch=10**6) as ob:
        for i in range(n):
            ob.put(TOPIC, {"n": i, "name": "café"})
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[device]\nid = "dev-1"\n[queue]\npath = "{q}"\n{mqtt}')
    return cfg, q


@pytest.fixture
def watcher(broker: Broker) -> Iterator[Collector]:
    c = Collector(broker.port, client_id="test-watcher")
    yield c
    c.close()


def test_a_drain_reports_the_device_as_draining_with_its_queue_and_link(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], broker: Broker, watcher: Collector
) -> None:
    cfg, _ = _queue(tmp_path, 3, f'[mqtt]\nhost = "127.0.0.1"\nport = {broker.port}\n')
    assert main(["queue", "drain", "--config", str(cfg), "--timeout", "30"]) == 0
    assert capsys.readouterr().err == f"drained 3 messages to 127.0.0.1:{broker.port}; queue empty\n"
    watcher.wait_until(lambda c: len(c.on_topic("/dev-1/status")) >= 2, 10, "the drain's status and goodbye")
    statuses = watcher.on_topic("/dev-1/status")
    assert [s["state"] for s in statuses][:1] == ["draining"] and statuses[-1]["state"] == "offline"
    first = statuses[0]
    assert first["device_id"] == "dev-1"
    assert first["fps"] == 0 and first["uptime_s"] == 0  # no camera, no service: nothing to report
    assert isinstance(first["broker"], dict) and first["broker"]  # the drain's own link
    assert isinstance(first["queue"], dict) and "pending" in first["queue"]


def test_a_drain_the_collector_never_confirms_times_out_saying_they_were_sent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], broker: Broker
) -> None:
    mqtt = f'[mqtt]\nhost = "127.0.0.1"\nport = {broker.port}\nconfirm = "collector"\n'
    cfg, q = _queue(tmp_path, 4, mqtt)
    assert main(["queue", "drain", "--config", str(cfg), "--timeout", "1"]) == 1
    assert capsys.readouterr().err == (
        "edge-agent queue drain: timed out after 1s with 4 messages still queued, 4 of them sent and "
        "awaiting the collector's confirmation; nothing was lost\n"
    )
    assert read_stats(q)["pending"] == 4


def test_a_figure_reads_as_a_person_says_it() -> None:
    shown = queue_cmd._shown
    assert [shown(None), shown(True), shown(False), shown(0), shown(2.5), shown("x")] == [
        "-",
        "yes",
        "no",
        "0",
        "2.5",
        "x",
    ]


def test_an_export_onto_a_folder_is_one_line_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg, _ = _queue(tmp_path, 2)
    target = tmp_path / "taken"
    target.mkdir()
    assert main(["queue", "export", "--config", str(cfg), "-o", str(target)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"edge-agent queue: error: -o {target}: cannot write the export: ")
    assert err.endswith("; nothing written\n") and "None" not in err
    assert list(target.iterdir()) == []


@pytest.mark.skipif(sys.flags.utf8_mode == 1, reason="Python's UTF-8 mode: every locale writes UTF-8")
def test_an_export_is_utf8_whatever_the_locale(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg, _ = _queue(tmp_path, 2)
    out = tmp_path / "export.jsonl"
    saved = locale.setlocale(locale.LC_CTYPE)
    locale.setlocale(locale.LC_CTYPE, "C")  # an operator's shell without a UTF-8 locale: ASCII
    try:
        rc = main(["queue", "export", "--config", str(cfg), "-o", str(out)])
    finally:
        locale.setlocale(locale.LC_CTYPE, saved)
    assert rc == 0, capsys.readouterr().err
    lines = out.read_bytes().decode("utf-8").splitlines()
    assert [json.loads(ln)["payload"]["name"] for ln in lines] == ["café", "café"]


def test_peek_takes_a_whole_count_of_at_least_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg, _ = _queue(tmp_path, 3)
    for bad, says in (("0", "0 is out of range"), ("two", "'two' is not a whole number >= 1")):
        with pytest.raises(SystemExit) as ei:
            main(["queue", "peek", "--config", str(cfg), "-n", bad])
        assert ei.value.code == 2
        assert f"argument -n: {says}" in capsys.readouterr().err
    assert main(["queue", "peek", "--config", str(cfg), "-n", "2"]) == 0
    assert [json.loads(ln)["payload"]["n"] for ln in capsys.readouterr().out.splitlines()] == [0, 1]


def _page(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as ei:
        main(["queue", *argv, "--help"])
    assert ei.value.code == 0
    return " ".join(capsys.readouterr().out.split())  # as read, whatever the terminal's width


ACTIONS = {
    "stats": ("pending/bytes/oldest/dropped and other counters", "--json one JSON object"),
    "drain": (
        "publish everything pending to the configured broker, then exit",
        "--timeout S give up after S seconds (default 60)",
    ),
    "peek": ("show the oldest messages as JSON lines", "-n N how many (default 10)"),
    "export": (
        "write every queued message as JSON lines",
        "-o FILE, --output FILE file to write (default: stdout)",
    ),
    "purge": ("delete every queued message", "--yes, -y do not ask"),
}


def test_the_help_pages_say_what_each_action_and_option_does(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "queue inspect, drain, export or purge the durable outbox" in " ".join(
        capsys.readouterr().out.split()
    )
    top = _page(capsys)
    assert top.startswith(
        "usage: edge-agent queue [-h] [-v] [-q] ACTION ... 'edge-agent queue': look into, drain,"
    )
    assert "ACTION " + " ".join(f"{a} {says}" for a, (says, _) in ACTIONS.items()) + " options:" in top
    for action, (says, option) in ACTIONS.items():
        page = _page(capsys, action)
        assert f"usage: edge-agent queue {action} " in page and f"] {says} options:" in page, page
        assert f" {option} " in page, page
