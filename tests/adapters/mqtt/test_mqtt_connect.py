"""The broker settings every MQTT client shares (password, TLS, the failed-connect sentence) and
``doctor``'s probe, in process against a real mosquitto (plain, with users, with TLS): what an
operator reads when a credential or a certificate is wrong, and what the broker is really sent."""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.reasoncodes import ReasonCode
from support import free_port, wait_until
from support.mqtt import Broker, TlsFiles, require_mosquitto

from edge_agent.adapters.mqtt.connect import (
    describe_connect_error,
    read_password,
    suback_problems,
    tls_context,
)
from edge_agent.adapters.mqtt.probe import probe_broker
from edge_agent.core.config.schema import MqttConfig
from edge_agent.errors import SyncError


@pytest.fixture
def auth_broker(tmp_path: Path) -> Iterator[Broker]:
    require_mosquitto()
    b = Broker(tmp_path / "auth-broker", users={"cam": "right"})
    b.start()
    try:
        yield b
    finally:
        b.stop()


# ---- read_password ----------------------------------------------------------------------------
def test_a_relative_password_file_is_read_under_the_credentials_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    creds, cwd = tmp_path / "creds", tmp_path / "cwd"
    creds.mkdir()
    cwd.mkdir()
    (creds / "pw").write_text("from-creds\n")
    (cwd / "pw").write_text("from-cwd\n")
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(creds))
    cfg = MqttConfig(username="cam", password_file="pw")
    assert read_password(cfg) == "from-creds"
    monkeypatch.delenv("CREDENTIALS_DIRECTORY")  # outside systemd: the path as written
    assert read_password(cfg) == "from-cwd"


def test_an_absolute_password_file_ignores_the_credentials_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "creds").mkdir()
    (tmp_path / "creds" / "abs").write_text("wrong\n")
    (tmp_path / "abs").write_text("right\n")
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(tmp_path / "creds"))
    assert read_password(MqttConfig(username="cam", password_file=str(tmp_path / "abs"))) == "right"


def test_only_the_line_end_is_taken_off_a_password(tmp_path: Path) -> None:
    f = tmp_path / "pw"
    f.write_text(" pass word X\r\n", newline="")  # written on Windows; blanks and X are the password's
    assert read_password(MqttConfig(username="cam", password_file=str(f))) == " pass word X"


