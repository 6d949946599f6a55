"""A throw-away PostgreSQL cluster (initdb/pg_ctl as an unprivileged user, loopback port, socket
dir in /tmp) and the collector as a real ``edge-agent collect`` child process (kill -9 able).

Plain classes; tests/support/fixtures_collector.py wraps them in fixtures. ``find_pg_bin()`` looks in
$PATH and /usr/lib/postgresql/*/bin (Debian's ``postgresql`` package puts initdb there).
"""

from __future__ import annotations

import glob
import json
import os
import pwd
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Optional

import paho.mqtt.client as mqtt

from edge_agent.core.messages.fleet import DeviceStatus, Record, parse
from support import cli, free_port, wait_until
from support.mqtt import wait_port

NOW = 1796000000.0


def rec(dev: str, seq: int, boot: int = 1) -> list[Record]:
    """The parsed records of one result message of ``dev`` (device time ``NOW + seq``)."""
    body = {"id": f"{dev}-{seq}", "seq": seq, "boot": boot, "device_id": dev, "ts": NOW + seq}
    return parse("edge", f"edge/{dev}/detections", json.dumps(body).encode(), NOW).records


def status(dev: str, state: str, ts: float = NOW, **queue: int) -> Optional[DeviceStatus]:
    """The parsed status snapshot of ``dev`` (queue figures ``**queue`` over pending = 3)."""
    body = {
        "device_id": dev,
        "state": state,
        "ts": ts,
        "queue": {"pending": 3, **queue},
        "models": {"detector": {"id": "m1"}},
    }
    # received when sent (a status ts later than its receive time is clamped to it)
    return parse("edge", f"edge/{dev}/status", json.dumps(body).encode(), max(NOW, ts)).status


REPO = Path(__file__).resolve().parents[2]


def find_pg_bin() -> Optional[Path]:
    """The directory holding initdb and pg_ctl, or None."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(os.path.realpath(found)).parent
    for d in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if os.path.exists(f"{d}/initdb") and os.path.exists(f"{d}/pg_ctl"):
            return Path(d)
    return None


class Running:
    """A PostgreSQL server another process started and removes (.ci/with_pg.py), by its URL."""

    def __init__(self, url: str) -> None:
        self.url = url


class Postgres:
    """One PostgreSQL cluster of a test's own. As root, the server runs as ``nobody`` (PostgreSQL
    refuses to run as root); the data dir lives in a fresh /tmp directory owned by that user."""

    def __init__(self, password: Optional[str] = None) -> None:
        """``password``: the ``postgres`` user's, and password (scram) authentication on TCP."""
        self.password = password
        bindir = find_pg_bin()
        if bindir is None:
            raise FileNotFoundError("initdb/pg_ctl not found (Debian package 'postgresql')")
        self.bin = bindir
        self.root = Path(tempfile.mkdtemp(prefix="edge-pg-"))
        self.data = self.root / "data"
        self.port = free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        self.runas: list[str] = []
        if os.geteuid() == 0:
            nobody = pwd.getpwnam("nobody")
            os.chown(self.root, nobody.pw_uid, nobody.pw_gid)
            self.runas = ["runuser", "-u", "nobody", "--"]

    def _run(self, *args: str, timeout: float = 120) -> None:
        proc = subprocess.run(
            [*self.runas, *args], capture_output=True, text=True, timeout=timeout, cwd=self.root
        )
        if proc.returncode != 0:
            raise RuntimeError(f"{args[0]} failed: {proc.stdout[-2000:]}{proc.stderr[-2000:]}")

    def start(self) -> None:
        if not self.data.exists():
            self._run(
                str(self.bin / "initdb"),
                "-D",
                str(self.data),
                "-U",
                "postgres",
                *self._auth(),
                "--no-sync",
                "-E",
                "UTF8",
                "--locale=C",
            )
        opts = (
            f"-c port={self.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={self.root} "
            "-c fsync=on -c max_connections=50 -c shared_buffers=32MB"
        )
        self._run(
            str(self.bin / "pg_ctl"),
            "-D",
            str(self.data),
            "-o",
            opts,
            "-l",
            str(self.root / "log"),
            "-w",
            "start",
        )
        wait_port(self.port, 30)

    def _auth(self) -> list[str]:
        if self.password is None:
            return ["--auth=trust"]
        pwfile = self.root / "pw"
        pwfile.write_text(self.password + "\n")
        if self.runas:
            nobody = pwd.getpwnam("nobody")
            os.chown(pwfile, nobody.pw_uid, nobody.pw_gid)
        return ["--auth-host=scram-sha-256", "--auth-local=trust", f"--pwfile={pwfile}"]

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop")

    def cleanup(self) -> None:
        try:
            self.stop()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


