"""Which device ids the collector takes (issue 36, the survivors of the collector-trust run): the
enrolled list wins over the devices already known (a device taken off the list is refused), a
broken or vanished list keeps the last good one without rereading it per message, a refused new
id does not use up the cap, and the poison-message counts forget the oldest first."""

from __future__ import annotations

import json
import logging
import os
import re
from pathlib import Path

import pytest

from edge_agent.app.collector import admission
from edge_agent.app.collector.admission import Admission, Deliveries, read_enrolled
from edge_agent.errors import ConfigError


def enrolled(path: Path, *devices: str, mtime_s: int = 1) -> Path:
    path.write_text(json.dumps({"version": 1, "devices": {d: {} for d in devices}}))
    os.utime(path, ns=(mtime_s * 10**9, mtime_s * 10**9))  # a new mtime even within the clock's step
    return path


def test_a_device_taken_off_the_enrolled_list_is_refused_though_it_has_a_row(tmp_path: Path) -> None:
    path = enrolled(tmp_path / "enrolled.json", "cam-1")
    adm = Admission(str(path), 100, 60, known=["cam-1", "cam-2"])
    assert adm.refuse("cam-1") is None
    assert "device 'cam-2' is not enrolled" in str(adm.refuse("cam-2"))
    enrolled(path, "cam-2", mtime_s=2)  # cam-1 revoked
    assert adm.refuse("cam-1") is not None and adm.refuse("cam-2") is None
    assert adm.refused == 2


def test_a_broken_list_keeps_the_last_good_one_and_is_not_reread_per_message(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = enrolled(tmp_path / "enrolled.json", "cam-1")
    adm = Admission(str(path), 100, 60)
    caplog.set_level(logging.ERROR, "edge_agent.collector")
    path.write_text("{broken")
    os.utime(path, ns=(2 * 10**9, 2 * 10**9))
    assert [adm.refuse("cam-1") for _ in range(5)] == [None] * 5
    (line,) = [r.getMessage() for r in caplog.records]
    assert "not JSON" in line and "keeping the previous list of 1 devices" in line
    # once fixed (a new mtime) it is read again
    enrolled(path, "cam-9", mtime_s=3)
    assert adm.refuse("cam-1") is not None and adm.refuse("cam-9") is None


def test_a_vanished_list_keeps_the_last_good_one_and_its_return_is_read(tmp_path: Path) -> None:
    path = enrolled(tmp_path / "enrolled.json", "cam-1")
    adm = Admission(str(path), 100, 60)
    path.unlink()  # a file being replaced (write to a temporary, rename over)
    assert adm.refuse("cam-1") is None and adm.refuse("cam-2") is not None
    enrolled(path, "cam-2", mtime_s=5)
    assert adm.refuse("cam-2") is None and adm.refuse("cam-1") is not None


def test_an_unchanged_list_is_not_read_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = enrolled(tmp_path / "enrolled.json", "cam-1")
    adm = Admission(str(path), 100, 60)
    reads: list[Path] = []
    real = admission.read_enrolled
    monkeypatch.setattr(admission, "read_enrolled", lambda p: reads.append(p) or real(p))
    for _ in range(3):
        adm.refuse("cam-1")
    assert reads == []
    enrolled(path, "cam-1", "cam-2", mtime_s=7)
    assert adm.refuse("cam-2") is None and reads == [path]


def test_a_refused_new_id_does_not_use_up_the_cap_of_the_next_interval() -> None:
    now = [0.0]
    adm = Admission(None, 1, 60, known=["old"], clock=lambda: now[0])
    assert adm.refuse("old") is None  # a known device is not new: the cap is untouched
    assert adm.refuse("a") is None
    assert adm.refuse("b") is not None and adm.refuse("b") is not None and adm.refused == 2
    now[0] = 59.9
    assert adm.refuse("c") is not None
    now[0] = 60.0  # a new interval: b is new again and takes the one place
    assert adm.refuse("b") is None and adm.refuse("c") is not None
    assert adm.refuse("a") is None and adm.refuse("b") is None  # both known now
    assert adm.refused == 4


def test_the_window_starts_at_the_first_new_id_after_the_interval_not_at_a_fixed_grid() -> None:
    now = [100.0]
    adm = Admission(None, 1, 60, clock=lambda: now[0])
    assert adm.refuse("a") is None
    now[0] = 170.0  # 70 s after the start: a new window from 170
    assert adm.refuse("b") is None
    now[0] = 225.0  # 55 s into that window: still full
    assert adm.refuse("c") is not None
    now[0] = 230.0
    assert adm.refuse("c") is None


def test_an_enrolled_file_at_the_size_bound_is_read_one_byte_more_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = enrolled(tmp_path / "enrolled.json", "cam-1")
    monkeypatch.setattr(admission, "ENROLLED_MAX_BYTES", path.stat().st_size)
    assert read_enrolled(path) == {"cam-1"}
    path.write_text(path.read_text() + " ")
    with pytest.raises(ConfigError, match="larger than"):
        read_enrolled(path)


@pytest.mark.parametrize("text", ["[]", '"devices"', "null", '{"devices": ["cam-1"]}'])
def test_an_enrolled_file_that_is_not_an_object_of_devices_is_refused(tmp_path: Path, text: str) -> None:
    path = tmp_path / "enrolled.json"
    path.write_text(text)
    with pytest.raises(ConfigError, match=re.escape('expected {"version": 1, "devices"')):
        read_enrolled(path)


def test_the_poison_counts_forget_the_oldest_and_a_stored_message_starts_again() -> None:
    d = Deliveries(max_keys=3)
    keys = [Deliveries.key(f"edge/cam-{i}/detections", b"p") for i in range(5)]
    assert [d.failed(k) for k in keys] == [1] * 5
    # three kept: the newest three, each counting on
    assert [d.failed(k) for k in keys[2:]] == [2, 2, 2]
    assert d.failed(keys[1]) == 1  # forgotten; now the newest, keys[2] is forgotten in its turn
    assert d.failed(keys[3]) == 3 and d.failed(keys[2]) == 1
    d.forget(keys[3])
    assert d.failed(keys[3]) == 1
    d.forget(Deliveries.key("never", b"seen"))  # forgetting an unknown key is no error


def test_the_delivery_key_tells_topics_and_payloads_apart() -> None:
    k = Deliveries.key("edge/cam-1/detections", b"x")
    assert k != Deliveries.key("edge/cam-2/detections", b"x")
    assert k != Deliveries.key("edge/cam-1/detections", b"y")
    assert k == Deliveries.key("edge/cam-1/detections", b"x") and len(k) == 16


def test_an_unreadable_or_broken_enrolled_file_is_one_line_with_the_cause(tmp_path: Path) -> None:
    missing = tmp_path / "missing.json"
    with pytest.raises(ConfigError) as err:
        read_enrolled(missing)
    assert str(err.value) == f"enrolled_file {missing}: cannot read it: No such file or directory"
    broken = tmp_path / "enrolled.json"
    broken.write_text('{"devices": {"cam-1": {}},}')
    with pytest.raises(ConfigError) as err:
        read_enrolled(broken)
    assert "not JSON: " in str(err.value) and "line 1 column" in str(err.value)  # where it broke
