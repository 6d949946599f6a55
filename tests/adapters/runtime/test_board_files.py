"""Board detection and TensorRT facts read from a board's own files, one signal at a time (issue 19).

Every board is recognised from each of its signals alone (the device-tree model, the compatible
list, the L4T release file, the machine), because real images lack one or the other (a Pi OS
container without /proc/device-tree/model, an L4T container with only /etc/nv_tegra_release).
The core count is what sets the Pi's threads: SMT siblings and sockets are counted right.
"""

from __future__ import annotations

import logging
import socket
from pathlib import Path
from typing import Optional

import pytest
from support.notify import received

from edge_agent.adapters.runtime.board import BoardInfo, detect_board, physical_cores
from edge_agent.adapters.runtime.tensorrt_host import (
    FIRST_BUILD_EXTEND_S,
    EngineBuild,
    engine_dir,
    gpu_key,
    tensorrt_version,
)


def _root(
    tmp: Path,
    model: Optional[bytes] = None,
    compatible: Optional[list[str]] = None,
    tegra: Optional[str] = None,
    cpuinfo: Optional[str] = None,
) -> Path:
    dt = tmp / "proc/device-tree"
    dt.mkdir(parents=True)
    if model is not None:
        (dt / "model").write_bytes(model)
    if compatible is not None:
        (dt / "compatible").write_bytes(b"\x00".join(c.encode() for c in compatible) + b"\x00")
    if tegra is not None:
        (tmp / "etc").mkdir()
        (tmp / "etc/nv_tegra_release").write_text(tegra)
    if cpuinfo is not None:
        (tmp / "proc/cpuinfo").write_text(cpuinfo)
    return tmp


@pytest.mark.parametrize(
    ("model", "compatible", "kind"),
    [
        (b"Raspberry Pi 5 Model B Rev 1.0\x00", None, "rpi5"),
        (None, ["raspberrypi,5-model-b"], "rpi5"),
        (None, ["brcm,bcm2712"], "rpi5"),
        (b"Raspberry Pi 4 Model B Rev 1.4\x00", None, "rpi4"),
        (None, ["raspberrypi,4-model-b"], "rpi4"),
        (None, ["brcm,bcm2711"], "rpi4"),
        (b"Raspberry Pi 3 Model B Plus Rev 1.3\x00", None, "rpi"),
        (None, ["raspberrypi,3-model-b-plus", "brcm,bcm2837"], "rpi"),
        (b"NVIDIA Jetson Nano Developer Kit\x00", None, "jetson"),
        (None, ["nvidia,p3450-0000", "nvidia,tegra210"], "jetson"),
        (b"Pine64 RockPro64\x00", ["pine64,rockpro64", "rockchip,rk3399"], "generic-arm"),
    ],
)
def test_each_signal_alone_names_the_board(
    tmp_path: Path, model: Optional[bytes], compatible: Optional[list[str]], kind: str
) -> None:
    b = detect_board(_root(tmp_path, model, compatible), machine="aarch64")
    assert b.kind == kind
    assert b.is_raspberry_pi is kind.startswith("rpi") and b.is_jetson is (kind == "jetson")


def test_an_l4t_release_file_alone_is_a_jetson_with_its_release(tmp_path: Path) -> None:
    tegra = "# R32 (release), REVISION: 7.4, GCID: 1, BOARD: t210ref\nsecond line\n"
    b = detect_board(_root(tmp_path, tegra=tegra), machine="aarch64")
    assert b.kind == "jetson" and b.model == "NVIDIA Jetson"
    assert b.l4t_release == "R32 (release), REVISION: 7.4, GCID: 1, BOARD: t210ref"


def test_names_and_compatible_are_read_as_the_kernel_writes_them(tmp_path: Path) -> None:
    b = detect_board(
        _root(tmp_path, b"  Raspberry Pi 4 Model B Rev 1.4\x00", ["raspberrypi,4-model-b", "brcm,bcm2711"]),
        machine="aarch64",
    )
    assert b.model == "Raspberry Pi 4 Model B Rev 1.4"
    assert b.compatible == ("raspberrypi,4-model-b", "brcm,bcm2711")
    assert b.machine == "aarch64" and b.l4t_release is None


