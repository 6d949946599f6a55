"""Confirmations' rules without a broker (in process, so mutation testing reaches them): what
"collector" mode subscribes to, what a confirmation deletes, what a bad one counts, and when the
silence warning comes, on a real outbox and a clock the test moves."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
import pytest
from support.outbox import TOPIC, big_limits

from edge_agent.adapters.mqtt import confirms as confirms_mod
from edge_agent.adapters.mqtt.confirms import CHECK_EVERY_S, SILENCE_MIN_S, Confirmations
from edge_agent.adapters.mqtt.session import SyncSession
from edge_agent.adapters.outbox.outbox import Outbox
from edge_agent.core.config.schema import MqttConfig
from edge_agent.core.messages.confirm import encode

DEVICE = "dev-1"


class Clock:
    """Both clocks confirms.py reads, moved by the test (no sleeping)."""

    def __init__(self) -> None:
        self.mono = 1000.0
        self.wall = 1.7e9

    def monotonic(self) -> float:
        return self.mono

    def time(self) -> float:
        return self.wall


class Client:
    """What subscribe() needs of paho's client: the call's arguments and a return code."""

    def __init__(self, rc: int) -> None:
        self.rc = rc
        self.calls: list[tuple[str, int]] = []

    def subscribe(self, topic: str, qos: int) -> tuple[int, int]:
        self.calls.append((topic, qos))
        return self.rc, 1


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    c = Clock()
    monkeypatch.setattr(confirms_mod, "time", c)
    return c


@pytest.fixture
def ob(tmp_path: Path) -> Iterator[Outbox]:
    with Outbox(tmp_path / "q.db", big_limits()) as box:
        yield box


def cfg(**kw: Any) -> MqttConfig:
    return MqttConfig(**{"confirm": "collector", **kw})


def sent(ob: Outbox, n: int) -> list[int]:
    """``n`` rows acknowledged by the broker: SENT, kept until confirmed."""
    for i in range(n):
        ob.put(TOPIC, {"n": i})
    ob.flush()
    rows = [m.rowid for m in ob.claim(n)]
    ob.ack(rows)
    return rows


def test_collector_mode_subscribes_at_qos_1_on_the_device_topic(ob: Outbox, clock: Clock) -> None:
    c = Confirmations(cfg(topic_prefix="site"), DEVICE, ob)
    assert c.enabled and c.topic == f"site/{DEVICE}/confirm"
    assert ob.claims.confirm_timeout == cfg().confirm_timeout_s
    session = SyncSession(threading.Event())
    client = Client(mqtt.MQTT_ERR_SUCCESS)
    c.subscribe(client, session)  # type: ignore[arg-type]
    assert client.calls == [(f"site/{DEVICE}/confirm", 1)] and session.sub_refused is None
    assert c.stats() == {
        "mode": "collector",
        "received": 0,
        "rejected": 0,
        "rows": 0,
        "last": None,
        "error": None,
        "warning": None,
    }


def test_puback_mode_neither_subscribes_nor_applies(ob: Outbox, clock: Clock) -> None:
    c = Confirmations(cfg(confirm="puback"), DEVICE, ob)
    assert not c.enabled and ob.claims.confirm_timeout is None
    session = SyncSession(threading.Event())
    client = Client(mqtt.MQTT_ERR_SUCCESS)
    c.subscribe(client, session)  # type: ignore[arg-type]
    assert client.calls == []
    session.sub_refused = "refused"
    session.confirms.append(b"not json")
    assert c.apply(session) is None and c.stats()["mode"] == "puback"
    assert c.stats()["rejected"] == 0 and c.error is None


def test_a_failed_subscribe_call_is_kept_with_the_topic_and_why(ob: Outbox, clock: Clock) -> None:
    c = Confirmations(cfg(), DEVICE, ob)
    session = SyncSession(threading.Event())
    c.subscribe(Client(mqtt.MQTT_ERR_NO_CONN), session)  # type: ignore[arg-type]
    want = f"cannot subscribe to edge/{DEVICE}/confirm: {mqtt.error_string(mqtt.MQTT_ERR_NO_CONN)}"
    assert session.sub_refused == want


def test_a_refused_subscription_is_the_error_logged_once(
    ob: Outbox, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="edge_agent.mqtt")
    c = Confirmations(cfg(), DEVICE, ob)
    session = SyncSession(threading.Event())
    session.sub_refused = "the broker refused it"
    assert c.apply(session) == "the broker refused it"
    assert c.apply(session) == "the broker refused it"
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "mqtt: the broker refused it: results stay SENT and are resent; allow this device to "
        'subscribe to it (broker ACL) or set [mqtt] confirm = "puback"'
    ]  # once, with the two ways out
    assert c.stats()["error"] == "the broker refused it"


def test_a_confirmation_deletes_the_rows_it_covers_and_is_counted(ob: Outbox, clock: Clock) -> None:
    c = Confirmations(cfg(), DEVICE, ob)
    rows = sent(ob, 10)
    session = SyncSession(threading.Event())
    session.confirms.append(encode({ob.boot: [(rows[0], rows[3])]}))
    session.confirms.append(encode({ob.boot: [(rows[4], rows[5])]}))
    assert c.apply(session) is None
    assert not session.confirms
    assert ob.stats()["sent"] == 4
    s = c.stats()
    assert (s["received"], s["rejected"], s["rows"], s["last"]) == (2, 0, 6, clock.wall)


def test_a_bad_confirmation_is_refused_counted_and_the_next_still_applied(
    ob: Outbox, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="edge_agent.mqtt")
    c = Confirmations(cfg(), DEVICE, ob)
    rows = sent(ob, 3)
    session = SyncSession(threading.Event())
    session.confirms.extend([b"not json", b"{", encode({ob.boot: [(rows[0], rows[2])]})])
    c.apply(session)
    s = c.stats()
    assert (s["received"], s["rejected"], s["rows"]) == (1, 2, 3) and ob.stats()["sent"] == 0
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1  # throttled: the first refusal of the topic, not one per message
    assert lines[0].startswith(f"mqtt: edge/{DEVICE}/confirm: refused: ")


def test_a_refusal_is_logged_as_it_came_even_with_a_percent_sign(
    ob: Outbox, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    """Outside text in the line: it is an argument of the log call, never its format string."""
    caplog.set_level(logging.WARNING, logger="edge_agent.mqtt")
    c = Confirmations(cfg(), DEVICE, ob)
    session = SyncSession(threading.Event())
    session.confirms.append(b'{"v": "%d"}')
    c.apply(session)
    assert [r.getMessage() for r in caplog.records] == [
        f"mqtt: edge/{DEVICE}/confirm: refused: confirm message: v = '%d', expected 1"
    ]


def silent(c: Confirmations, clock: Clock, session: SyncSession, after: float) -> Any:
    clock.mono += after
    c.apply(session)
    return c.warning


def test_silence_warns_once_a_minute_after_sent_rows_were_first_seen(
    ob: Outbox, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="edge_agent.mqtt")
    c = Confirmations(cfg(topic_prefix="site"), DEVICE, ob)
    session = SyncSession(threading.Event())
    sent(ob, 5)
    assert silent(c, clock, session, CHECK_EVERY_S) is None  # first seen now
    assert silent(c, clock, session, SILENCE_MIN_S - CHECK_EVERY_S) is None  # 55 s: not yet
    warning = silent(c, clock, session, CHECK_EVERY_S)  # the minute, to the second
    assert warning == (
        f"5 results acknowledged by the broker have had no confirmation from the collector for "
        f"{SILENCE_MIN_S:.0f} s (none ever received): they are kept and resent. Is a collector "
        f"running (edge-agent collect), allowed by the broker's ACL to publish site/{DEVICE}/confirm, "
        f"with prefix 'site' like this device?"
    )
    assert c.stats()["warning"] == warning
    silent(c, clock, session, 1000)
    assert [r.getMessage() for r in caplog.records] == [f"mqtt: {warning}"]  # once


def test_silence_is_checked_every_few_seconds_not_on_every_apply(ob: Outbox, clock: Clock) -> None:
    c = Confirmations(cfg(), DEVICE, ob)
    session = SyncSession(threading.Event())
    sent(ob, 1)
    assert silent(c, clock, session, CHECK_EVERY_S - 0.5) is None  # not checked: not seen yet
    # seen at the next check only, so the minute counts from there
    assert silent(c, clock, session, 0.5) is None
    assert silent(c, clock, session, SILENCE_MIN_S - 4) is None  # checked: 56 s
    assert silent(c, clock, session, 4.5) is None  # 60.5 s, but 4.5 s since the last check
    assert silent(c, clock, session, 0.5) is not None


def test_no_sent_rows_means_no_silence_and_restarts_the_count(ob: Outbox, clock: Clock) -> None:
    c = Confirmations(cfg(), DEVICE, ob)
    session = SyncSession(threading.Event())
    assert silent(c, clock, session, 1000) is None  # nothing SENT: nothing to confirm
    rows = sent(ob, 2)
    assert silent(c, clock, session, CHECK_EVERY_S) is None  # first seen
    assert silent(c, clock, session, 30) is None
    session.confirms.append(encode({ob.boot: [(rows[0], rows[1])]}))
    assert silent(c, clock, session, CHECK_EVERY_S) is None  # confirmed: none SENT, count reset
    sent(ob, 1)
    assert silent(c, clock, session, 40) is None  # seen again now, not 85 s ago
    assert silent(c, clock, session, SILENCE_MIN_S - CHECK_EVERY_S) is None
    assert silent(c, clock, session, CHECK_EVERY_S) is not None


def test_a_recent_confirmation_delays_the_warning_and_changes_its_words(ob: Outbox, clock: Clock) -> None:
    c = Confirmations(cfg(), DEVICE, ob)
    session = SyncSession(threading.Event())
    rows = sent(ob, 4)
    assert silent(c, clock, session, CHECK_EVERY_S) is None  # first seen
    session.confirms.append(encode({ob.boot: [(rows[0], rows[0])]}))
    assert silent(c, clock, session, 50) is None  # a confirmation now, 3 still SENT
    assert silent(c, clock, session, SILENCE_MIN_S - CHECK_EVERY_S) is None  # 55 s after it
    warning = silent(c, clock, session, CHECK_EVERY_S)
    assert warning is not None and warning.startswith("3 results")
    assert "for 60 s (none lately)" in warning
