"""A real mosquitto for tests: start/stop/restart on a fixed 127.0.0.1 port, TLS material made
with the ``openssl`` CLI, and a subscriber that collects what arrives.

Plain functions and classes (no pytest fixtures here) so any test area can reuse them; each area
wraps them in its own fixtures. ``require_mosquitto()`` skips with a reason when the broker binary
is missing (CI installs the Debian ``mosquitto`` package).
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Union

import paho.mqtt.client as mqtt
import pytest

from support import free_port, poll, wait_until

MOSQUITTO = Path(os.environ.get("EDGE_AGENT_MOSQUITTO", "/usr/sbin/mosquitto"))
MOSQUITTO_PASSWD = Path("/usr/bin/mosquitto_passwd")


def require_mosquitto() -> None:
    """Skip the calling test when the broker binary is absent."""
    if not MOSQUITTO.exists():
        import pytest

        pytest.skip(f"{MOSQUITTO} not installed (Debian package 'mosquitto'); broker tests need it")


def wait_port(port: int, timeout: float = 10.0, up: bool = True) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                if up:
                    return
        except OSError:
            if not up:
                return
        time.sleep(0.02)
    raise TimeoutError(f"port {port} did not come {'up' if up else 'down'} within {timeout}s")


def wait_connected(sync: Any, timeout: float = 10.0) -> None:
    """Wait until ``sync`` (an MqttSync) is connected; fail at once, naming why, when its connect
    failed (``last_error``) or its thread is gone. Such a test used to wait out the whole deadline
    for a connection that could no longer come (20 s a mutant in the mqtt-sync mutation run)."""

    def connected() -> bool:
        if sync.state == "connected":
            return True
        if sync.last_error is not None:
            raise AssertionError(f"the sync did not connect: {sync.last_error} (state {sync.state})")
        thread = sync._thread
        if thread is None or not thread.is_alive():
            raise AssertionError(f"the sync thread is not running (state {sync.state})")
        return False

    wait_until(connected, timeout, "the sync connected")


@dataclass(frozen=True)
class TlsFiles:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    wrong_ca: Path


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_tls(directory: Path) -> TlsFiles:
    """A CA, a server certificate for IP 127.0.0.1, a client certificate, and an unrelated CA."""
    d = directory
    d.mkdir(parents=True, exist_ok=True)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    for name in ("ca", "wrong-ca"):
        _openssl(
            "req",
            "-x509",
            *ec,
            "-keyout",
            f"{name}.key",
            "-out",
            f"{name}.crt",
            "-days",
            "2",
            "-subj",
            f"/CN=edge-agent test {name}",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
            cwd=d,
        )
    (d / "server.ext").write_text(
        "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
        "extendedKeyUsage=serverAuth\nkeyUsage=critical,digitalSignature\n"
        "authorityKeyIdentifier=keyid\n"
    )
    (d / "client.ext").write_text(
        "extendedKeyUsage=clientAuth\nkeyUsage=critical,digitalSignature\nauthorityKeyIdentifier=keyid\n"
    )
    for name in ("server", "client"):
        _openssl("req", *ec, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}", cwd=d)
        _openssl(
            "x509",
            "-req",
            "-in",
            f"{name}.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            f"{name}.crt",
            "-days",
            "2",
            "-extfile",
            f"{name}.ext",
            cwd=d,
        )
    return TlsFiles(
        d / "ca.crt",
        d / "server.crt",
        d / "server.key",
        d / "client.crt",
        d / "client.key",
        d / "wrong-ca.crt",
    )


def dynsec_conf(workdir: Path, user: str, password: str, may_subscribe: Sequence[str]) -> list[str]:
    """mosquitto.conf lines for the dynamic-security plugin with one client that may subscribe to
    ``may_subscribe`` only: the one broker setup that refuses a SUBSCRIBE in its SUBACK (an
    ``acl_file`` never does; it only withholds the messages)."""
    found = sorted(glob.glob("/usr/lib/*/mosquitto_dynamic_security.so"))
    plugin = Path(found[0]) if found else None
    if plugin is None or shutil.which("mosquitto_ctrl") is None:
        pytest.skip("mosquitto's dynamic-security plugin is not installed")
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "dynsec.json"
    subprocess.run(
        ["mosquitto_ctrl", "dynsec", "init", str(path), user, password], check=True, capture_output=True
    )
    doc = json.loads(path.read_text())
    for role in doc["roles"]:  # init's admin role may subscribe to "#": narrow it
        role["acls"] = [a for a in role["acls"] if a["acltype"] != "subscribePattern"] + [
            {"acltype": "subscribePattern", "topic": t, "allow": True} for t in may_subscribe
        ]
    path.write_text(json.dumps(doc))
    return [f"plugin {plugin}", f"plugin_opt_config_file {path}"]


class Broker:
    """One mosquitto process with its own config, persistence and log under ``workdir``.

    Persistence is on so a graceful ``restart()`` keeps messages queued for persistent
    (``clean_session=False``) subscribers, like a production broker would.
    """

    def __init__(
        self,
        workdir: Path,
        tls: Optional[TlsFiles] = None,
        users: Optional[dict[str, str]] = None,
        extra_conf: Sequence[str] = (),
        snippet: Optional[Path] = None,
        port: Optional[int] = None,
        stock: bool = False,
    ) -> None:
        """``snippet``: a mosquitto.conf snippet (``fleet enroll``'s) that brings its own listener
        (on ``port``), authentication and ACL; only persistence, the log and ``user root`` (the
        tests run as root, the files are 0640 root's) are added to it.
        ``stock``: mosquitto's own defaults but persistence (max_queued_messages 1000,
        autosave_interval 1800, max_inflight_messages 20): what a device meets on a broker
        nobody tuned."""
        self.stock = stock
        self.workdir = workdir
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.snippet = snippet
        self.port = port or free_port()
        self.tls_port = free_port() if tls else None
        self.tls = tls
        self.users = users
        self.extra_conf = list(extra_conf)  # more mosquitto.conf lines (max_qos, a plugin, ...)
        self.proc: Optional[subprocess.Popen[bytes]] = None
        self.log = workdir / "mosquitto.log"
        self.conf = workdir / "mosquitto.conf"
        self._write_conf()

    def _write_conf(self) -> None:
        if self.snippet is not None:
            head = ["user root", "persistence true", f"persistence_location {self.workdir}/"]
            head += ["autosave_interval 0", f"log_dest file {self.log}", "log_type all"]
            self.conf.write_text("\n".join(head) + "\n" + self.snippet.read_text())
            return
        lines = [
            "user root",
            "per_listener_settings false",
            f"allow_anonymous {'false' if self.users else 'true'}",
            "persistence true",
            f"persistence_location {self.workdir}/",
            *(
                ()
                if self.stock
                else ("autosave_interval 0", "max_queued_messages 0", "max_inflight_messages 100")
            ),
            f"log_dest file {self.log}",
            "log_type error",
            "log_type warning",
            "log_type notice",
            f"listener {self.port} 127.0.0.1",
        ]
        if self.users:
            pwfile = self.workdir / "passwords"
            pwfile.write_text("".join(f"{u}:{p}\n" for u, p in self.users.items()))
            subprocess.run([str(MOSQUITTO_PASSWD), "-U", str(pwfile)], check=True, capture_output=True)
            lines.append(f"password_file {pwfile}")
        lines += self.extra_conf
        if self.tls:
            lines += [
                f"listener {self.tls_port} 127.0.0.1",
                f"cafile {self.tls.ca}",
                f"certfile {self.tls.server_cert}",
                f"keyfile {self.tls.server_key}",
                "require_certificate true",
            ]
        self.conf.write_text("\n".join(lines) + "\n")

    def start(self, timeout: float = 10.0) -> None:
        assert self.proc is None, "broker already running"
        self.proc = subprocess.Popen(
            [str(MOSQUITTO), "-c", str(self.conf)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            wait_port(self.port, timeout)
        except TimeoutError:
            self.stop()
            raise RuntimeError(f"mosquitto did not start; log:\n{self.log_text()}") from None

    def stop(self, timeout: float = 10.0) -> None:
        """Graceful stop (SIGTERM): mosquitto saves its persistence file."""
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout)
        self.proc = None
        wait_port(self.port, timeout, up=False)

    def kill9(self, timeout: float = 10.0) -> None:
        """SIGKILL: what mosquitto acknowledged since its last autosave is gone."""
        assert self.proc is not None, "broker not running"
        self.proc.kill()
        self.proc.wait(timeout)
        self.proc = None
        wait_port(self.port, timeout, up=False)

    def restart(self) -> None:
        self.stop()
        self.start()

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def __enter__(self) -> Broker:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class Collector:
    """A persistent QoS 1 subscriber (paho, auto-reconnect) recording every message it gets."""

    def __init__(
        self, port: int, topic: str = "#", client_id: str = "test-collector", tls: Optional[TlsFiles] = None
    ) -> None:
        self.topic = topic
        self.messages: list[tuple[str, bytes, bool]] = []
        self.lock = threading.Lock()
        self.connected = threading.Event()
        self.client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id, clean_session=False)
        self.client.reconnect_delay_set(1, 1)
        self.client.max_inflight_messages_set(100)
        if tls:
            self.client.tls_set(
                ca_certs=str(tls.ca), certfile=str(tls.client_cert), keyfile=str(tls.client_key)
            )
        self.client.on_connect = self._on_connect
        self.client.on_subscribe = self._on_subscribe
        self.client.on_disconnect = lambda *a: self.connected.clear()
        self.client.on_message = self._on_message
        self.client.connect("127.0.0.1", port, 30)
        self.client.loop_start()
        if not self.connected.wait(10):
            raise TimeoutError(f"collector could not subscribe on 127.0.0.1:{port}")

    def _on_connect(self, client: Any, userdata: Any, flags: Any, reason: Any, props: Any) -> None:
        client.subscribe(self.topic, qos=1)

    def _on_subscribe(self, client: Any, userdata: Any, mid: Any, reasons: Any, props: Any) -> None:
        # Ready only once the broker has acknowledged the subscription: set on CONNACK, a push
        # made at once could beat the SUBSCRIBE and be missed (seen in CI: "the begin recorded").
        self.connected.set()

    def _on_message(self, client: Any, userdata: Any, msg: Any) -> None:
        with self.lock:
            self.messages.append((msg.topic, bytes(msg.payload), bool(msg.retain)))

    def on_topic(self, suffix: str) -> list[dict[str, Any]]:
        with self.lock:
            return [json.loads(p) for t, p, _ in self.messages if t.endswith(suffix)]

    def wait_for(self, predicate: Callable[[Collector], bool], timeout: float) -> bool:
        """Whether ``predicate`` held within ``timeout`` s: for a message that may not arrive."""
        return bool(poll(lambda: predicate(self), timeout))

    def wait_until(
        self, predicate: Callable[[Collector], object], timeout: float, what: Union[str, Callable[[], str]]
    ) -> None:
        """Fail naming ``what`` unless ``predicate`` holds within ``timeout`` s."""
        wait_until(lambda: predicate(self), timeout, what)

    def ids(self, suffix: str = "/detections") -> list[str]:
        return [m["id"] for m in self.on_topic(suffix)]

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()