@pytest.mark.parametrize(
    ("machine", "kind"),
    [
        ("aarch64", "generic-arm"),
        ("arm64", "generic-arm"),
        ("armv7l", "generic-arm"),
        ("x86_64", "generic-x86"),
        ("AMD64", "generic-x86"),
        ("i686", "generic-x86"),
        ("x86", "generic-x86"),
        ("riscv64", "generic"),
    ],
)
def test_without_a_device_tree_the_machine_decides(tmp_path: Path, machine: str, kind: str) -> None:
    b = detect_board(tmp_path / "empty", machine=machine)
    assert b.kind == kind and b.model == f"generic {machine}" and b.compatible == ()


def _x86(cpus: list[tuple[int, int]], trailing_blank: bool = True) -> str:
    blocks = [f"processor\t: {i}\nphysical id\t: {p}\ncore id\t\t: {c}\n" for i, (p, c) in enumerate(cpus)]
    return "\n".join(blocks) + ("\n" if trailing_blank else "")


@pytest.mark.parametrize(
    ("text", "cores"),
    [
        (_x86([(0, 0), (0, 1), (0, 0), (0, 1)]), 2),  # SMT siblings count once
        (_x86([(0, 0), (1, 0), (0, 1), (1, 1)]), 4),  # two sockets: the same core id twice
        (_x86([(0, 0), (0, 1), (0, 2)], trailing_blank=False), 3),  # no blank line after the last
        ("".join(f"processor\t: {i}\nBogoMIPS\t: 108.00\n\n" for i in range(6)), 6),  # ARM: no core ids
    ],
)
def test_physical_cores_from_cpuinfo(tmp_path: Path, text: str, cores: int) -> None:
    root = _root(tmp_path, cpuinfo=text)
    assert physical_cores(root) == cores
    assert detect_board(root, machine="x86_64").physical_cores == cores


def test_physical_cores_without_cpuinfo_is_the_logical_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import edge_agent.adapters.runtime.board as board

    monkeypatch.setattr(board.os, "cpu_count", lambda: 7)
    assert physical_cores(tmp_path) == 7
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/cpuinfo").write_text("")
    assert physical_cores(tmp_path) == 7
    (tmp_path / "proc/cpuinfo").write_text("model name\t: something\n\n")
    assert physical_cores(tmp_path) == 7
    monkeypatch.setattr(board.os, "cpu_count", lambda: None)
    assert physical_cores(tmp_path / "none") == 1


# --- TensorRT on the board ---------------------------------------------------------------------


def _libs(root: Path, folder: str, *versions: str) -> None:
    d = root / folder
    d.mkdir(parents=True, exist_ok=True)
    for v in versions:
        (d / f"libnvinfer.so.{v}").write_bytes(b"")


@pytest.mark.parametrize(
    "folder", ["usr/lib/aarch64-linux-gnu", "usr/lib/x86_64-linux-gnu", "usr/lib64", "usr/local/cuda/lib64"]
)
def test_tensorrt_version_from_the_library_in_each_folder(tmp_path: Path, folder: str) -> None:
    _libs(tmp_path, folder, "8", "8.6.1")
    (tmp_path / folder / "libnvinfer.so.8.6.1.bak").write_bytes(b"")
    (tmp_path / folder / "libnvinfer_plugin.so.9.0.0").write_bytes(b"")
    assert tensorrt_version(tmp_path) == "8.6.1"


def test_the_newest_library_wins_compared_as_numbers(tmp_path: Path) -> None:
    _libs(tmp_path, "usr/lib/aarch64-linux-gnu", "8.9.1", "8.10.0", "8.2.1")
    _libs(tmp_path, "usr/local/cuda/lib64", "7.1.3")
    assert tensorrt_version(tmp_path) == "8.10.0"


