"""Fixtures for model-update tests: the demo detector (FP32 = the running model), its good INT8,
the zero-score INT8, packages made with the real `edge-agent model pack`, and a config writer."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable

import pytest

from support import cli
from support.rollout_sim import SimDevice
from support.updates import INT8, AgentProc, make_dim_scores, make_zero_score, write_config


@pytest.fixture(scope="session")
def models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not INT8.is_file():
        pytest.skip(f"{INT8} missing (the demo models are part of the repository)")
    d = tmp_path_factory.mktemp("update-models")
    make_zero_score(INT8, d / "zero-score-int8.onnx")
    make_dim_scores(INT8, d / "dim-int8.onnx")
    return d


# whom the fixture packages are for (signed): the devices and the group the update tests use
TARGET_ARGS = ("--for-group", "fleet-a", *(a for i in range(1, 5) for a in ("--for-device", f"cam-{i}")))


def pack(model: Path, out: Path, version: str, *extra: str) -> Path:
    """One real `edge-agent model pack` of the demo package name (every fixture package is made here),
    for :data:`TARGET_ARGS` unless ``extra`` names its own targets."""
    targets = () if any(e.startswith("--for-") for e in extra) else TARGET_ARGS
    r = cli(
        "model",
        "pack",
        str(model),
        "-o",
        str(out),
        "--name",
        "demo",
        "--version",
        version,
        *targets,
        *extra,
        quiet=False,
    )
    assert r.returncode == 0, r.stderr
    return out


@pytest.fixture(scope="session")
def packages(models_dir: Path) -> dict[str, Path]:
    """good (the demo INT8), zero (zero-score INT8), dim (scores x 0.1), signed, badsig, keys."""
    out = {}
    for name, model, extra in (
        ("good", INT8, []),
        ("zero", models_dir / "zero-score-int8.onnx", ["--skip-guard"]),
        ("dim", models_dir / "dim-int8.onnx", []),
    ):
        out[name] = pack(model, models_dir / f"{name}.pkg", f"2.0+{name}", *extra)
    key = models_dir / "signing.key"
    r = cli("model", "keygen", str(key), quiet=False)
    assert r.returncode == 0, r.stderr
    out["key"] = key
    (models_dir / "signing.pub").write_text(r.stdout.split("\n")[2].strip())
    out["pub"] = models_dir / "signing.pub"
    other = models_dir / "other.key"
    assert cli("model", "keygen", str(other), quiet=False).returncode == 0
    out["other_key"] = other
    for name, k in (("signed", key), ("badsig", other)):
        out[name] = pack(INT8, models_dir / f"{name}.pkg", f"2.1+{name}", "--sign", str(k))
    # signed, in 16 KiB chunks: about 30 of them, for the resume tests
    out["small"] = pack(INT8, models_dir / "small.pkg", "2.1+small", "--sign", str(key), "--chunk-kb", "16")
    return out


@pytest.fixture
def agents() -> Iterator[list[AgentProc]]:
    """Agent subprocesses a test starts (``agents.append(AgentProc(cfg).start())``), stopped after it."""
    started: list[AgentProc] = []
    yield started
    for a in started:
        a.stop()


@pytest.fixture
def make_config(tmp_path: Path) -> Callable[..., Path]:
    def make(**kw: Any) -> Path:
        return write_config(tmp_path, **kw)

    return make


@pytest.fixture(scope="session")
def versioned(packages: dict[str, Path], models_dir: Path) -> dict[str, Path]:
    """The demo INT8 signed by the trusted key as versions 1.0, 2.0 and 3.0 (anti-rollback)."""
    return {
        v: pack(INT8, models_dir / f"v{v}.pkg", v, "--sign", str(packages["key"]))
        for v in ("1.0", "2.0", "3.0")
    }


@pytest.fixture
def sims() -> Iterator[list[SimDevice]]:
    """Simulated rollout devices a test starts (support.rollout_sim.start_sims), stopped after it."""
    made: list[SimDevice] = []
    yield made
    for s in made:
        s.stop()
