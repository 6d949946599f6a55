"""``doctor``'s host probes on fake /proc and /dev trees and real loopback sockets, in process: the
CPU's int8 dot-product support, the cameras and serial ports found, a writable state dir, the free
space of a path not made yet, and a TCP port's answer."""

from __future__ import annotations

import shutil
import socket
from pathlib import Path

from support import free_port

from edge_agent.adapters.host import probes as system


def cpuinfo(root: Path, text: str) -> Path:
    (root / "proc").mkdir(parents=True)
    (root / "proc" / "cpuinfo").write_text(text)
    return root


def test_an_arm_cpu_with_asimddp_has_dot_products(tmp_path: Path) -> None:
    text = "processor\t: 0\nFeatures\t: fp asimd asimddp crc32\nCPU part\t: 0xd0b\n\nprocessor\t: 1\nCPU part\t: 0xd05\n"
    f = system.cpu_features(cpuinfo(tmp_path, text))
    assert f.model == "0xd0b" and f.dot_product and f.flags == ("asimd", "asimddp", "crc32", "fp")
    assert f.summary == "dot-product (asimddp): yes"


def test_an_arm_cpu_without_it_and_an_x86_with_vnni(tmp_path: Path) -> None:
    pi4 = system.cpu_features(cpuinfo(tmp_path / "pi4", "Hardware\t: BCM2835\nfeatures: fp asimd crc32\n"))
    assert (pi4.model, pi4.dot_product, pi4.summary) == ("BCM2835", False, "dot-product (asimddp): no")
    x86 = system.cpu_features(
        cpuinfo(
            tmp_path / "x86",
            "model name\t: Some Xeon\nflags\t\t: sse4_2 avx2 avx512_vnni\nmodel name\t: later\n",
        )
    )
    assert (x86.model, x86.dot_product, x86.summary) == ("Some Xeon", True, "VNNI: yes")
    plain = system.cpu_features(cpuinfo(tmp_path / "old", "model name: Old\nflags: sse2 avx2\n"))
    assert (plain.dot_product, plain.summary) == (False, "VNNI: no")
    for flag in ("avx_vnni", "avxvnni"):
        assert system.cpu_features(cpuinfo(tmp_path / flag, f"flags: {flag}\n")).dot_product


def test_a_cpuinfo_with_bytes_that_are_not_utf8_is_still_read(tmp_path: Path) -> None:
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "cpuinfo").write_bytes(
        b"Hardware\t: Vendor \xff\xfe board\nFeatures\t: asimd asimddp\n"
    )
    f = system.cpu_features(tmp_path)
    assert f.model == "Vendor \ufffd\ufffd board" and f.dot_product


def test_no_cpuinfo_is_unknown_not_an_error(tmp_path: Path) -> None:
    f = system.cpu_features(tmp_path)
    assert (f.model, f.flags, f.dot_product, f.summary) == ("unknown", (), False, "unknown")
    assert system.cpu_features(cpuinfo(tmp_path / "empty", "")).model == "unknown"


def test_cameras_and_serial_ports_are_listed_sorted(tmp_path: Path) -> None:
    dev = tmp_path / "dev"
    dev.mkdir()
    for name in (
        "video2",
        "video0",
        "ttyUSB0",
        "ttyACM1",
        "ttyAMA0",
        "ttyS0",
        "ttyS1",
        "serial0",
        "ttyTHS1",
        "sda",
    ):
        (dev / name).touch()
    found = system.list_devices(tmp_path)
    assert found == {
        "cameras": [str(dev / "video0"), str(dev / "video2")],
        "serial": [str(dev / n) for n in ("serial0", "ttyACM1", "ttyAMA0", "ttyS0", "ttyTHS1", "ttyUSB0")],
    }
    assert system.list_devices(tmp_path / "nothing") == {"cameras": [], "serial": []}


def test_a_state_dir_is_made_and_probed_and_a_file_in_the_way_is_named(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b"
    assert system.dir_writable(target) == (True, str(target))
    assert target.is_dir() and list(target.iterdir()) == []  # the probe file is gone
    assert system.dir_writable(target) == (True, str(target))  # already there: as good
    (tmp_path / "f").write_text("x")
    ok, msg = system.dir_writable(tmp_path / "f" / "sub")
    assert not ok and msg == f"{tmp_path / 'f' / 'sub'}: Not a directory"


def test_free_space_of_a_path_not_made_yet_is_its_nearest_parents(tmp_path: Path) -> None:
    free = system.free_disk_bytes(tmp_path / "not" / "yet" / "made")
    assert free is not None and abs(free - shutil.disk_usage(tmp_path).free) < 64 * 1024 * 1024


def test_a_tcp_port_answers_or_says_why_not() -> None:
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)
        port = srv.getsockname()[1]
        assert system.tcp_reachable("127.0.0.1", port) == (True, f"127.0.0.1:{port} accepts connections")
    closed = free_port()
    assert system.tcp_reachable("127.0.0.1", closed) == (False, f"127.0.0.1:{closed}: Connection refused")