@pytest.mark.parametrize(
    ("status", "version"),
    [
        ("Package: libnvinfer10\nVersion: 1:10.3.0-1+cuda12.5\n", "10.3.0"),
        ("Package: libnvinfer8\nVersion: 8.5.2.2-1+cuda11.4\n", "8.5.2.2"),
        ("Package: libnvinfer-bin\nVersion: 8.5.2-1\n\nPackage: libnvinfer8\nStatus: ok\n", None),
        ("Package: xlibnvinfer8\nVersion: 8.5.2-1\n", None),
        ("Package: libnvinfer8\nVersion: unknown\n", None),
    ],
)
def test_tensorrt_version_from_dpkg(tmp_path: Path, status: str, version: Optional[str]) -> None:
    (tmp_path / "var/lib/dpkg").mkdir(parents=True)
    (tmp_path / "var/lib/dpkg/status").write_text(status)
    assert tensorrt_version(tmp_path) == version


def test_gpu_key_from_the_first_readable_discrete_gpu(tmp_path: Path) -> None:
    x86 = BoardInfo("generic-x86", "pc", "x86_64", 4)
    gpus = tmp_path / "proc/driver/nvidia/gpus"
    (gpus / "0000:00:00.0/information").mkdir(parents=True)  # unreadable: a directory
    (gpus / "0000:01:00.0").mkdir()
    (gpus / "0000:01:00.0/information").write_text("IRQ: 5\n")  # no model line
    (gpus / "0000:02:00.0").mkdir()
    (gpus / "0000:02:00.0/information").write_text("IRQ: 5\nModel: \t NVIDIA  RTX A2000 (12GB)!\n")
    (gpus / "0000:03:00.0").mkdir()
    (gpus / "0000:03:00.0/information").write_text("Model: Tesla T4\n")
    assert gpu_key(x86, tmp_path) == "nvidia-rtx-a2000-12gb"
    orin = BoardInfo("jetson", "Orin", "aarch64", 6, ("nvidia,p3768-0000+p3767-0005", "nvidia,tegra234"))
    assert gpu_key(orin, tmp_path) == "tegra234-sm87"


def test_engine_dir_without_tensorrt_files_says_unknown(tmp_path: Path) -> None:
    x86 = BoardInfo("generic-x86", "pc", "x86_64", 4)
    assert (
        engine_dir("/s", "c" * 64, x86, tmp_path) == "/s/trt-engines/cccccccccccccccc-trtunknown-gpu-unknown"
    )


def test_a_cold_engine_build_extends_the_start_timeout_and_says_so(
    tmp_path: Path, notify_socket: socket.socket, caplog: pytest.LogCaptureFixture
) -> None:
    cache = tmp_path / "state/trt-engines/x"
    build = EngineBuild(str(cache), "det.onnx")
    assert build.cold
    with caplog.at_level(logging.INFO, logger="edge_agent.adapters.runtime.tensorrt_host"):
        build.start()
        assert cache.is_dir()
        assert received(notify_socket) == [f"EXTEND_TIMEOUT_USEC={FIRST_BUILD_EXTEND_S * 1_000_000}"]
        assert FIRST_BUILD_EXTEND_S == 30 * 60
        took = build.finish(["TensorrtExecutionProvider", "CPUExecutionProvider"])
    assert 0 <= took < 60
    assert caplog.messages[0] == (
        "det.onnx: building the TensorRT FP16 engine (first run for this model, TensorRT and GPU; "
        f"minutes on a Jetson Nano), cached in {cache}"
    )
    assert (
        caplog.messages[1].startswith("det.onnx: TensorRT engine built in ")
        and str(cache) in caplog.messages[1]
    )
    assert [r.levelno for r in caplog.records] == [logging.WARNING, logging.WARNING]