def test_an_unreadable_password_file_is_one_line_naming_the_key(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope")
    with pytest.raises(SyncError) as e:
        read_password(MqttConfig(username="cam", password_file=missing))
    assert str(e.value) == f"mqtt.password_file = {missing!r}: cannot read it (No such file or directory)"


def test_without_a_file_the_password_comes_from_the_named_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_BROKER_PW", "env-pw")
    monkeypatch.delenv("CREDENTIALS_DIRECTORY", raising=False)
    assert read_password(MqttConfig(username="cam", password_env="MY_BROKER_PW")) == "env-pw"
    assert read_password(MqttConfig(username="cam", password_env="ABSENT_PW_VARIABLE")) is None
    assert read_password(MqttConfig(password_env="MY_BROKER_PW")) is None  # no user: no password


# ---- tls_context ------------------------------------------------------------------------------
def test_no_tls_key_means_no_tls() -> None:
    assert tls_context(MqttConfig()) is None


def test_a_ca_makes_a_verifying_context_that_trusts_that_ca(tls_files: TlsFiles) -> None:
    ctx = tls_context(MqttConfig(tls_ca=str(tls_files.ca)))
    assert ctx is not None
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname
    subjects = [dict(x[0] for x in c["subject"]) for c in ctx.get_ca_certs()]
    assert {"commonName": "edge-agent test ca"} in subjects


def test_a_client_certificate_alone_turns_tls_on_with_the_system_cas(tls_files: TlsFiles) -> None:
    ctx = tls_context(MqttConfig(tls_cert=str(tls_files.client_cert), tls_key=str(tls_files.client_key)))
    assert ctx is not None and ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname


def test_bad_tls_files_are_one_line_naming_the_keys(tmp_path: Path, tls_files: TlsFiles) -> None:
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    with pytest.raises(SyncError) as e:
        tls_context(MqttConfig(tls_ca=str(junk)))
    assert str(e.value).startswith(f"mqtt.tls_ca = {str(junk)!r}: cannot load CA certificates (")
    with pytest.raises(SyncError) as e:
        tls_context(MqttConfig(tls_ca=str(tls_files.ca), tls_cert=str(tls_files.client_cert)))
    assert str(e.value).startswith(
        f"mqtt.tls_cert = {str(tls_files.client_cert)!r} / mqtt.tls_key = None: cannot load the client certificate ("
    )
    # the key given apart is used
    ok = tls_context(
        MqttConfig(
            tls_ca=str(tls_files.ca), tls_cert=str(tls_files.client_cert), tls_key=str(tls_files.client_key)
        )
    )
    assert ok is not None


# ---- describe_connect_error --------------------------------------------------------------------
def test_a_refused_tcp_connect_names_host_port_and_cause() -> None:
    cfg = MqttConfig(host="127.0.0.1", port=free_port())
    with pytest.raises(OSError) as e:
        socket.create_connection((cfg.host, cfg.port), timeout=5)
    assert (
        describe_connect_error(cfg, e.value) == f"cannot connect to 127.0.0.1:{cfg.port}: Connection refused"
    )
    assert describe_connect_error(cfg, OSError("odd")) == f"cannot connect to 127.0.0.1:{cfg.port}: odd"


def test_a_tls_error_without_a_reason_is_one_line_not_a_traceback() -> None:
    # raised by Python code, not OpenSSL: no .reason (an AttributeError out of the sync thread before)
    cfg = MqttConfig(port=8883)
    assert describe_connect_error(cfg, ssl.SSLError(1, "handshake cut")) == (
        "TLS handshake with 127.0.0.1:8883 failed: handshake cut"
    )


# ---- probe_broker (doctor) --------------------------------------------------------------------
def connect_line(b: Broker, client_id: str) -> str:
    """mosquitto's notice for a new client: '... as ID (p2, c1, k10, u'user').'"""

    def find() -> str:
        lines = [ln for ln in b.log_text().splitlines() if f" as {client_id} (" in ln]
        return lines[-1] if lines else ""

    return wait_until(find, 15, lambda: f"{client_id} in the broker log:\n{b.log_text()}")


def test_the_probe_connects_under_its_own_id_and_leaves_cleanly(broker: Broker) -> None:
    cfg = MqttConfig(host="127.0.0.1", port=broker.port)
    assert probe_broker(cfg, "d1") == ("ok", f"127.0.0.1:{broker.port}: connected as anonymous")
    line = connect_line(broker, "d1-doctor")  # never the agent's own id: that would kick its session
    assert "k10" in line  # keepalive twice the timeout (5 s by default)
    wait_until(lambda: "Client d1-doctor disconnected." in broker.log_text(), 15, "a clean DISCONNECT")
    probe_broker(cfg, "d2", timeout_s=1)
    assert "k5" in connect_line(broker, "d2-doctor")  # never below 5 s


def test_the_probe_sends_the_username_and_the_password(auth_broker: Broker, tmp_path: Path) -> None:
    secret = tmp_path / "pw"
    secret.write_text("wrong\n")
    cfg = MqttConfig(host="127.0.0.1", port=auth_broker.port, username="cam", password_file=str(secret))
    where = f"127.0.0.1:{auth_broker.port}"
    assert probe_broker(cfg, "d1") == (
        "refused",
        f"{where}: broker refused the connection as 'cam': Not authorized",
    )
    secret.write_text("right\n")
    assert probe_broker(cfg, "d1") == ("ok", f"{where}: connected as cam")
    outcome, text = probe_broker(MqttConfig(host="127.0.0.1", port=auth_broker.port), "d1")
    assert outcome == "refused" and f"{where}: broker refused the connection anonymously: " in text


def test_a_missing_password_file_is_refused_before_connecting(tmp_path: Path) -> None:
    cfg = MqttConfig(port=free_port(), username="cam", password_file=str(tmp_path / "none"))
    outcome, text = probe_broker(cfg, "d1")
    assert outcome == "refused" and text.startswith("mqtt.password_file = ")


def test_the_probe_over_tls_with_a_client_certificate(tls_broker: Broker, tls_files: TlsFiles) -> None:
    assert tls_broker.tls_port is not None
    cfg = MqttConfig(
        host="127.0.0.1",
        port=tls_broker.tls_port,
        tls_ca=str(tls_files.ca),
        tls_cert=str(tls_files.client_cert),
        tls_key=str(tls_files.client_key),
    )
    assert probe_broker(cfg, "d1") == ("ok", f"127.0.0.1:{tls_broker.tls_port} (TLS): connected as anonymous")


def test_a_broker_certificate_from_another_ca_is_refused_and_says_so(
    tls_broker: Broker, tls_files: TlsFiles
) -> None:
    assert tls_broker.tls_port is not None
    cfg = MqttConfig(
        host="127.0.0.1",
        port=tls_broker.tls_port,
        tls_ca=str(tls_files.wrong_ca),
        tls_cert=str(tls_files.client_cert),
        tls_key=str(tls_files.client_key),
    )
    outcome, text = probe_broker(cfg, "d1")
    assert outcome == "refused"
    # the verify message is OpenSSL's own ("self-signed certificate in certificate chain" on 3.0)
    assert text.startswith(
        f"TLS handshake with 127.0.0.1:{tls_broker.tls_port} failed: certificate verify failed: "
    )
    assert text.endswith(f" (is the broker certificate signed by mqtt.tls_ca = {str(tls_files.wrong_ca)!r}?)")


def test_a_closed_port_is_unreachable_not_refused() -> None:
    port = free_port()
    assert probe_broker(MqttConfig(host="127.0.0.1", port=port), "d1") == (
        "unreachable",
        f"cannot connect to 127.0.0.1:{port}: Connection refused",
    )


def test_a_listener_that_never_answers_mqtt_is_unreachable_after_the_timeout() -> None:
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)
        port = srv.getsockname()[1]
        assert probe_broker(MqttConfig(host="127.0.0.1", port=port), "d1", timeout_s=1.0) == (
            "unreachable",
            f"127.0.0.1:{port}: no CONNACK within 1s",
        )


