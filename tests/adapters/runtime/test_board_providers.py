"""Board detection from fake /proc trees and provider choice from fake provider lists."""

from __future__ import annotations

from pathlib import Path

import pytest

from edge_agent.adapters.runtime.board import detect_board, physical_cores
from edge_agent.core.runtime.providers import CPU, CUDA, TRT, XNNPACK, plan_providers
from edge_agent.errors import ProviderError

ARM_CPUINFO = "".join(f"processor\t: {i}\nBogoMIPS\t: 108.00\nCPU part\t: 0xd08\n\n" for i in range(4))


def fake_root(
    tmp_path: Path,
    model: str = "",
    compatible: list[str] | None = None,
    tegra: str | None = None,
    cpuinfo: str = ARM_CPUINFO,
) -> Path:
    dt = tmp_path / "proc/device-tree"
    dt.mkdir(parents=True)
    if model:
        (dt / "model").write_bytes(model.encode() + b"\x00")
    if compatible:
        (dt / "compatible").write_bytes(b"\x00".join(c.encode() for c in compatible) + b"\x00")
    if tegra:
        (tmp_path / "etc").mkdir()
        (tmp_path / "etc/nv_tegra_release").write_text(tegra)
    (tmp_path / "proc/cpuinfo").write_text(cpuinfo)
    return tmp_path


@pytest.mark.arm_smoke
@pytest.mark.parametrize(
    ("model", "compatible", "tegra", "kind"),
    [
        ("Raspberry Pi 4 Model B Rev 1.4", ["raspberrypi,4-model-b", "brcm,bcm2711"], None, "rpi4"),
        ("Raspberry Pi 5 Model B Rev 1.0", ["raspberrypi,5-model-b", "brcm,bcm2712"], None, "rpi5"),
        ("", ["raspberrypi,5-model-b", "brcm,bcm2712"], None, "rpi5"),
        (
            "NVIDIA Jetson Nano Developer Kit",
            ["nvidia,p3450-0000", "nvidia,jetson-nano", "nvidia,tegra210"],
            "# R32 (release), REVISION: 7.4, GCID: 1, BOARD: t210ref, EABI: aarch64\n",
            "jetson",
        ),
        (
            "NVIDIA Jetson Orin Nano Developer Kit",
            ["nvidia,p3768-0000+p3767-0005", "nvidia,tegra234"],
            None,
            "jetson",
        ),
        ("Some Rockchip board", ["rockchip,rk3588"], None, "generic-arm"),
    ],
)
def test_board_detection(
    tmp_path: Path, model: str, compatible: list[str], tegra: str | None, kind: str
) -> None:
    b = detect_board(fake_root(tmp_path, model, compatible, tegra), machine="aarch64")
    assert b.kind == kind
    assert b.physical_cores == 4
    if tegra:
        assert b.l4t_release is not None and b.l4t_release.startswith("R32")


def test_generic_x86_and_smt_cores(tmp_path: Path) -> None:
    smt = "".join(f"processor\t: {i}\nphysical id\t: 0\ncore id\t\t: {i // 2}\n\n" for i in range(8))
    root = fake_root(tmp_path, cpuinfo=smt)
    b = detect_board(root, machine="x86_64")
    assert b.kind == "generic-x86" and b.physical_cores == 4
    assert physical_cores(tmp_path / "nowhere") >= 1


@pytest.mark.arm_smoke
def test_jetson_prefers_tensorrt_with_engine_cache_in_state_dir() -> None:
    plan = plan_providers("jetson", [TRT, CUDA, CPU], 6, state_dir="/var/lib/edge-agent")
    assert plan.names == [TRT, CUDA, CPU]
    trt_opts = plan.providers[0][1]
    assert trt_opts["trt_fp16_enable"] == "True"
    assert trt_opts["trt_engine_cache_enable"] == "True"
    assert trt_opts["trt_engine_cache_path"] == "/var/lib/edge-agent/trt-engines"


def test_jetson_without_gpu_providers_says_why() -> None:
    plan = plan_providers("jetson", ["AzureExecutionProvider", CPU], 4)
    assert plan.names == [CPU]
    assert "onnxruntime-gpu" in plan.reason


def test_pi_uses_xnnpack_when_available_else_cpu_with_physical_cores() -> None:
    plan = plan_providers("rpi5", [XNNPACK, CPU], 4)
    assert plan.names == [XNNPACK, CPU]
    assert plan.providers[0][1] == {"intra_op_num_threads": "4"}
    assert plan.intra_op_threads == 1
    plain = plan_providers("rpi4", ["AzureExecutionProvider", CPU], 4)
    assert plain.names == [CPU] and plain.intra_op_threads == 4
    assert "XNNPACK not in this onnxruntime" in plain.reason


def test_generic_board_never_tries_unlisted_providers() -> None:
    assert plan_providers("generic-x86", [CUDA, CPU], 2).names == [CPU]


def test_override_by_alias_and_unavailable_override_is_an_error() -> None:
    plan = plan_providers("generic-x86", [CUDA, CPU], 2, override="cuda")
    assert plan.names == [CUDA, CPU] and plan.reason == "override: cuda"
    with pytest.raises(ProviderError, match="TensorrtExecutionProvider requested"):
        plan_providers("generic-x86", [CUDA, CPU], 2, override="tensorrt")
