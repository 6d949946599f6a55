from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from edge_agent.adapters.host.statusfile import read_status, write_status
from edge_agent.errors import EdgeAgentError


def test_roundtrip_and_age(tmp_path: Path) -> None:
    path = tmp_path / "run" / "status.json"  # directory created on first write
    status = {
        "fps": 9.5,
        "queue_depth": 3,
        "camera": {"state": "streaming"},
        "provider": "CPUExecutionProvider",
    }
    write_status(path, status, now=1000.0)
    snap = read_status(path, now=1012.5)
    assert snap is not None
    assert snap.data["fps"] == 9.5 and snap.data["camera"] == {"state": "streaming"}
    assert snap.written_at == 1000.0 and snap.age_s == 12.5
    assert snap.is_stale(10.0) and not snap.is_stale(15.0)
    # the agent's group may run `edge-agent status`, others may not read it; the agent writes
    assert oct(path.stat().st_mode & 0o777) == oct(0o640)
    assert [p.name for p in path.parent.iterdir()] == ["status.json"]  # no temp files left behind


def test_missing_file_is_none_and_garbage_is_an_error(tmp_path: Path) -> None:
    assert read_status(tmp_path / "absent.json") is None
    bad = tmp_path / "bad.json"
    bad.write_text("{half")
    with pytest.raises(EdgeAgentError, match="not a valid status file"):
        read_status(bad)
    bad.write_text(json.dumps({"fps": 1}))
    with pytest.raises(EdgeAgentError, match="'ts'"):
        read_status(bad)


def test_failed_write_leaves_old_file_intact(tmp_path: Path) -> None:
    path = tmp_path / "status.json"
    write_status(path, {"fps": 1.0}, now=5.0)
    circular: dict[str, object] = {}
    circular["self"] = circular
    with pytest.raises(ValueError, match="Circular"):
        write_status(path, circular, now=6.0)
    snap = read_status(path, now=6.0)
    assert snap is not None and snap.data["fps"] == 1.0
    assert sorted(os.listdir(tmp_path)) == ["status.json"]


def test_readers_never_see_a_partial_file(tmp_path: Path) -> None:
    path = tmp_path / "status.json"
    write_status(path, {"n": 0, "pad": "x" * 20000})
    stop = threading.Event()
    errors: list[str] = []

    def reader() -> None:
        while not stop.is_set():
            try:
                snap = read_status(path)
                assert snap is not None and len(snap.data["pad"]) == 20000
            except (EdgeAgentError, AssertionError) as exc:
                errors.append(str(exc))

    t = threading.Thread(target=reader)
    t.start()
    for i in range(200):
        write_status(path, {"n": i, "pad": "x" * 20000})
    stop.set()
    t.join()
    assert errors == []
    snap = read_status(path)
    assert snap is not None and snap.data["n"] == 199


def test_failed_rename_removes_the_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "status.json"
    target.mkdir()  # os.replace(file, directory) fails after the temp file was written
    with pytest.raises(OSError):
        write_status(target, {"fps": 1.0})
    assert sorted(os.listdir(tmp_path)) == ["status.json"]


def test_a_file_from_the_future_is_age_zero(tmp_path: Path) -> None:
    """The clock was stepped back (NTP on a board without an RTC): never a negative age."""
    p = tmp_path / "status.json"
    write_status(p, {"state": "running"}, now=1000.0)
    snap = read_status(p, now=900.0)
    assert snap is not None and snap.age_s == 0.0 and not snap.is_stale(0.0)


@pytest.mark.parametrize("umask", [0o000, 0o022, 0o077])
def test_the_status_file_is_0640_whatever_the_umask(tmp_path: Path, umask: int) -> None:
    """0640 on the real file under any umask: 0 would have left 0600 of mkstemp or a 0666 file,
    077 must not take the group's read away."""
    old = os.umask(umask)
    try:
        path = tmp_path / "status.json"
        write_status(path, {"fps": 1.0}, now=5.0)
        write_status(path, {"fps": 2.0}, now=6.0)  # replaced, not appended to: the mode again
    finally:
        os.umask(old)
    assert oct(path.stat().st_mode & 0o777) == oct(0o640)
    snap = read_status(path, now=6.0)
    assert snap is not None and snap.data["fps"] == 2.0


def test_the_folder_is_made_however_deep_and_a_ts_of_its_own_is_kept(tmp_path: Path) -> None:
    # the systemd RuntimeDirectory may be gone after a reboot: /run/edge-agent/<name>/status.json
    path = tmp_path / "run" / "edge-agent" / "status.json"
    write_status(path, {"fps": 2.0, "ts": 900.0}, now=1000.0)  # the snapshot's own time wins
    snap = read_status(path, now=1000.0)
    assert snap is not None and snap.written_at == 900.0 and snap.age_s == 100.0


def test_values_json_cannot_carry_are_written_as_text(tmp_path: Path) -> None:
    # a Path or a datetime in the snapshot must not crash the loop that writes it every few seconds
    path = tmp_path / "status.json"
    write_status(path, {"model": Path("/opt/m.onnx")}, now=1.0)
    snap = read_status(path, now=1.0)
    assert snap is not None and snap.data["model"] == "/opt/m.onnx"


def test_the_temp_file_sits_beside_the_status_file_whatever_tmpdir_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # $TMPDIR on another filesystem (/dev/shm here, tmpfs): a temp file there cannot be renamed
    # over the status file (EXDEV), and the status would never be written
    other = Path("/dev/shm")
    if not other.is_dir() or os.stat(other).st_dev == os.stat(tmp_path).st_dev:
        pytest.skip("needs /dev/shm on another filesystem than tmp_path")
    monkeypatch.setattr("tempfile.tempdir", str(other))
    before = set(os.listdir(other))
    write_status(tmp_path / "status.json", {"fps": 3.0}, now=1.0)
    snap = read_status(tmp_path / "status.json", now=1.0)
    assert snap is not None and snap.data["fps"] == 3.0
    assert set(os.listdir(other)) == before


def test_a_status_path_that_cannot_be_read_is_one_error_naming_it(tmp_path: Path) -> None:
    (tmp_path / "status.json").mkdir()
    with pytest.raises(EdgeAgentError) as ei:
        read_status(tmp_path / "status.json")
    assert str(ei.value).startswith(f"{tmp_path / 'status.json'}: cannot read status file: [Errno 21]")


def test_the_same_snapshot_is_the_same_file_whatever_its_key_order(tmp_path: Path) -> None:
    # a monitoring script may compare the file with its last copy (cmp, a hash) to see a change
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    write_status(a, {"fps": 1.0, "camera": {"state": "up", "id": "c1"}}, now=1.0)
    write_status(b, {"camera": {"id": "c1", "state": "up"}, "fps": 1.0}, now=1.0)
    assert a.read_bytes() == b.read_bytes()
