"""The MQTT model receiver fed hostile messages directly (no broker): nothing stored without a
signed begin, every chunk checked against its signed hash, storage capped, bad state on disk
discarded, no exception escapes."""

from __future__ import annotations

import base64
import json
import logging
import os
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Optional

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.updates import inbox_body, make_begin, signed_begin, trusted_key, with_keys, write_config

from edge_agent.adapters.host import durable
from edge_agent.adapters.updates import intake as model_mqtt
from edge_agent.adapters.updates import signing
from edge_agent.adapters.updates.receiver import MAX_TRANSFERS, ModelReceiver
from edge_agent.app.cli.configfile import load_config

BASE = "edge/cam-1/model"


def _receiver(
    make_config: Callable[..., Path], extra: str = "", events: Optional[list[Any]] = None
) -> tuple[ModelReceiver, Path]:
    cfg = load_config(make_config(extra=with_keys(extra)))
    root = Path(cfg.device.state_dir)
    sink = events if events is not None else []
    rec = ModelReceiver(cfg, root / "transfers", root / "inbox", lambda info: sink.append(info))
    rec.load()
    return rec, root


def _begin(data: bytes, tid: str = "t1", chunk: int = 1024, **manifest: Any) -> bytes:
    return make_begin(data, tid, chunk, **manifest)


