"""The broken-model guard: a detector whose INT8 output rounds every score to 0 is caught at load."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from support import cli
from support.models import make_format_detector
from support.world import agent_toml

from edge_agent.adapters.runtime.onnx_model import OnnxModel
from edge_agent.core.runtime.onnx_wire import output_dequant_scales
from edge_agent.inference.guard import check_detector, describe
from edge_agent.inference.pipeline import Detector


@pytest.fixture(scope="module")
def broken(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Output Concat quantized with scale 8 (uint8, zero point 0): boxes survive, scores round to 0."""
    return make_format_detector(tmp_path_factory.mktemp("broken") / "broken.onnx", output_scale=8.0)


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_format_detector(tmp_path_factory.mktemp("good") / "good.onnx")


@pytest.fixture(scope="module")
def frames(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import cv2

    d = tmp_path_factory.mktemp("frames")
    for i in range(3):
        img = np.zeros((64, 64, 3), np.uint8)
        img[8 * i : 8 * i + 16, 16:32] = 255
        cv2.imwrite(str(d / f"{i}.png"), img)
    return d


def test_the_broken_model_really_scores_nothing(broken: Path, frames: Path) -> None:
    """The premise: it loads and runs, boxes are there, and it finds nothing on an obvious square."""
    det = Detector(OnnxModel(broken))
    img = np.zeros((64, 64, 3), np.uint8)
    img[16:32, 16:32] = 255
    assert len(det.detect(img).detections) == 0
    assert det.last_max_score == 0.0


def test_static_scale_and_probe_both_name_the_cause(broken: Path, good: Path) -> None:
    assert output_dequant_scales(broken.read_bytes()) == {"output0": 8.0}
    assert output_dequant_scales(good.read_bytes()) == {}
    problems = check_detector(Detector(OnnxModel(broken)))
    causes = " | ".join(p.cause for p in problems)
    assert "scale 8" in causes and "every class score is 0 on the probe image" in causes
    assert all("edge-agent quantize" in p.fix for p in problems)
    assert check_detector(Detector(OnnxModel(good))) == []
    line = describe(broken, problems)
    assert "\n" not in line and "scale 8" in line and "every class score is 0" in line
    assert line.count("fix:") == 1 and line.count("re-quantize") == 1  # one fix for both causes


def test_a_float_model_with_all_zero_scores_is_caught_by_the_probe(tmp_path: Path, frames: Path) -> None:
    """No quantization to point at: the probe image alone shows nothing can score; run refuses it."""
    zero = make_format_detector(tmp_path / "zero.onnx", score_gain=0.0)
    problems = check_detector(Detector(OnnxModel(zero)))
    assert [p.cause for p in problems] == ["every class score is 0 on the probe image (best 0)"]
    r = cli("run", "--config", str(_config(tmp_path, zero, frames)), "--max-frames", "1")
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 1 and len(lines) == 1 and "every class score is 0" in lines[0]


def test_a_fine_output_scale_passes(tmp_path: Path) -> None:
    """Scores quantized at 1/255 are representable: no false alarm from the static check or the probe."""
    m = make_format_detector(tmp_path / "fine.onnx", output_scale=1 / 255)
    assert check_detector(Detector(OnnxModel(m))) == []


def test_infer_fails_and_inspect_warns_with_cause_and_fix(broken: Path, frames: Path) -> None:
    r = cli("infer", str(frames), "--model", str(broken), "--json")
    assert r.returncode == 1  # a script sees the failure (it was 0 with "detections": [])
    assert r.stdout.count('"detections":[]') == len(r.stdout.splitlines()) > 0  # still run, to show it
    assert r.stderr.startswith(f"edge-agent infer: error: {broken}: cannot produce detection scores: ")
    assert r.stderr.rstrip().endswith("(the images are run anyway, to show what it outputs; exit status 1)")
    assert "scale 8" in r.stderr and "edge-agent quantize" in r.stderr
    assert cli("infer", str(frames), "--model", str(broken), "--track").returncode == 1
    assert "Traceback" not in r.stderr
    assert r.stderr.count("re-quantize") == 1  # two causes (static scale, probe), one fix sentence
    r = cli("inspect", str(broken))
    assert (
        r.returncode == 0
        and "cannot produce detection scores" in r.stderr
        and "format       yolov8" in r.stdout
    )
    r = cli("inspect", str(broken), "--json")
    assert any("scale 8" in w for w in json.loads(r.stdout)["warnings"])


def _config(tmp_path: Path, model: Path, frames: Path, extra: str = "") -> Path:
    """``extra``: lines of [detector]."""
    cfg = tmp_path / "c.toml"
    state = tmp_path / "state"
    cfg.write_text(
        agent_toml(
            state,
            frames,
            model,
            device={"id": None},
            detector=extra,
            queue={"path": str(state / "q.db")},
            output=None,
            health={"status_file": str(tmp_path / "status.json")},
        )
    )
    return cfg


def test_run_refuses_it_in_one_line_and_runs_a_good_model(
    tmp_path: Path, broken: Path, good: Path, frames: Path
) -> None:
    r = cli("run", "--config", str(_config(tmp_path, broken, frames)), "--max-frames", "2")
    assert r.returncode == 1, r.stderr
    err = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(err) == 1 and "cannot produce detection scores" in err[0] and "allow_broken_model" in err[0]
    r = cli("run", "--config", str(_config(tmp_path, good, frames)), "--max-frames", "2")
    assert r.returncode == 0, r.stderr
    allowed = _config(tmp_path, broken, frames, "allow_broken_model = true")
    r = cli("run", "--config", str(allowed), "--max-frames", "2")
    assert r.returncode == 0, r.stderr


def test_doctor_fails_on_it(tmp_path: Path, broken: Path, good: Path, frames: Path) -> None:
    r = cli("doctor", "--config", str(_config(tmp_path, broken, frames)), "--json")
    checks = {c["check"]: c for c in json.loads(r.stdout)}
    assert r.returncode == 1 and checks["models"]["status"] == "FAIL"
    assert (
        "scale 8" in checks["models"]["detail"]
        and "cannot produce detection scores" in checks["models"]["detail"]
    )
    r = cli("doctor", "--config", str(_config(tmp_path, good, frames)), "--json")
    checks = {c["check"]: c for c in json.loads(r.stdout)}
    assert "models" not in checks and checks["detector"]["status"] == "ok", checks


def test_hot_swap_to_it_is_refused_and_the_running_model_kept(
    tmp_path: Path, broken: Path, good: Path, frames: Path
) -> None:
    from edge_agent.app.agent.agent import Agent
    from edge_agent.app.cli.configfile import load_config

    path = _config(tmp_path, good, frames)
    agent = Agent(load_config(path), path)
    from edge_agent.app.agent.modelset import ModelSet

    agent._models = ModelSet.from_config(agent.cfg)
    running = agent.models
    _config(tmp_path, broken, frames)  # same path, now naming the broken model
    agent._reload()
    assert agent.models is running and agent.reload_failures == 1 and agent.reloads == 0


def test_the_loop_warns_after_n_frames_without_a_score(
    tmp_path: Path, good: Path, frames: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Black frames: the best score stays 0, so after NO_SCORE_FRAMES the status carries a warning."""
    import cv2

    import edge_agent.app.agent.camera_pipeline as pipeline_mod
    from edge_agent.app.agent.agent import Agent
    from edge_agent.app.cli.configfile import load_config

    black = tmp_path / "black"
    black.mkdir()
    for i in range(5):
        cv2.imwrite(str(black / f"{i}.png"), np.zeros((64, 64, 3), np.uint8))
    monkeypatch.setattr(pipeline_mod, "NO_SCORE_FRAMES", 4)  # the per-camera health step reads it
    agent = Agent(load_config(_config(tmp_path, good, black)), None)
    assert agent.run() == 0
    status = json.loads((tmp_path / "status.json").read_text())
    assert agent.frames == 5
    assert any("no score above 0.001 for 5 consecutive frames" in w for w in status["warnings"])
    # the same loop over frames with something in them: no warning
    agent2 = Agent(load_config(_config(tmp_path, good, frames)), None)
    assert agent2.run() == 0
    assert json.loads((tmp_path / "status.json").read_text())["warnings"] == []


@pytest.mark.parametrize(
    ("scale", "flagged"),
    [
        (0.05, False),  # exactly the limit, as float32 stores it (0.05000000075)
        (float(np.nextafter(np.float32(0.05), np.float32(1))), True),  # one float32 step coarser
        (0.049, False),
        (0.0625, True),  # 16 levels
    ],
)
def test_the_static_scale_limit_at_its_boundary(tmp_path: Path, scale: float, flagged: bool) -> None:
    m = make_format_detector(tmp_path / "s.onnx", output_scale=scale)
    causes = [p.cause for p in check_detector(Detector(OnnxModel(m)))]
    assert any("INT8-quantized with scale" in c for c in causes) is flagged, causes
