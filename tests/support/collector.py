"""A throw-away PostgreSQL cluster (initdb/pg_ctl as an unprivileged user, loopback port, socket
dir in /tmp) and the collector as a real ``edge-agent collect`` child process (kill -9 able).

Plain classes; tests/collector/conftest.py wraps them in fixtures. ``find_pg_bin()`` looks in
$PATH and /usr/lib/postgresql/*/bin (Debian's ``postgresql`` package puts initdb there).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path
from typing import Optional

from support import cli, free_port
from support.mqtt import wait_port

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


class Postgres:
    """One PostgreSQL cluster of a test's own. As root, the server runs as ``nobody`` (PostgreSQL
    refuses to run as root); the data dir lives in a fresh /tmp directory owned by that user."""

    def __init__(self) -> None:
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
                "--auth=trust",
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
