"""`edge-agent collect` in process around a stand-in collector (issue 36: test_collect_cmd.py and
test_collect_leave.py run it as a child, which earns no mutmut credit): `--example-config`,
SIGTERM and SIGINT end the run, `/metrics` served while it runs and closed after, a busy metrics
port as one line, a leave's report and its refusals, and an mqtts:// broker keeping its CA."""

from __future__ import annotations

import logging
import os
import signal
import socket
import ssl
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from queue import Queue
from typing import Any, ClassVar, Optional

import pytest
from support.mqtt import make_tls
from support.ports import free_port

from edge_agent.app.cli.main import main
from edge_agent.app.collector import loop
from edge_agent.app.collector.round_stats import Metrics
from edge_agent.core.config.example import collector_example


class Sub:
    def __init__(self) -> None:
        self.inbox: Queue[bytes] = Queue()
        self.connected = threading.Event()


class Db:
    dialect = "sqlite"


class Stand:
    """What collect_cmd.run uses of a Collector; ``during`` runs inside run(stop)."""

    made: ClassVar[list[Stand]] = []
    during: ClassVar[Any] = None
    left_after: ClassVar[bool] = True

    def __init__(
        self, cfg: Any, password: Any, tls: Any, leave_quiet_s: Any = None, db_password: Any = None
    ) -> None:
        self.cfg, self.tls, self.quiet = cfg, tls, leave_quiet_s
        self.password, self.db_password = password, db_password
        self.sub, self.db, self.metrics = Sub(), Db(), Metrics()
        self.left = False
        Stand.made.append(self)

    def run(self, stop: threading.Event) -> None:
        if Stand.during is not None:
            Stand.during(self, stop)
        self.left = Stand.left_after


@pytest.fixture
def stand(monkeypatch: pytest.MonkeyPatch) -> Iterator[type[Stand]]:
    handlers = (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT))
    monkeypatch.setattr(loop, "Collector", Stand)
    Stand.made, Stand.during, Stand.left_after = [], None, True
    try:
        yield Stand
    finally:
        signal.signal(signal.SIGTERM, handlers[0])
        signal.signal(signal.SIGINT, handlers[1])


def collect(capsys: pytest.CaptureFixture[str], tmp_path: Path, *args: str) -> tuple[int, str, str]:
    rc = main(["collect", "--db", f"sqlite:///{tmp_path}/f.db", *args])
    got = capsys.readouterr()
    return rc, got.out, got.err


def test_example_config_prints_it_and_builds_no_collector(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], stand: type[Stand]
) -> None:
    rc, out, err = collect(capsys, tmp_path, "--example-config")
    assert (rc, out, err) == (0, collector_example(), "") and stand.made == []


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_ends_the_run_with_exit_0(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    stand: type[Stand],
    sig: signal.Signals,
) -> None:
    seen: list[bool] = []

    def during(c: Stand, stop: threading.Event) -> None:
        seen.append(stop.is_set())
        os.kill(os.getpid(), sig)
        seen.append(stop.wait(30))

    stand.during = during
    with caplog.at_level(logging.INFO, logger="edge_agent.collector"):
        rc, out, _ = collect(capsys, tmp_path, "--client-id", "col-a", "--broker", "mqtt://127.0.0.1:1999")
    assert (rc, out, seen) == (0, "", [False, True])
    msgs = [r.getMessage() for r in caplog.records if r.name == "edge_agent.collector"]
    assert f"signal {sig.name}: stopping" in msgs
    assert "collector col-a: mqtt://127.0.0.1:1999 -> sqlite" in msgs


def test_metrics_are_served_while_it_runs_and_closed_after(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], stand: type[Stand]
) -> None:
    port = free_port()
    pages: list[str] = []

    def during(c: Stand, stop: threading.Event) -> None:
        c.sub.inbox.put(b"a")
        c.sub.inbox.put(b"b")
        c.sub.connected.set()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            pages.append(r.read().decode())

    stand.during = during
    rc, _, err = collect(capsys, tmp_path, "--client-id", "col-a", "--metrics-port", str(port))
    assert (rc, err) == (0, "")
    lines = pages[0].splitlines()
    assert 'edge_agent_collector_inbox{collector="col-a"} 2' in lines
    assert 'edge_agent_collector_broker_connected{collector="col-a"} 1' in lines
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=5):
        pass  # the server is stopped once the collector ends


def test_metrics_are_closed_after_a_run_that_failed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], stand: type[Stand]
) -> None:
    port = free_port()

    def during(c: Stand, stop: threading.Event) -> None:
        raise RuntimeError("the collector broke")

    stand.during = during
    with pytest.raises(RuntimeError):
        collect(capsys, tmp_path, "--metrics-port", str(port))
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=5):
        pass


def test_a_busy_metrics_port_is_one_line_and_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], stand: type[Stand]
) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        rc, out, err = collect(capsys, tmp_path, "--metrics-port", str(port))
    assert (rc, out) == (1, "")
    assert (
        err
        == f"edge-agent collect: error: metrics_port = {port}: cannot listen on 127.0.0.1: Address already in use\n"
    )


def test_a_leave_reports_what_it_stored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], stand: type[Stand]
) -> None:
    def during(c: Stand, stop: threading.Event) -> None:
        c.metrics.messages, c.metrics.records, c.metrics.duplicates = 7, 12, 3

    stand.during = during
    rc, out, err = collect(
        capsys, tmp_path, "--leave", "--group", "g1", "--client-id", "col-b", "--quiet-s", "0.5"
    )
    assert (rc, err) == (0, "")
    assert out == (
        "collector col-b left group 'g1': 7 queued messages stored (12 records, 3 duplicates); "
        "its session on the broker is ended\n"
    )
    assert stand.made[0].quiet == 0.5


