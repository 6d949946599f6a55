"""Jetson: provider plans for a Nano (L4T R32, ORT 1.11) and JetPack 5 (R35, ORT 1.16) from fake
device trees and fake provider lists; the float-source choice; the keyed engine cache."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import pytest

from edge_agent.adapters.runtime.board import BoardInfo, detect_board
from edge_agent.adapters.runtime.tensorrt_host import engine_dir, gpu_key, tensorrt_version
from edge_agent.core.runtime.providers import CPU, CUDA, TRT, plan_providers
from edge_agent.core.runtime.tensorrt_plan import (
    choose_tensorrt_source,
    engine_cache_dir,
    jetpack_major,
    jetson_gpu,
    tensorrt_options,
)

A57 = "".join(f"processor\t: {i}\nCPU part\t: 0xd07\n\n" for i in range(4))
NANO = (
    "NVIDIA Jetson Nano Developer Kit",
    ["nvidia,p3450-0000", "nvidia,tegra210"],
    "# R32 (release), REVISION: 7.4, GCID: 33514132, BOARD: t210ref, EABI: aarch64, DATE: Fri Jun  9 04:25:08 UTC 2023\n",
    "8.2.1",
)
XAVIER_NX = (
    "NVIDIA Jetson Xavier NX Developer Kit",
    ["nvidia,p3509-0000+p3668-0001", "nvidia,tegra194"],
    "# R35 (release), REVISION: 4.1, GCID: 33958178, BOARD: t186ref, EABI: aarch64, DATE: Tue Aug  1 19:57:35 UTC 2023\n",
    "8.5.2",
)


def jetson_root(tmp_path: Path, board: tuple[str, list[str], str, str]) -> Path:
    model, compatible, tegra, trt = board
    dt = tmp_path / "proc/device-tree"
    dt.mkdir(parents=True)
    (dt / "model").write_bytes(model.encode() + b"\x00")
    (dt / "compatible").write_bytes(b"\x00".join(c.encode() for c in compatible) + b"\x00")
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/nv_tegra_release").write_text(tegra)
    (tmp_path / "proc/cpuinfo").write_text(A57)
    lib = tmp_path / "usr/lib/aarch64-linux-gnu"
    lib.mkdir(parents=True)
    for name in ("libnvinfer.so", "libnvinfer.so.8", f"libnvinfer.so.{trt}"):
        (lib / name).write_bytes(b"")
    return tmp_path


@pytest.mark.arm_smoke
def test_nano_jetpack4_plan_uses_only_options_ort_1_11_parses(tmp_path: Path) -> None:
    board = detect_board(jetson_root(tmp_path, NANO), machine="aarch64")
    assert board.kind == "jetson" and jetpack_major(board.l4t_release) == 4
    gpu = jetson_gpu(board.compatible)
    assert gpu is not None and gpu.sm == "53" and not gpu.fast_int8
    # NVIDIA's onnxruntime-gpu 1.11 for JetPack 4.6 reports these three
    plan = plan_providers(board.kind, [TRT, CUDA, CPU], board.physical_cores, ort_version="1.11.0")
    assert plan.names == [TRT, CUDA, CPU]
    trt = plan.providers[0][1]
    assert trt == {
        "trt_fp16_enable": "True",
        "trt_engine_cache_enable": "True",
        "trt_engine_cache_path": "/var/lib/edge-agent/trt-engines",
    }


@pytest.mark.arm_smoke
def test_jetpack5_plan_gets_timing_cache_from_ort_1_15_and_its_path_from_1_17(tmp_path: Path) -> None:
    board = detect_board(jetson_root(tmp_path, XAVIER_NX), machine="aarch64")
    assert board.kind == "jetson" and jetpack_major(board.l4t_release) == 5
    gpu = jetson_gpu(board.compatible)
    assert gpu is not None and gpu.fast_int8
    plan = plan_providers(board.kind, [TRT, CUDA, CPU], 6, ort_version="1.16.0")
    assert plan.names == [TRT, CUDA, CPU]
    assert plan.providers[0][1]["trt_timing_cache_enable"] == "True"
    assert "trt_timing_cache_path" not in plan.providers[0][1]
    assert "trt_timing_cache_enable" not in tensorrt_options("/c", "1.14.1")
    assert tensorrt_options("/c", "1.17.0")["trt_timing_cache_path"] == "/c"
    # a CPU-only onnxruntime on a Jetson: CPU, with the reason pointing at NVIDIA's build
    cpu_only = plan_providers(board.kind, ["AzureExecutionProvider", CPU], 6, ort_version="1.16.0")
    assert cpu_only.names == [CPU] and "onnxruntime-gpu" in cpu_only.reason


@pytest.mark.parametrize(
    ("kind", "float_source", "source", "trt"),
    [
        ("qdq_int8", "/m/yolo-fp32.onnx", "/m/yolo-fp32.onnx", True),
        ("qdq_int8", None, None, False),
        ("dynamic_int8", None, None, False),
        ("fp32", "/m/other.onnx", None, True),  # a float model goes to TensorRT as it is
        ("fp16", None, None, True),
    ],
)
def test_float_source_choice_on_the_nano(
    kind: str, float_source: Optional[str], source: Optional[str], trt: bool
) -> None:
    choice = choose_tensorrt_source("/m/yolo-int8.onnx", kind, jetson_gpu(["nvidia,tegra210"]), float_source)
    assert choice.float_source == source and choice.use_tensorrt is trt
    if not trt:  # one line naming the key to set
        assert "[detector] float_model" in choice.message and "\n" not in choice.message
        assert "sm_53" in choice.message and "/m/yolo-int8.onnx" in choice.message


def test_int8_capable_gpu_keeps_the_int8_model() -> None:
    orin = jetson_gpu(["nvidia,p3768-0000+p3767-0005", "nvidia,tegra234"])
    choice = choose_tensorrt_source("/m/q.onnx", "qdq_int8", orin, "/m/f.onnx")
    assert choice.float_source is None and choice.use_tensorrt and choice.message == ""


def test_engine_cache_is_keyed_by_model_hash_tensorrt_version_and_gpu(tmp_path: Path) -> None:
    sha_a, sha_b = "a" * 64, "b" * 64
    base = engine_cache_dir("/s", sha_a, "8.2.1", "tegra210-sm53")
    assert base == "/s/trt-engines/aaaaaaaaaaaaaaaa-trt8.2.1-tegra210-sm53"
    others = {
        engine_cache_dir("/s", sha_b, "8.2.1", "tegra210-sm53"),
        engine_cache_dir("/s", sha_a, "8.5.2", "tegra210-sm53"),
        engine_cache_dir("/s", sha_a, "8.2.1", "tegra194-sm72"),
    }
    assert base not in others and len(others) == 3
    # from the board's files: libnvinfer's version and the SoC
    nano = detect_board(jetson_root(tmp_path / "nano", NANO), machine="aarch64")
    assert tensorrt_version(tmp_path / "nano") == "8.2.1"
    assert gpu_key(nano, tmp_path / "nano") == "tegra210-sm53"
    assert engine_dir("/s", sha_a, nano, tmp_path / "nano") == base


def test_tensorrt_version_from_dpkg_when_no_library_and_unknown_gpu(tmp_path: Path) -> None:
    (tmp_path / "var/lib/dpkg").mkdir(parents=True)
    (tmp_path / "var/lib/dpkg/status").write_text(
        "Package: libnvinfer-dev\nVersion: 8.5.2-1+cuda11.4\n\n"
        "Package: libnvinfer8\nStatus: install ok installed\nVersion: 8.5.2-1+cuda11.4\n\n"
    )
    assert tensorrt_version(tmp_path) == "8.5.2"
    assert tensorrt_version(tmp_path / "none") is None
    x86 = BoardInfo("generic-x86", "pc", "x86_64", 4)
    assert gpu_key(x86, tmp_path) == "gpu-unknown"
    gpus = tmp_path / "proc/driver/nvidia/gpus/0000:01:00.0"
    gpus.mkdir(parents=True)
    (gpus / "information").write_text("Model: \t\t NVIDIA GeForce RTX 3060\nIRQ: 1\n")
    assert gpu_key(x86, tmp_path) == "nvidia-geforce-rtx-3060"