def _old_begin(data: bytes, tid: str = "t1", chunk: int = 1024, **over: Any) -> bytes:
    """The unsigned begin of package format 1 (what today's main sends and takes)."""
    b = {"transfer_id": tid, "size": len(data), "sha256": "0" * 64, "chunks": -(-len(data) // chunk)}
    return json.dumps({**b, "chunk_size": chunk, **over}).encode()


def _bytes_under(d: Path) -> int:
    return sum(p.stat().st_size for p in d.rglob("*") if p.is_file())


def test_an_unsigned_or_badly_signed_begin_writes_nothing(
    make_config: Callable[..., Path], tmp_path: Path
) -> None:
    rec, root = _receiver(make_config)
    good = json.loads(_begin(b"a" * 2048))
    other = tmp_path / "other.key"
    signing.generate_key(other)
    lying = json.loads(base64.b64decode(good["manifest"]))
    lying["transfer"]["chunks"] *= 2  # 4 hashes for 2 chunks, signed by the trusted key
    lying_data = json.dumps(lying).encode()
    signed_lie = {"manifest": _b64(lying_data), "signature": _b64(signing.sign(lying_data, trusted_key()[0]))}
    for bad in (
        _old_begin(b"a" * 2048, chunks=10**9),  # issue 17's crash, in the old format: refused as such
        _old_begin(b"a" * 2048),
        json.dumps({**good, "signature": _b64(b"x" * 64)}).encode(),
        json.dumps({**good, "signature": good["signature"][:-8]}).encode(),  # not 64 bytes
        json.dumps({**good, "manifest": "***"}).encode(),  # not base64
        json.dumps({**good, **signed_lie}).encode(),
        signed_begin(other, b"a" * 2048)[0],  # a key the device does not trust
        _begin(b"a" * 2048, tid="../etc"),
        b"[]",
        b"x" * (600 << 10),  # over the begin's 512 KiB
    ):
        rec.handle(f"{BASE}/begin", bad)
    assert rec.counts["refused"] == 10 and rec.counts["unsigned"] == 10 and rec.counts["failed"] == 0
    assert list((root / "transfers").iterdir()) == []


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_chunks_without_a_begin_and_empty_or_wrong_sized_chunks_are_never_stored(
    make_config: Callable[..., Path],
) -> None:
    rec, root = _receiver(make_config)
    for i in range(50):  # today: stored under made-up ids until the disk is full
        rec.handle(f"{BASE}/chunk/made-up-{i}/0", b"x" * 1024)
    assert list((root / "transfers").iterdir()) == []
    data = os.urandom(2500)
    rec.handle(f"{BASE}/begin", _begin(data))
    rec.handle(f"{BASE}/chunk/t1/0", b"")  # empty: refused (today: always passes)
    rec.handle(f"{BASE}/chunk/t1/0", data[:1000])  # shorter than chunk_size
    rec.handle(f"{BASE}/chunk/t1/2", data[2048:] + b"x")  # the last chunk is exactly size - 2048
    rec.handle(f"{BASE}/chunk/t1/3", b"y" * 1024)  # outside the transfer
    assert (
        rec.counts["refused"] == 54 and rec.counts["unknown_transfer"] == 50 and rec.counts["bad_chunk"] == 4
    )
    assert list((root / "transfers" / "t1" / "chunks").iterdir()) == []
    for i in range(3):
        rec.handle(f"{BASE}/chunk/t1/{i}", data[i * 1024 : (i + 1) * 1024])
    assert inbox_body(root / "inbox" / "t1.pkg", data)
    assert not (root / "transfers" / "t1").exists()


def test_storage_is_capped_in_count_and_bytes(make_config: Callable[..., Path]) -> None:
    """220 made-up transfers of 1 MiB each (today: 220 MiB on disk, never cleaned)."""
    rec, root = _receiver(make_config, extra="[model_update]\nmax_package_mb = 2")
    for i in range(220):
        data = bytes([i % 256]) * (1 << 20)
        rec.handle(f"{BASE}/begin", _begin(data, tid=f"fill-{i}", chunk=1 << 19))
        rec.handle(f"{BASE}/chunk/fill-{i}/0", data[: 1 << 19])
    dirs = list((root / "transfers").glob("fill-*"))
    assert len(dirs) <= MAX_TRANSFERS
    assert _bytes_under(root / "transfers") <= rec.storage_cap
    assert rec.counts["failed"] == 0


def test_a_transfer_silent_for_a_day_expires(make_config: Callable[..., Path]) -> None:
    rec, root = _receiver(make_config)
    data = os.urandom(4096)
    rec.handle(f"{BASE}/begin", _begin(data, tid="old"))
    rec.handle(f"{BASE}/chunk/old/0", data[:1024])
    day_ago = time.time() - model_mqtt.TRANSFER_MAX_AGE_S - 60
    for p in (root / "transfers" / "old").rglob("*"):
        os.utime(p, (day_ago, day_ago))
    rec2, _ = _receiver(make_config)  # a restart a day later
    assert not (root / "transfers" / "old").exists()
    assert rec2.snapshot()["transfers"] == 0


def test_bad_state_on_disk_is_discarded_at_start_with_one_line(
    make_config: Callable[..., Path], caplog: pytest.LogCaptureFixture
) -> None:
    cfg = load_config(make_config())
    tdir = Path(cfg.device.state_dir) / "transfers"
    poison = tdir / "poison"  # what today's main persisted for chunks = 10**9: crash-loop at start
    (poison / "chunks").mkdir(parents=True)
    (poison / "begin.json").write_text(
        json.dumps(
            {"transfer_id": "poison", "size": 10, "sha256": "a" * 64, "chunks": 10**9, "chunk_size": 10}
        )
    )
    (tdir / "garbage").mkdir()
    (tdir / "garbage" / "begin.json").write_bytes(b"\xff\x00{")
    (tdir / "stray-file").write_bytes(b"x" * 100)
    (tdir / "done.json").write_text('{"not": "a list"}')
    caplog.set_level(logging.ERROR, logger="edge_agent.model_mqtt")
    rec = ModelReceiver(cfg, tdir, Path(cfg.device.state_dir) / "inbox", lambda info: None)
    rec.load()
    assert sorted(p.name for p in tdir.iterdir()) == ["done.json"]
    assert rec.counts["discarded_at_start"] == 3
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 3 and all("\n" not in line for line in lines), lines


def test_a_reused_transfer_id_with_other_content_starts_over(make_config: Callable[..., Path]) -> None:
    rec, root = _receiver(make_config)
    data = os.urandom(2048)
    rec.handle(f"{BASE}/begin", _begin(data))
    rec.handle(f"{BASE}/chunk/t1/0", data[:1024])
    rec.handle(f"{BASE}/begin", _begin(data))  # a redelivered begin keeps the chunk
    assert (root / "transfers" / "t1" / "chunks" / "0").exists()
    rec.handle(f"{BASE}/begin", _begin(os.urandom(2048)))
    assert list((root / "transfers" / "t1" / "chunks").iterdir()) == []


def test_resume_after_restart_counts_the_chunks_on_disk(make_config: Callable[..., Path]) -> None:
    rec, root = _receiver(make_config)
    data = os.urandom(3000)
    rec.handle(f"{BASE}/begin", _begin(data))
    rec.handle(f"{BASE}/chunk/t1/0", data[:1024])
    (root / "transfers" / "t1" / "chunks" / ".1.tmp").write_bytes(b"half")  # a kill -9 mid-write
    rec2, _ = _receiver(make_config)
    assert not (root / "transfers" / "t1" / "chunks" / ".1.tmp").exists()
    rec2.handle(f"{BASE}/chunk/t1/1", data[1024:2048])
    rec2.handle(f"{BASE}/chunk/t1/2", data[2048:])
    assert inbox_body(root / "inbox" / "t1.pkg", data)


def test_force_from_the_sender_never_reaches_the_inbox(make_config: Callable[..., Path]) -> None:
    rec, root = _receiver(make_config)
    data = os.urandom(1024)
    rec.handle(f"{BASE}/begin", json.dumps({**json.loads(_begin(data)), "force": True}).encode())
    rec.handle(f"{BASE}/chunk/t1/0", data)
    req = json.loads((root / "inbox" / "t1.request.json").read_text())
    assert req == {"origin": "mqtt:t1"}


def test_an_unexpected_error_is_counted_and_does_not_escape(
    make_config: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    rec, _ = _receiver(make_config)

    def full_disk(*a: Any, **k: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(model_mqtt, "write_durable", full_disk)
    rec.handle(f"{BASE}/begin", _begin(os.urandom(1024)))
    monkeypatch.setattr(model_mqtt, "parse_signed_begin", lambda *a: (_ for _ in ()).throw(MemoryError()))
    rec.handle(f"{BASE}/begin", _begin(os.urandom(1024)))
    snap = rec.snapshot()
    assert snap["failed"] == 2 and "MemoryError" in snap["last_error"]


def test_chunks_are_written_with_fsync_then_rename(
    make_config: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    rec, _ = _receiver(make_config)
    data = os.urandom(1024)
    rec.handle(f"{BASE}/begin", _begin(data + data, tid="t2"))
    calls: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(durable.os, "fsync", lambda fd: (calls.append("fsync"), real_fsync(fd))[1])
    monkeypatch.setattr(
        durable.os,
        "replace",
        lambda a, b: (calls.append(f"replace {Path(b).name}"), real_replace(a, b))[1],
    )
    rec.handle(f"{BASE}/chunk/t2/0", data)
    assert calls[:2] == ["fsync", "replace 0"], calls  # the data is on disk before the name appears
    assert calls.count("fsync") >= 2  # and the directory entry too


# ---- property: random topics and payloads ------------------------------------------------------
_tids = st.sampled_from(["t1", "t2", "x", "../a", "", "a/b", "é", "t1\x00"])
_topics = st.one_of(
    st.just(f"{BASE}/begin"),
    st.builds(lambda t, i: f"{BASE}/chunk/{t}/{i}", _tids, st.integers(-2, 10**12).map(str)),
    st.builds(lambda t, s: f"{BASE}/chunk/{t}/{s}", _tids, st.text(max_size=12)),
    st.text(max_size=40).map(lambda s: f"{BASE}/{s}"),
)
_ints = st.one_of(st.integers(-(10**12), 10**12), st.sampled_from([0, 1, 1023, 1024, 2048, 10**9, 2**63]))
_begins = st.fixed_dictionaries(
    {},
    optional={
        "transfer_id": _tids,
        "size": _ints,
        "chunks": _ints,
        "chunk_size": _ints,
        "sha256": st.sampled_from(["a" * 64, "A" * 64, "", "z"]),
        "name": st.one_of(st.none(), st.text(max_size=300), st.integers()),
        "force": st.booleans(),
    },
).map(lambda d: json.dumps(d).encode())
_payloads = st.one_of(_begins, st.binary(max_size=3000), st.just(b"\x00" * 1024), st.just(b"[1,2]"))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(_topics, _payloads), max_size=30))
def test_property_random_messages_never_escape_and_stay_bounded(messages: list[tuple[str, bytes]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        _check_random_messages(Path(tmp), messages)


def _check_random_messages(tmp: Path, messages: list[tuple[str, bytes]]) -> None:
    rec, root = _receiver(lambda **kw: write_config(tmp, **kw), extra="[model_update]\nmax_package_mb = 0.05")
    active_before = (root / "models" / "active.json").exists()
    for topic, payload in messages:
        rec.handle(topic, payload)  # raises nothing, whatever arrives
    assert rec.counts["failed"] == 0, rec.last_error
    tdirs = [p for p in (root / "transfers").iterdir() if p.is_dir()]
    assert len(tdirs) <= MAX_TRANSFERS
    assert _bytes_under(root / "transfers") <= rec.storage_cap + 8192  # plus the small begin/done files
    assert list((root / "inbox").glob("*.pkg")) == []  # no random sha256 ever matches
    assert (root / "models" / "active.json").exists() == active_before  # the running model untouched


def test_the_receiver_thread_is_supervised(make_config: Callable[..., Path], tmp_path: Path) -> None:
    """Whatever ends paho's thread, the update worker starts it again and counts it."""
    from support import free_port

    from edge_agent.adapters.updates import signing
    from edge_agent.app.updates.agent_side import ModelUpdates, release_run_lock

    pub = signing.generate_key(tmp_path / "signing.key")  # a key, not a package: no `model pack` run
    cfg = load_config(make_config(port=free_port(), extra=f'[model_update]\ntrusted_keys = ["{pub}"]'))
    updates = ModelUpdates(cfg, lambda: None)
    updates.start()
    try:
        rec = updates._receiver
        assert rec is not None and rec.alive()
        rec._client.loop_stop()  # the thread ends (no broker here: it was retrying)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not (
            updates.status()["receiver"]["restarts"] and updates.status()["receiver"]["alive"]
        ):
            time.sleep(0.1)
        snap = updates.status()["receiver"]
        assert snap["restarts"] == 1 and snap["alive"] is True, snap
    finally:
        updates.stop()
        release_run_lock(cfg)
    assert not rec.alive()


# ---- the free-space floor ------------------------------------------------------------------------
def test_the_floor_is_the_larger_of_its_two_keys_plus_the_queue_reserve_on_the_same_disk(
    make_config: Callable[..., Path], tmp_path: Path
) -> None:
    rec, root = _receiver(
        make_config, "[model_update]\ntransfer_min_free_mb = 2\ntransfer_min_free_percent = 5"
    )
    cfg = rec.cfg
    assert Path(cfg.queue.path).parent.stat().st_dev == root.stat().st_dev  # the outbox is on this disk
    reserve = cfg.queue.reserve_bytes
    assert reserve == 1 << 20
    assert model_mqtt.transfer_floor(cfg, root, 10 << 20) == (2 << 20) + reserve  # 2 MiB > 5 % of 10
    assert model_mqtt.transfer_floor(cfg, root, 100 << 20) == 5 * (1 << 20) + reserve  # 5 % of 100 MiB
    elsewhere = cfg.model_copy(update={"queue": cfg.queue.model_copy(update={"path": "/proc/outbox.db"})})
    assert model_mqtt.transfer_floor(elsewhere, root, 10 << 20) == 2 << 20  # another filesystem


@pytest.mark.parametrize(("extra", "stored"), [("transfer_min_free_percent = 0", True), ("", False)])
def test_a_chunk_is_stored_only_while_the_floor_stays_free(
    make_config: Callable[..., Path], extra: str, stored: bool
) -> None:
    """100 MiB free on a 1 GiB disk: under the default floor (10 % = 102 MiB) nothing is stored;
    with the percent at 0 the 64 MiB floor lets the transfer in."""
    cfg = load_config(make_config(extra=with_keys(f"[model_update]\n{extra}")))
    root = Path(cfg.device.state_dir)
    rec = ModelReceiver(
        cfg, root / "transfers", root / "inbox", lambda info: None, space=lambda p: (100 << 20, 1 << 30)
    )
    rec.load()
    data = os.urandom(2048)
    rec.handle(f"{BASE}/begin", _begin(data))
    rec.handle(f"{BASE}/chunk/t1/0", data[:1024])
    assert (root / "transfers" / "t1").exists() == stored
    assert rec.counts["low_space"] == (0 if stored else 1) and rec.counts["unknown_transfer"] == (
        0 if stored else 1
    )
    if not stored:  # the begin's refusal names the floor; the chunk after it has no transfer
        assert rec.counts["refused"] == 2


def test_a_transfer_stops_at_the_floor_on_a_real_small_disk(
    make_config: Callable[..., Path], tmp_path: Path
) -> None:
    """A 16 MiB tmpfs, a 4 MiB floor, a signed 8 MiB transfer: then something else fills the disk
    (the outbox growing): the chunks stop before the floor, counted, none half-written."""
    from support.tmpfs import free, tmpfs

    with tmpfs(tmp_path / "small", size="16m") as disk:
        cfg = load_config(
            make_config(
                extra=with_keys("[model_update]\ntransfer_min_free_mb = 4\ntransfer_min_free_percent = 0")
            )
        )
        rec = ModelReceiver(cfg, disk / "transfers", disk / "inbox", lambda info: None)
        rec.load()
        data = os.urandom(8 << 20)
        chunk = 1 << 20
        rec.handle(f"{BASE}/begin", _begin(data, chunk=chunk))
        for i in range(3):
            rec.handle(f"{BASE}/chunk/t1/{i}", data[i * chunk : (i + 1) * chunk])
        assert rec.counts["low_space"] == 0
        with open(disk / "outbox-growth", "wb") as f:  # the queue takes 7 MiB meanwhile
            f.write(b"\0" * (7 << 20))
        for i in range(3, 8):
            rec.handle(f"{BASE}/chunk/t1/{i}", data[i * chunk : (i + 1) * chunk])
        assert rec.counts["low_space"] >= 1 and rec.counts["failed"] == 0
        assert free(disk) >= 4 << 20  # the floor held
        kept = sorted(int(p.name) for p in (disk / "transfers" / "t1" / "chunks").iterdir())
        assert kept == list(range(len(kept))) and 3 <= len(kept) < 8
        assert all((disk / "transfers" / "t1" / "chunks" / str(i)).stat().st_size == chunk for i in kept)