def test_a_leave_stopped_before_it_left_is_one_line_and_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], stand: type[Stand]
) -> None:
    stand.left_after = False
    rc, out, err = collect(capsys, tmp_path, "--leave", "--group", "g1", "--client-id", "col-b")
    assert (rc, out) == (1, "")
    assert err == (
        "edge-agent collect: error: collector col-b: stopped before it left group 'g1': its session "
        "stays, and the broker keeps queueing its share (run --leave again)\n"
    )
    stand.left_after = False  # not a leave: whether it left is never asked
    assert collect(capsys, tmp_path, "--group", "g1") == (0, "", "")


def test_a_leave_without_a_group_is_one_line_and_builds_no_collector(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], stand: type[Stand]
) -> None:
    rc, out, err = collect(capsys, tmp_path, "--leave", "--client-id", "col-b")
    assert (rc, out, stand.made) == (1, "", [])
    assert err == (
        "edge-agent collect: error: --leave needs the collector's group (--group or group = in "
        "[collector]): a collector without one is the only subscriber, and ending its session would "
        "lose every later message\n"
    )


@pytest.mark.parametrize(("value", "ok"), [("0.5", True), ("3600", True), ("0.4", False), ("3600.1", False)])
def test_quiet_s_is_from_half_a_second_to_an_hour(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], stand: type[Stand], value: str, ok: bool
) -> None:
    if ok:
        assert collect(capsys, tmp_path, "--leave", "--group", "g", "--quiet-s", value)[0] == 0
        assert stand.made[0].quiet == float(value)
        return
    with pytest.raises(SystemExit) as exc:
        collect(capsys, tmp_path, "--leave", "--group", "g", "--quiet-s", value)
    assert exc.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"edge-agent collect: error: argument --quiet-s: {value} is out of range: "
        "expected a number of seconds from 0.5 to 3600"
    )


def test_an_mqtts_broker_with_a_ca_file_trusts_that_ca_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], stand: type[Stand]
) -> None:
    files = make_tls(tmp_path / "tls")
    conf = tmp_path / "c.toml"
    conf.write_text(f'[collector]\nbroker = "mqtts://127.0.0.1:8883"\ntls_ca = "{files.ca}"\n')
    assert collect(capsys, tmp_path, "--config", str(conf))[0] == 0
    tls: Optional[ssl.SSLContext] = stand.made[0].tls
    assert tls is not None
    assert [c["subject"] for c in tls.get_ca_certs()] == [((("commonName", "edge-agent test ca"),),)]


def test_the_broker_and_database_passwords_reach_the_collector_as_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], stand: type[Stand]
) -> None:
    """Only the line end is cut from the database password: a trailing space or X is its own."""
    (tmp_path / "mqtt-password").write_text("broker-pw\n")
    (tmp_path / "db-password").write_text("pX \n")
    conf = tmp_path / "c.toml"
    conf.write_text(
        f'[collector]\nusername = "c1"\npassword_file = "{tmp_path}/mqtt-password"\n'
        f'db_password_file = "{tmp_path}/db-password"\n'
    )
    rc = main(["collect", "--config", str(conf), "--db", "postgresql://u@h/db"])
    assert rc == 0, capsys.readouterr().err
    assert (stand.made[0].password, stand.made[0].db_password) == ("broker-pw", "pX ")
    (tmp_path / "db-password").write_text("pwX\r\n")
    assert main(["collect", "--config", str(conf), "--db", "postgresql://u@h/db"]) == 0
    assert stand.made[1].db_password == "pwX"


def test_a_bad_config_file_is_named_in_its_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], stand: type[Stand]
) -> None:
    conf = tmp_path / "c.toml"
    conf.write_text("[collector]\nretention_counts_days = -3\n")
    rc, out, err = collect(capsys, tmp_path, "--config", str(conf))
    assert (rc, out, stand.made) == (1, "", [])
    assert err.startswith(f"edge-agent collect: error: {conf}") and "retention_counts_days" in err


def test_help_names_each_options_placeholder_and_what_it_takes(capsys: pytest.CaptureFixture[str]) -> None:
    """`collect -h` is where a user learns the URL forms and where the password goes: each option's
    placeholder, its accepted forms, the advice against a password in --db, --quiet-s's default."""
    with pytest.raises(SystemExit) as exc:
        main(["collect", "-h"])
    assert exc.value.code == 0
    words = " ".join(capsys.readouterr().out.split())
    for usage in (
        "[--config FILE]",
        "[--broker URL]",
        "[--db URL]",
        "[--db-password-file FILE]",
        "[--quiet-s S]",
    ):
        assert usage in words, usage
    for said in (
        "'edge-agent collect': the far end.",
        "collector TOML with a [collector] table",
        "mqtt://HOST:PORT or mqtts://HOST:PORT",
        "sqlite:///PATH (sqlite:////abs/path) or postgresql://...",
        "never put it in --db, which every user sees in ps",
        "fixed MQTT client id: the broker keeps its session while we are down",
        "shared subscription group ($share/GROUP/...) to split the load",
        "Prometheus text on 127.0.0.1:PORT/metrics",
        "print a commented collector.toml with every key",
        "retire this collector (its --client-id) from its --group",
        "without a message (default 5)",
    ):
        assert said in words, said
