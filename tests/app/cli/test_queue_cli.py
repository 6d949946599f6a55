"""``edge-agent queue ...`` as a user runs it: a real process, a real file, a real broker."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
from support import cli, free_port
from support.mqtt import Broker, Collector
from support.outbox import PRODUCER, TOPIC, big_limits
from support.tmpfs import tmpfs
from support.world import agent_toml

from edge_agent.adapters.outbox.outbox import Outbox
from edge_agent.adapters.outbox.views import read_stats

REPO = Path(__file__).resolve().parents[3]


def write_config(tmp_path: Path, port: int, **mqtt: object) -> Path:
    """A queue and a broker, nothing else: what the queue commands read."""
    cfg = tmp_path / "config.toml"
    cfg.write_text(
        agent_toml(
            tmp_path,
            None,
            None,
            port=port,
            device={"id": "dev-1", "state_dir": None},
            mqtt={"status_interval_s": None, **mqtt},
            queue={"path": str(tmp_path / "q.db")},
            output=None,
            health=None,
        )
    )
    return cfg


def fill(path: Path, n: int) -> list[str]:
    with Outbox(path, big_limits(), flush_interval_s=60, flush_batch=10**6) as ob:
        return [ob.put(TOPIC, {"n": i, "pad": "x" * 100}) for i in range(n)]


def test_stats_peek_export(tmp_path: Path) -> None:
    cfg = write_config(tmp_path, 1883)
    ids = fill(tmp_path / "q.db", 25)
    res = cli("queue", "stats", "--config", str(cfg), "--json", quiet=False)
    assert res.returncode == 0, res.stderr
    stats = json.loads(res.stdout)
    assert stats["pending"] == 25 and stats["dropped"] == 0 and stats["bytes"] > 25 * 100
    assert isinstance(stats["oldest"], str) and stats["oldest"].endswith("Z")
    human = cli("queue", "stats", "--config", str(cfg), quiet=False).stdout
    assert "pending: 25\n" in human and "dropped: 0\n" in human
    assert "disk_full: no\n" in human and "oldest_unconfirmed_s: -\n" in human  # no False / None
    assert not any(w in human for w in ("False", "True", "None"))
    peek_out = cli("queue", "peek", "--config", str(cfg), "-n", "3", quiet=False).stdout
    peek = [json.loads(line) for line in peek_out.splitlines()]
    assert [p["payload"]["id"] for p in peek] == ids[:3] and peek[0]["topic"] == TOPIC
    out = tmp_path / "export.jsonl"
    res = cli("queue", "export", "--config", str(cfg), "-o", str(out), quiet=False)
    assert res.returncode == 0 and "exported 25 messages" in res.stderr
    assert [json.loads(line)["payload"]["n"] for line in out.read_text().splitlines()] == list(range(25))
    assert len(cli("queue", "export", "--config", str(cfg), quiet=False).stdout.splitlines()) == 25


def test_stats_on_a_missing_queue_is_one_clear_line(tmp_path: Path) -> None:
    res = cli("queue", "stats", "--config", str(write_config(tmp_path, 1883)), quiet=False)
    assert res.returncode == 1
    assert res.stderr.startswith("edge-agent queue: error: ") and "no queue file" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_purge_asks_unless_yes(tmp_path: Path) -> None:
    cfg = write_config(tmp_path, 1883)
    fill(tmp_path / "q.db", 10)
    res = cli("queue", "purge", "--config", str(cfg), quiet=False)
    assert res.returncode == 1 and "refusing to delete 10 messages without --yes" in res.stderr
    assert read_stats(tmp_path / "q.db")["pending"] == 10
    res = cli("queue", "purge", "--config", str(cfg), "--yes", quiet=False)
    assert res.returncode == 0 and "purged 10 messages" in res.stderr
    stats = read_stats(tmp_path / "q.db")
    assert (stats["pending"], stats["dropped"]) == (0, 10)


def test_drain_without_a_broker_fails_and_keeps_everything(tmp_path: Path) -> None:
    cfg = write_config(tmp_path, free_port())
    fill(tmp_path / "q.db", 30)
    res = cli("queue", "drain", "--config", str(cfg), "--timeout", "1", quiet=False)
    assert res.returncode == 1
    assert "30 messages still queued" in res.stderr and "cannot connect to 127.0.0.1" in res.stderr
    assert read_stats(tmp_path / "q.db")["pending"] == 30


def test_drain_refuses_while_another_process_holds_the_queue(tmp_path: Path) -> None:
    cfg = write_config(tmp_path, free_port())
    with Outbox(tmp_path / "q.db", big_limits()):
        res = cli("queue", "drain", "--config", str(cfg), "--timeout", "1", quiet=False)
    assert res.returncode == 1 and "in use by another process" in res.stderr


def test_drain_killed_mid_way_and_rerun_loses_nothing(tmp_path: Path, broker: Broker) -> None:
    collector = Collector(broker.port)
    cfg = write_config(tmp_path, broker.port, rate_limit_per_s=2500.0)
    ids = fill(tmp_path / "q.db", 10_000)
    proc = subprocess.Popen(
        [sys.executable, "-m", "edge_agent", "queue", "drain", "--config", str(cfg), "--timeout", "60"],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        collector.wait_until(lambda c: len(c.ids()) >= 2500, 30, "len(c.ids()) >= 2500")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    pending_after_kill = read_stats(tmp_path / "q.db")["pending"]
    assert 0 < pending_after_kill < 10_000
    # the broker noticed the dead client and published its last will, retained
    collector.wait_until(
        lambda c: any(s["state"] == "offline" for s in c.on_topic("/status")),
        10,
        'any(s["state"] == "offline" for s in c.on_topic("/status"))',
    )
    res = cli("queue", "drain", "--config", str(cfg), "--timeout", "60", quiet=False)
    assert res.returncode == 0, res.stderr
    assert "queue empty" in res.stderr
    collector.wait_until(lambda c: set(c.ids()) >= set(ids), 30, "set(c.ids()) >= set(ids)")
    copies: dict[str, list[bytes]] = defaultdict(list)
    for topic, payload, _ in collector.messages:
        if topic.endswith("/detections"):
            copies[json.loads(payload)["id"]].append(payload)
    assert set(copies) == set(ids)  # zero lost
    assert all(len(set(c)) == 1 for c in copies.values())  # a duplicate is the same message, same id
    dups = sum(len(c) - 1 for c in copies.values())
    assert dups <= 200  # at most the in-flight window of the killed process (mqtt.inflight = 100) + its acks
    stats = json.loads(cli("queue", "stats", "--config", str(cfg), "--json", quiet=False).stdout)
    assert (stats["pending"], stats["dropped"]) == (0, 0)
    collector.close()


@pytest.mark.parametrize("action", ["stats", "peek", "export", "drain", "purge"])
def test_help_for_every_action(action: str) -> None:
    res = cli("queue", action, "--help", quiet=False)
    assert res.returncode == 0 and "--config" in res.stdout


def test_one_kill_9_then_queue_drain_counts_one_crash_and_the_gap_is_the_window(
    tmp_path: Path, broker: Broker
) -> None:
    """The crash-accounting test as a user meets it: the agent is killed, `queue drain` sends the
    backlog and exits cleanly, the next run goes on. One crash, and the gap consumers see after the
    last message of the killed run is exactly what the counters say (today: two crashes, the
    gap counted twice)."""
    collector = Collector(broker.port)
    cfg = write_config(tmp_path, broker.port)
    path = tmp_path / "q.db"
    proc = subprocess.Popen(
        [sys.executable, "-c", PRODUCER, str(path), "300"],
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"go\n"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    res = cli("queue", "drain", "--config", str(cfg), "--timeout", "60", quiet=False)
    assert res.returncode == 0, res.stderr
    with Outbox(path, big_limits()) as ob:  # the next run
        ob.put(TOPIC, {"n": "after"})
    res = cli("queue", "drain", "--config", str(cfg), "--timeout", "60", quiet=False)
    assert res.returncode == 0, res.stderr
    collector.wait_until(
        lambda c: any(json.loads(p).get("n") == "after" for _, p, _ in c.messages),
        10,
        'any(json.loads(p).get("n") == "after" for _, p, _ in c.messages)',
    )
    seqs = sorted({json.loads(p)["seq"] for t, p, _ in collector.messages if t.endswith("/detections")})
    collector.close()
    stats = json.loads(cli("queue", "stats", "--config", str(cfg), "--json", quiet=False).stdout)
    assert stats["crashes"] == 1
    assert seqs[:-1] == list(range(1, len(seqs)))  # the killed run's committed rows, no hole
    gap = seqs[-1] - seqs[-2] - 1
    assert gap == stats["seq_skipped"] + stats["lost"] > 0
    # at most the reserved window (flush_batch = 100) plus the batch being committed: a kill between
    # the marks' fdatasync and the COMMIT counts that batch as lost (the marks had promised it) --
    # seen once in ~10 runs on a loaded machine (gap 200 = skipped + lost)
    assert gap <= 2 * 100


def _one_line_error(res: subprocess.CompletedProcess[str]) -> None:
    assert res.returncode == 1
    assert "Traceback" not in res.stderr
    assert res.stderr.count("\n") == 1 and res.stderr.startswith("edge-agent queue: error:"), res.stderr


def test_export_to_a_missing_directory_is_one_line(tmp_path: Path) -> None:
    cfg = write_config(tmp_path, free_port())
    fill(tmp_path / "q.db", 5)
    res = cli(
        "queue", "export", "--config", str(cfg), "-o", str(tmp_path / "missing" / "x.jsonl"), quiet=False
    )
    _one_line_error(res)
    assert "missing/x.jsonl" in res.stderr and not (tmp_path / "missing").exists()


def test_export_of_a_row_with_an_impossible_time_does_not_die(tmp_path: Path) -> None:
    """A damaged `created` (1e300) made export die with OverflowError half-way through its output."""
    cfg = write_config(tmp_path, free_port())
    fill(tmp_path / "q.db", 3)
    conn = sqlite3.connect(str(tmp_path / "q.db"))
    conn.execute("UPDATE messages SET created = 1e300 WHERE id = 2")
    conn.commit()
    conn.close()
    out = tmp_path / "x.jsonl"
    res = cli("queue", "export", "--config", str(cfg), "-o", str(out), quiet=False)
    assert res.returncode == 0, res.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["created"] is None for r in rows] == [False, True, False]


def test_an_export_that_fails_half_way_leaves_no_half_written_file(tmp_path: Path) -> None:
    cfg = write_config(tmp_path, free_port())
    fill(tmp_path / "q.db", 3000)
    with tmpfs(tmp_path / "fs", size="256k") as fs:
        out = fs / "x.jsonl"
        out.write_text("the previous export\n")
        res = cli("queue", "export", "--config", str(cfg), "-o", str(out), quiet=False)
        _one_line_error(res)
        assert "nothing written" in res.stderr
        assert out.read_text() == "the previous export\n"  # untouched, not half-overwritten
        assert sorted(p.name for p in fs.iterdir()) == ["x.jsonl"]  # no temporary file left


@pytest.mark.parametrize(
    "answer, purged",
    [("y", True), (" YES ", True), ("", False), ("n", False), ("maybe", False), ("yess", False)],
)
def test_purge_on_a_terminal_deletes_only_on_yes(tmp_path: Path, answer: str, purged: bool) -> None:
    """On a terminal the question is asked; only y/yes deletes (the default, Enter, is No)."""
    import pty

    cfg = write_config(tmp_path, 1883)
    fill(tmp_path / "q.db", 10)
    main, sub = pty.openpty()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "edge_agent", "queue", "purge", "--config", str(cfg)],
        stdin=sub,
        stdout=sub,
        stderr=sub,
        env=env,
        close_fds=True,
    )
    os.close(sub)
    seen = b""
    try:
        while b"[y/N] " not in seen:
            chunk = os.read(main, 1024)
            assert chunk, seen
            seen += chunk
        assert f"Delete 10 queued messages from {tmp_path / 'q.db'}? [y/N] ".encode() in seen
        os.write(main, answer.encode() + b"\n")
        assert proc.wait(60) == (0 if purged else 1)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(main)
    assert read_stats(tmp_path / "q.db")["pending"] == (0 if purged else 10)


def test_drain_with_mqtt_disabled_says_so_and_keeps_everything(tmp_path: Path) -> None:
    cfg = write_config(tmp_path, 1883, enabled=False)
    fill(tmp_path / "q.db", 3)
    res = cli("queue", "drain", "--config", str(cfg), "--timeout", "5", quiet=False)
    assert res.returncode == 1 and "mqtt.enabled = false: nothing to drain to" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and read_stats(tmp_path / "q.db")["pending"] == 3
