"""Damaged queue files: truncated, overwritten mid-file, on a read-only mount. Every intact row is
salvaged page by page, the counts add up, and the read-only CLI never prints a traceback."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support import cli
from support.outbox import TOPIC, big_limits
from support.tmpfs import tmpfs

from edge_agent.adapters.outbox.outbox import Outbox
from edge_agent.adapters.outbox.views import iter_messages, read_stats

REPO = Path(__file__).resolve().parents[3]
N = 2000


def make_queue(path: Path) -> list[str]:
    with Outbox(path, big_limits(), flush_interval_s=60, flush_batch=10**6) as ob:
        return [ob.put(TOPIC, {"m": f"row-{i:05d}", "pad": "z" * 150}) for i in range(N)]


def config(tmp_path: Path, queue: Path) -> Path:
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[detector]\nmodel = "m.onnx"\n[queue]\npath = "{queue}"\n')
    return cfg


@pytest.mark.parametrize(("keep", "at_least"), [(0.5, 800), (0.9, 1600)])
def test_truncated_file_yields_every_intact_row_and_counts_add_up(
    tmp_path: Path, keep: float, at_least: int
) -> None:
    path = tmp_path / "q.db"
    ids = make_queue(path)
    os.truncate(path, int(path.stat().st_size * keep) // 4096 * 4096 + 1234)  # mid-page, like a torn copy
    cfg = config(tmp_path, path)
    r = cli("queue", "stats", "--config", str(cfg), "--json")  # read-only, before any repair
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    ro = json.loads(r.stdout)
    assert ro["damaged"] is True and ro["pending"] + ro["unreadable_rows"] == N
    with Outbox(path, big_limits()) as ob:  # the writer salvages into a fresh file
        stats = ob.stats()
        got = [m.msg_id for m in ob.claim(N)]
    assert stats["salvaged"] >= at_least
    assert stats["salvaged"] + stats["lost"] == N  # what was there, from the file's own row count
    assert stats["pending"] == stats["salvaged"] == ro["pending"]
    assert got == [i for i in ids if i in set(got)]  # original order, original ids


def test_random_bytes_mid_file_stats_and_export_read_only_then_salvage(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    make_queue(path)
    data = bytearray(path.read_bytes())
    mid = len(data) // 2
    data[mid : mid + 20000] = (
        random.Random(7).randbytes(20000) if hasattr(random.Random, "randbytes") else os.urandom(20000)
    )
    path.write_bytes(bytes(data))
    cfg = config(tmp_path, path)
    r = cli("queue", "stats", "--config", str(cfg))
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert "damaged: yes" in r.stdout
    r = cli("queue", "export", "--config", str(cfg), "-o", str(tmp_path / "out.jsonl"))
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    exported = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    stats = read_stats(path)
    assert len(exported) == stats["pending"] and N - 100 < stats["pending"] < N
    assert stats["pending"] + stats["unreadable_rows"] == N
    with Outbox(path, big_limits()) as ob:
        after = ob.stats()
    assert after["salvaged"] == stats["pending"] and after["salvaged"] + after["lost"] == N


def test_stats_and_export_on_a_read_only_mount(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "ro", size="8m") as disk:
        path = disk / "q.db"
        code = f"""
            import os
            from edge_agent.adapters.outbox.outbox import Outbox
            from edge_agent.core.queue.policy import Limits
            ob = Outbox({str(path)!r}, Limits(10**6, 10**9, 1e9), flush_interval_s=60, flush_batch=10**6)
            for i in range(300):
                ob.put("t", {{"n": i}})
            ob.flush()
            os._exit(9)  # a crash: the rows are only in the WAL
        """
        r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=REPO, timeout=60)
        assert r.returncode == 9
        assert path.with_name("q.db-wal").stat().st_size > 0
        subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
        cfg = config(tmp_path, path)
        r = cli("queue", "stats", "--config", str(cfg), "--json")
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["pending"] == 300
        r = cli("queue", "export", "--config", str(cfg))
        assert r.returncode == 0, r.stderr
        assert [json.loads(line)["payload"]["n"] for line in r.stdout.splitlines()] == list(range(300))
        assert [m["payload"]["seq"] for m in iter_messages(path)] == list(range(1, 301))


def test_rows_only_in_the_wal_are_found_page_by_page(tmp_path: Path) -> None:
    """A crash leaves committed rows in the WAL only; the page reader overlays committed frames."""
    from edge_agent.adapters.outbox.pages import scan_file

    path = tmp_path / "q.db"
    code = f"""
        import os
        from edge_agent.adapters.outbox.outbox import Outbox
        from edge_agent.core.queue.policy import Limits
        ob = Outbox({str(path)!r}, Limits(10**6, 10**9, 1e9), flush_interval_s=60, flush_batch=10**6)
        for i in range(300):
            ob.put("t", {{"n": i}})
        ob.flush()
        os._exit(9)
    """
    assert subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=REPO, timeout=60).returncode == 9
    found = scan_file(path)
    assert sorted(json.loads(m[2])["n"] for m in found.messages.values()) == list(range(300))
    assert found.meta["rows"] == 300 and found.damaged_pages == 0