def sqlite_url(path: Path) -> str:
    return f"sqlite:///{path}"  # path is absolute: sqlite:////abs/path


class CollectorProc:
    """``edge-agent collect`` as a child process with its log in ``log``."""

    def __init__(
        self,
        broker_port: int,
        db: str,
        log: Path,
        client_id: str,
        group: Optional[str] = None,
        metrics_port: int = 0,
        prefix: str = "edge",
        extra: tuple[str, ...] = (),
    ) -> None:
        self.args = [
            sys.executable,
            "-m",
            "edge_agent",
            "collect",
            "--broker",
            f"mqtt://127.0.0.1:{broker_port}",
            "--db",
            db,
            "--client-id",
            client_id,
            "--prefix",
            prefix,
        ]
        if group:
            self.args += ["--group", group]
        if metrics_port:
            self.args += ["--metrics-port", str(metrics_port)]
        self.args += list(extra)
        self.log = log
        self.proc: Optional[subprocess.Popen[bytes]] = None

    def start(self) -> None:
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(self.args, stdout=out, stderr=subprocess.STDOUT, env=env)

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        self.proc = None

    def stop(self, timeout: float = 15) -> int:
        if self.proc is None:
            return 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait(timeout)
        self.proc = None
        return rc

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


def start_group(a: CollectorProc, b: CollectorProc, db_a: Path, db_b: Path) -> None:
    """Start two members of one shared-subscription group and wait until the broker granted both
    subscriptions (the SUBACK's log line) and both made their SQLite files."""
    a.start()
    b.start()
    wait_until(
        lambda: "collector: subscribed to" in a.text() and "collector: subscribed to" in b.text(),
        30,
        lambda: f"both SUBACKs logged; a: {a.text()[-400:]!r} b: {b.text()[-400:]!r}",
        every=0.1,
    )
    wait_until(lambda: db_a.exists() and db_b.exists(), 30, "db_a.exists() and db_b.exists()", every=0.1)


def fleet(*args: str) -> subprocess.CompletedProcess[str]:
    """``edge-agent fleet ...`` as a child process."""
    return cli("fleet", *args, quiet=False, env={"PYTHONPATH": str(REPO)})


def metrics(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    return {
        ln.split("{")[0]: float(ln.rsplit(" ", 1)[1])
        for ln in text.splitlines()
        if ln and not ln.startswith("#")
    }


CAM_TOPIC = "edge/cam-1/detections"


def result(seq: int) -> bytes:
    """A minimal result of cam-1 (boot 1) as published."""
    return json.dumps(
        {"id": f"r{seq}", "seq": seq, "boot": 1, "device_id": "cam-1", "ts": 1796000000.0}
    ).encode()


def seqs(db: Path) -> set[int]:
    """The seqs a collector's SQLite file holds (none before its schema exists)."""
    if not db.exists():
        return set()
    c = sqlite3.connect(db, timeout=60)
    try:
        return {int(r[0]) for r in c.execute("SELECT seq FROM messages")}
    except sqlite3.OperationalError:  # schema not there yet
        return set()
    finally:
        c.close()


class Publisher:
    """One QoS 1 publisher; ``send`` waits for every PUBACK (the broker owns them after it)."""

    def __init__(self, port: int) -> None:
        self.c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="test-pub", protocol=mqtt.MQTTv5)
        self.c.connect("127.0.0.1", port)
        self.c.loop_start()

    def send(self, first: int, last: int, pause: float = 0.0) -> None:
        for s in range(first, last + 1):
            self.c.publish(CAM_TOPIC, result(s), qos=1).wait_for_publish(10)
            if pause:
                time.sleep(pause)

    def close(self) -> None:
        self.c.disconnect()
        self.c.loop_stop()


class Stop(threading.Event):
    """A collector's stop event whose waits return at once and are recorded (a round's backoff
    runs without sleeping); the ``stop_after``-th wait reports a stop."""

    def __init__(self, stop_after: int = 10**9) -> None:
        super().__init__()
        self.waits: list[float] = []
        self.stop_after = stop_after

    def wait(self, timeout: Optional[float] = None) -> bool:
        self.waits.append(float(timeout or 0))
        return len(self.waits) >= self.stop_after
