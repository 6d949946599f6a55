"""End to end on an enrolled broker, with enrolled credentials only: the real `edge-agent run`
(the embedded defaults plus a config pointing at the broker, its model receiver on) publishes
results that the real `edge-agent collect` stores; and the model receiver, logging in as
`<device>-model`, is subscribed (SUBACK granted) and takes a package the operator pushes while the
push's verdict watcher is connected too (`<op>` and `<op>-watch`: without role user names they
would share one client id and close each other's connection)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import cli, wait_until
from support.collector import REPO, CollectorProc, sqlite_url
from support.enrolled import Peer, enrolled_broker, secret
from support.fixtures_updates import pack
from support.fleetrun import count
from support.mqtt import Broker
from support.updates import INT8, write_config
from support.world import agent_toml

from edge_agent.adapters.mqtt.sync import MqttSync
from edge_agent.adapters.updates.package_file import transfer_parts
from edge_agent.adapters.updates.receiver import ModelReceiver
from edge_agent.adapters.updates.signing import available, generate_key
from edge_agent.app.cli.configfile import load_config
from edge_agent.app.updates.push import OutcomeWatcher, push_package
from edge_agent.core.config.schema import Config
from edge_agent.errors import SyncError

pytestmark = pytest.mark.slow
FRAMES = 30


@pytest.fixture
def enrolled(tmp_path: Path) -> Iterator[tuple[Broker, Path]]:
    broker = enrolled_broker(
        tmp_path, "cam-e2e", "--group", "shop", "--collector", "coll-e2e", "--operator", "ops"
    )
    broker.start()
    try:
        yield broker, tmp_path / "enroll"
    finally:
        broker.stop()


def test_agent_results_reach_the_collector_with_enrolled_credentials_only(
    tmp_path: Path, enrolled: tuple[Broker, Path]
) -> None:
    if not available():
        pytest.skip("PyNaCl missing: no trusted key for the model receiver")
    broker, d = enrolled
    pub = generate_key(tmp_path / "signing.key")
    state = tmp_path / "state"
    state.mkdir()
    conf = tmp_path / "agent.toml"
    conf.write_text(
        agent_toml(
            state,
            REPO / "models" / "samples",
            REPO / "models" / "demo-detector-int8.onnx",
            port=broker.port,
            device={"id": "cam-e2e"},
            camera={"loop": True},
            mqtt={
                "username": "cam-e2e",
                "password_file": str(d / "secrets" / "cam-e2e.password"),
                "role_usernames": True,
                "status_interval_s": None,
            },
            queue={"path": str(state / "q.db")},
            extra="",
            model_update={"trusted_keys": [pub], "groups": ["shop"]},
        )
    )
    col_conf = tmp_path / "collector.toml"
    col_conf.write_text(
        f'[collector]\nusername = "coll-e2e"\npassword_file = "{d}/secrets/coll-e2e.password"\n'
    )
    url = sqlite_url(tmp_path / "fleet.db")
    col = CollectorProc(broker.port, url, tmp_path / "col.log", "coll-e2e")
    col.args += ["--config", str(col_conf)]
    col.start()
    try:
        wait_until(lambda: "subscribed to" in col.text(), 30, lambda: col.text()[-2000:], every=0.2)
        run = cli("run", "--config", str(conf), "--max-frames", str(FRAMES), "-q", quiet=False, timeout=300)
        assert run.returncode == 0, run.stderr[-2000:]
        drain = cli("queue", "drain", "--config", str(conf), "--timeout", "60", quiet=False, timeout=300)
        assert drain.returncode == 0, drain.stderr[-2000:]
        stats = json.loads(cli("queue", "stats", "--config", str(conf), "--json", timeout=120).stdout)
        assert stats["pending"] == 0 and stats["seq"] >= FRAMES
        wait_until(
            lambda: count(url) >= stats["seq"],
            60,
            lambda: f"{count(url)} of {stats['seq']} stored",
            every=0.2,
        )
    finally:
        col.stop()
    assert count(url) == stats["seq"]
    print(f"\nenrolled e2e: {count(url)} results stored by the collector, every connection its own user")
    log = broker.log_text()
    # each connection under its own user, hence client id: none closed another's session
    for who in ("cam-e2e", "cam-e2e-model", "coll-e2e"):
        assert f"as {who} (" in log, who
    assert "already connected, closing old connection" not in log
    assert "Denied PUBLISH" not in log  # every kind the agent sent is in the ACL


def device_cfg(tmp_path: Path, broker: Broker, d: Path, **mqtt: object) -> Config:
    cfg = load_config(write_config(tmp_path, port=broker.port, device="cam-e2e"))
    base = {
        "username": "cam-e2e",
        "password_file": str(d / "secrets" / "cam-e2e.password"),
        "role_usernames": True,
    }
    cfg.mqtt = cfg.mqtt.model_copy(update={**base, **mqtt})
    cfg.model_update = cfg.model_update.model_copy(update={"groups": ["shop"]})
    return cfg


def receiver(cfg: Config) -> ModelReceiver:
    root = Path(cfg.device.state_dir)
    return ModelReceiver(cfg, root / "transfers", root / "inbox", lambda info: None)


@pytest.mark.parametrize("roles", [True, False])
def test_the_model_receiver_takes_an_operators_push_only_as_its_role_user(
    tmp_path: Path, enrolled: tuple[Broker, Path], roles: bool
) -> None:
    broker, d = enrolled
    cfg = device_cfg(tmp_path, broker, d, role_usernames=roles)
    rec = receiver(cfg)
    rec.start()
    ops = cfg.model_copy(deep=True)
    ops.mqtt = ops.mqtt.model_copy(
        update={
            "username": "ops",
            "password_file": str(d / "secrets" / "ops.password"),
            "role_usernames": True,
        }
    )
    # a real package for the group (push sends only a packed one: its chunk plan is in the manifest)
    if not available():
        pytest.skip("PyNaCl missing: push sends only signed packages")
    generate_key(tmp_path / "signing.key")
    pkg = pack(
        INT8, tmp_path / "pkg.tar", "9.0", "--for-group", "shop", "--sign", str(tmp_path / "signing.key")
    )
    n = 1 + len(transfer_parts(pkg)[0].chunks)  # the begin and every chunk
    try:
        wait_until(rec.subscribed.is_set, 15, "the receiver's SUBACK")
        assert rec.last_error is None  # granted at QoS 1
        marker = None
        if not roles:
            marker = Peer(broker.port, "cam-e2e-model", secret(d, "cam-e2e"), client_id="m")
            assert marker.connect() == "Success"
            marker.subscribe("edge/groups/shop/model/#")
        watcher = OutcomeWatcher(ops, "t1")  # connected through the push, as `model push --wait`
        push_package(ops, pkg, [], "shop", transfer_id="t1")
        assert watcher.wait(0.5, [], 0) == {}
        if roles:
            wait_until(lambda: rec.counts["messages"] >= n, 15, lambda: f"begin + chunks: {rec.snapshot()}")
        else:
            # logged in as "cam-e2e", whose ACL has no model topic: the broker withholds them all
            # (an acl_file still grants the SUBACK), so the key is what lets updates in. The
            # sync point: a client that may read them got all n by then.
            assert marker is not None
            wait_until(lambda: len(marker.got) >= n, 15, "the push at a reader allowed to see it")
            assert rec.counts["messages"] == 0
    finally:
        rec.stop()
    log = broker.log_text()
    assert ("as cam-e2e (" in log) == (not roles)  # the receiver's login: <device> only without roles
    assert "as ops (" in log and "as ops-watch (" in log
    assert "already connected, closing old connection" not in log  # push and watcher: two users


def test_the_sync_refuses_a_user_name_that_is_not_the_device(
    tmp_path: Path, enrolled: tuple[Broker, Path]
) -> None:
    broker, d = enrolled
    cfg = device_cfg(tmp_path, broker, d, username="someone-else")
    sync = MqttSync(cfg.mqtt, cfg.device.id, outbox=None)  # type: ignore[arg-type]
    with pytest.raises(
        SyncError, match=re.escape("needs mqtt.username = the device id 'cam-e2e', got 'someone-else'")
    ):
        sync.start()


def test_the_doctor_probe_logs_in_as_its_role_user(tmp_path: Path, enrolled: tuple[Broker, Path]) -> None:
    from edge_agent.adapters.mqtt.probe import probe_broker

    broker, d = enrolled
    cfg = device_cfg(tmp_path, broker, d)
    assert probe_broker(cfg.mqtt, "cam-e2e") == (
        "ok",
        f"127.0.0.1:{broker.port}: connected as cam-e2e-doctor",
    )
    wrong = cfg.mqtt.model_copy(update={"password_file": str(d / "secrets" / "coll-e2e.password")})
    outcome, text = probe_broker(wrong, "cam-e2e")
    assert outcome == "refused" and "refused the connection as 'cam-e2e-doctor'" in text