def junk_server(clients: int) -> tuple[socket.socket, threading.Thread]:
    """A loopback listener that answers ``clients`` connections with plain text: what a TLS client
    meets on a port that does not speak TLS."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)

    def serve() -> None:
        for _ in range(clients):
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            with conn:
                conn.sendall(b"HTTP/1.0 400 Bad Request\r\n\r\n" * 4)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    return srv, t


def test_a_tls_failure_is_described_by_openssls_reason_not_its_source_line(tls_files: TlsFiles) -> None:
    srv, t = junk_server(2)
    port = srv.getsockname()[1]
    try:
        cfg = MqttConfig(host="127.0.0.1", port=port, tls_ca=str(tls_files.ca))
        ctx = tls_context(cfg)
        assert ctx is not None
        with (
            pytest.raises(ssl.SSLError) as e,
            socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        ):
            ctx.wrap_socket(raw, server_hostname="127.0.0.1")
        reason = e.value.reason
        assert reason and "_ssl.c" in str(e.value)
        assert describe_connect_error(cfg, e.value) == f"TLS handshake with 127.0.0.1:{port} failed: {reason}"
        # doctor: a TLS mistake is a refusal (it never heals by waiting), in the same words
        assert probe_broker(cfg, "d1") == ("refused", f"TLS handshake with 127.0.0.1:{port} failed: {reason}")
    finally:
        srv.close()
        t.join(5)


def _suback(*codes: int) -> list[ReasonCode]:
    return [ReasonCode(PacketTypes.SUBACK, identifier=c) for c in codes]


def test_a_suback_splits_refused_filters_and_qos_0_grants_from_good_ones() -> None:
    filters = ["a/#", "b/#", "c/#", "d/#"]
    # 0x87 Not authorized (an ACL), 0 = granted QoS 0, 1 and 2 = granted as asked or better
    refused, qos0 = suback_problems(filters, _suback(0x87, 0, 1, 2))
    assert refused == ["a/# (Not authorized)"]
    assert qos0 == ["b/#"]
    assert suback_problems(filters, _suback(1, 1, 2, 1)) == ([], [])


def test_a_suback_with_fewer_codes_than_filters_leaves_no_filter_assumed_granted() -> None:
    refused, qos0 = suback_problems(["a/#", "b/#", "c/#"], _suback(1))
    assert refused == ["b/# (no reason code in the SUBACK)", "c/# (no reason code in the SUBACK)"]
    assert qos0 == []


@given(st.lists(st.sampled_from([0, 1, 2, 0x80, 0x87, 0x8F, 0x91, 0x97, 0x9E, 0xA1, 0xA2]), max_size=6))
def test_every_filter_is_either_good_refused_or_qos_0_never_two(codes: list[int]) -> None:
    filters = [f"t{i}/#" for i in range(4)]
    refused, qos0 = suback_problems(filters, _suback(*codes))
    named = [r.split(" ")[0] for r in refused] + qos0
    assert len(named) == len(set(named))
    for i, topic in enumerate(filters):
        code = codes[i] if i < len(codes) else None
        assert (topic in qos0) == (code == 0)
        assert (topic in [r.split(" ")[0] for r in refused]) == (code is None or code >= 0x80)
