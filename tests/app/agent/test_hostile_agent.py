"""The agent as a subprocess in a hostile world: kill -9, a full disk, READY ordering, output mode."""

from __future__ import annotations

import json
import signal
import socket
import time
from pathlib import Path
from typing import Any

import pytest
from support import cli, wait_until
from support.mqtt import Broker, Collector
from support.tmpfs import fill, free, tmpfs
from support.world import agent_config, make_world, start_agent, status

pytestmark = pytest.mark.slow


def exported(cfg: Path) -> list[dict[str, Any]]:
    r = cli("queue", "export", "--config", str(cfg))
    assert r.returncode == 0, r.stderr
    return [json.loads(line)["payload"] for line in r.stdout.splitlines()]


def test_kill_9_loss_shows_as_a_sequence_gap_and_is_counted(tmp_path: Path) -> None:
    w = make_world(tmp_path)
    cfg = agent_config(w)  # no broker: everything stays in the queue where we can read it
    proc = start_agent(cfg)
    wait_until(lambda: status(w).get("results", 0) >= 200, what="200 results")
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    first = exported(cfg)
    seqs = [m["seq"] for m in first]
    assert seqs == list(range(1, len(seqs) + 1))  # contiguous up to the crash: nothing silently missing
    assert {m["boot"] for m in first} == {1}
    r = cli("run", "--config", str(cfg), "--max-frames", "5")
    assert r.returncode == 0, r.stderr
    assert "ended without a clean close" in r.stderr
    second = [m for m in exported(cfg) if m["boot"] == 2]
    assert [m["seq"] for m in second] == list(range(second[0]["seq"], second[0]["seq"] + 5))
    gap = second[0]["seq"] - seqs[-1] - 1
    # at most the reserved window (flush_batch = 100) plus the batch being committed: a kill
    # between the marks' fdatasync and the COMMIT counts that batch as lost (the marks had promised
    # it), so the counters say skipped + lost, and together they are the gap exactly
    assert 1 <= gap <= 2 * 100
    stats = json.loads(cli("queue", "stats", "--config", str(cfg), "--json").stdout)
    assert (stats["crashes"], stats["seq_skipped"] + stats["lost"]) == (1, gap)


def test_ready_is_sent_only_after_the_models_are_warm(tmp_path: Path) -> None:
    w = make_world(tmp_path)
    cfg = agent_config(w, loop=False)
    sock_path = tmp_path / "notify.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(sock_path))
    sock.settimeout(0.5)
    proc = start_agent(cfg, env={"NOTIFY_SOCKET": str(sock_path)})
    got: list[str] = []
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and "READY=1" not in got:
            try:
                got.extend(sock.recv(4096).decode().split("\n"))
            except socket.timeout:
                continue
    finally:
        assert proc.wait(30) == 0
        sock.close()
    warm = next(i for i, g in enumerate(got) if g.startswith("STATUS=models warm"))
    assert warm < got.index("READY=1")
    assert got.index("STATUS=loading and warming up the models") < warm


@pytest.mark.parametrize(("mode", "expect_all"), [("event", False), ("every_frame", True)])
def test_output_mode_is_obeyed(tmp_path: Path, mode: str, expect_all: bool) -> None:
    w = make_world(tmp_path, scenes=1)  # one scene replayed: nothing ever changes
    cfg = agent_config(w, mode=mode)
    r = cli("run", "--config", str(cfg), "--max-frames", "12")
    assert r.returncode == 0, r.stderr
    final = status(w)
    assert final["frames"] == 12
    assert final["results"] == (12 if expect_all else 1)  # event: the first sight, then only changes
    assert len(exported(cfg)) == final["results"]


def test_full_disk_acceptance_run_exits_0_and_drain_delivers_everything(
    tmp_path: Path, broker: Broker
) -> None:
    """Queue on a 16 MB tmpfs filled to the brim: run --max-frames 5 exits 0, queue drain delivers all."""
    with tmpfs(tmp_path / "fs") as disk:
        w = make_world(tmp_path)

        def config(port: int) -> Path:
            return agent_config(
                w,
                queue_path=disk / "outbox.db",
                output_extra="snapshot = true\nsnapshot_max_bytes = 8192",
                extra=f"[mqtt]\nenabled = true\nport = {port}\nreconnect_max_s = 1.0",
            )

        # results with snapshots fill 16 MB quickly; the broker is down (port 1) so nothing leaves
        cfg = config(1)
        r = cli("run", "--config", str(cfg), "--max-frames", "4000", timeout=600)
        assert r.returncode == 0, r.stderr
        fill(disk)
        assert free(disk) < 4096  # not one more page
        before = json.loads(cli("queue", "stats", "--config", str(cfg), "--json").stdout)
        assert before["pending"] > 500 and before["dropped"] > 0  # it really ran into the full disk
        r = cli("run", "--config", str(cfg), "--max-frames", "5")
        assert r.returncode == 0, r.stderr
        pending = json.loads(cli("queue", "stats", "--config", str(cfg), "--json").stdout)
        assert pending["pending"] + pending["dropped"] == before["pending"] + before["dropped"] + 5
        config(broker.port)
        col = Collector(broker.port, "edge/cam-1/detections", client_id="drain-collector")
        try:
            r = cli("queue", "drain", "--config", str(cfg), "--timeout", "120", timeout=300)
            assert r.returncode == 0, r.stderr
            drain_log = r.stderr
            col.wait_until(
                lambda c: len(c.messages) >= pending["pending"], 30, 'len(c.messages) >= pending["pending"]'
            )
            got = {json.loads(p)["seq"] for _, p, _ in col.messages}
        finally:
            col.close()
        assert len(got) == pending["pending"]
        assert json.loads(cli("queue", "stats", "--config", str(cfg), "--json").stdout)["pending"] == 0, (
            drain_log
        )


def test_reject_new_on_a_full_disk_logs_once_and_exits_0_on_sigterm(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "fs", size="8m") as disk:
        w = make_world(tmp_path)
        cfg = agent_config(
            w,
            queue_path=disk / "outbox.db",
            queue_extra='policy = "reject_new"',
            output_extra="snapshot = true\nsnapshot_max_bytes = 8192",
        )
        proc = start_agent(cfg)
        try:
            wait_until(
                lambda: (status(w).get("queue") or {}).get("rejected", 0) > 50, timeout=120, what="rejections"
            )
            assert status(w)["queue"]["disk_full"] is True
        finally:
            proc.send_signal(signal.SIGTERM)
            rc = proc.wait(30)
        err = proc.stderr.read() if proc.stderr else ""
        assert rc == 0, err
        assert err.count("rejecting new messages") == 1, err  # once per streak, not once per frame
        assert "not queued" not in err
        final = json.loads(cli("queue", "stats", "--config", str(cfg), "--json").stdout)
        assert final["rejected"] >= 50 and final["dropped"] == 0, err