def test_a_warm_cache_is_a_quiet_load_and_no_tensorrt_no_line(
    tmp_path: Path, notify_socket: socket.socket, caplog: pytest.LogCaptureFixture
) -> None:
    cache = tmp_path / "warm"
    cache.mkdir()
    (cache / "TensorrtExecutionProvider_x.engine").write_bytes(b"e")
    build = EngineBuild(str(cache), "det.onnx")
    assert not build.cold
    with caplog.at_level(logging.INFO, logger="edge_agent.adapters.runtime.tensorrt_host"):
        build.start()
        build.finish(["TensorrtExecutionProvider"])
    assert received(notify_socket) == []
    assert [(r.levelno, r.getMessage().split(" in ")[0]) for r in caplog.records] == [
        (logging.INFO, "det.onnx: TensorRT engine loaded from " + str(cache))
    ]
    caplog.clear()
    other = tmp_path / "cold"
    (other / "stale.txt").parent.mkdir()
    (other / "stale.txt").write_text("not an engine")
    fell_back = EngineBuild(str(other), "det.onnx")
    assert fell_back.cold
    with caplog.at_level(logging.INFO, logger="edge_agent.adapters.runtime.tensorrt_host"):
        assert fell_back.finish(["CUDAExecutionProvider"]) > 0  # finish without start: no crash
    assert caplog.messages == []


def test_an_uncreatable_cache_is_one_warning_line(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with caplog.at_level(logging.WARNING, logger="edge_agent.adapters.runtime.tensorrt_host"):
        EngineBuild(str(blocker / "engines"), "det.onnx").start()
    assert caplog.messages[0] == (
        f"det.onnx: TensorRT engine cache {blocker / 'engines'} cannot be created (Not a directory): "
        "the engine is rebuilt on every start"
    )


def test_bytes_that_are_not_utf8_do_not_stop_the_detection(tmp_path: Path) -> None:
    """A vendor image with a Latin-1 model name or a damaged cpuinfo/dpkg file: read with replacement."""
    root = _root(
        tmp_path,
        b"Raspberry Pi 4 Model B \xe9dition\x00",
        ["raspberrypi,4-model-b", "brcm,bcm2711"],
        tegra="placeholder\n",
        cpuinfo="",
    )
    (root / "proc/device-tree/compatible").write_bytes(b"raspberrypi,4-model-b\x00brcm,bcm2711\xff\x00")
    (root / "etc/nv_tegra_release").write_bytes(b"# R32 (release), REVISION: 7.4 \xff\n")
    (root / "proc/cpuinfo").write_bytes(b"processor\t: 0\nmodel name\t: \xff\xfe\n\nprocessor\t: 1\n\n")
    b = detect_board(root, machine="aarch64")
    assert b.kind == "jetson"  # the L4T file wins
    assert b.model == "Raspberry Pi 4 Model B \ufffddition" and b.compatible[1] == "brcm,bcm2711\ufffd"
    assert b.l4t_release == "R32 (release), REVISION: 7.4 \ufffd" and b.physical_cores == 2
    (root / "var/lib/dpkg").mkdir(parents=True)
    (root / "var/lib/dpkg/status").write_bytes(b"Package: libnvinfer8\nMaintainer: \xff\nVersion: 8.2.1-1\n")
    assert tensorrt_version(root) == "8.2.1"
    gpu = root / "proc/driver/nvidia/gpus/0000:01:00.0"
    gpu.mkdir(parents=True)
    (gpu / "information").write_bytes(b"Model: \t NVIDIA TITAN X\nSerial: \xff\n")
    x86 = BoardInfo("generic-x86", "pc", "x86_64", 4)
    assert gpu_key(x86, root) == "nvidia-titan-x"
    assert engine_dir("/s", "d" * 64, x86, root) == "/s/trt-engines/dddddddddddddddd-trt8.2.1-nvidia-titan-x"


def test_a_model_name_ending_in_x_keeps_it(tmp_path: Path) -> None:
    b = detect_board(
        _root(tmp_path, b"Orange Pi 5 MAX\x00", ["xunlong,orangepi-5-max", "rockchip,rk3588"]), "aarch64"
    )
    assert b.model == "Orange Pi 5 MAX" and b.kind == "generic-arm"
