"""The model set the agent runs, built from config on the real bundled models: every [detector] and
[classifier] key reaches the model it names (a key silently replaced by its default is the bug a
user meets as "my setting does nothing"), the broken-model guard and its override, and the ids
and hashes every result carries."""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

import pytest
from support.models import make_format_detector

from edge_agent.app.agent.modelset import ModelSet
from edge_agent.core.config.schema import parse_config
from edge_agent.core.vision.defaults import CROP_PADDING
from edge_agent.errors import ModelError, ProviderError

REPO = Path(__file__).resolve().parents[3]
DET = REPO / "models" / "demo-detector-int8.onnx"
DET_FP32 = REPO / "models" / "demo-detector.onnx"
CLS = REPO / "models" / "demo-classifier-int8.onnx"


def sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def build(tmp_path: Path, detector: str = "", classifier: str = "") -> ModelSet:
    text = f'[device]\nstate_dir = "{tmp_path}"\n[detector]\n{detector}\n'
    if classifier:
        text += f"[classifier]\n{classifier}\n"
    return ModelSet.from_config(parse_config(text))


def threads(m: object) -> int:
    return int(m.session.get_session_options().intra_op_num_threads)  # type: ignore[attr-defined]


def test_without_a_model_the_bundled_demo_detector_runs_alone(tmp_path: Path) -> None:
    ms = build(tmp_path)
    assert ms.detector.model.path == DET
    assert ms.classifier is None and ms.classify_ids is None and ms.crop_padding == CROP_PADDING
    assert ms.describe() == {
        "detector": {"id": f"{DET.name}@{sha(DET)[:12]}", "sha256": sha(DET), "quantization": "qdq_int8"}
    }
    assert ms.provider == "CPUExecutionProvider"
    assert ms.detector.params.classes is None


def test_every_detector_key_reaches_the_detector(tmp_path: Path) -> None:
    labels = tmp_path / "labels.txt"
    labels.write_text("disc\nbox\nwedge\n")
    ms = build(
        tmp_path,
        f'model = "{DET}"\nlabels = "{labels}"\nconf_threshold = 0.61\niou_threshold = 0.33\nmax_det = 7\n'
        f'classes = ["wedge", "disc"]\nprovider = "cpu"\nthreads = 3\nfloat_model = "{DET_FP32}"\n',
    )
    d = ms.detector
    assert (d.params.conf_threshold, d.params.iou_threshold, d.params.max_det) == (0.61, 0.33, 7)
    assert sorted(d.params.classes or []) == [0, 2]  # by the names of the labels file
    assert d.model.info.names == {0: "disc", 1: "box", 2: "wedge"}
    assert d.model.info.provider_reason == "override: cpu" and threads(d.model) == 3


def test_an_unknown_detector_class_is_refused_at_start(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="unknown class 'person'"):
        build(tmp_path, f'model = "{DET}"\nclasses = ["person"]')


def test_every_classifier_key_reaches_the_classifier(tmp_path: Path) -> None:
    labels = tmp_path / "cls.txt"
    labels.write_text("a\nb\nc\nd\n")
    ms = build(
        tmp_path,
        f'model = "{DET}"\nthreads = 2\nprovider = "cpu"',
        f'model = "{CLS}"\nlabels = "{labels}"\nclasses = ["square", "circle"]\ncrop_padding = 0.3\n'
        'top_k = 2\npreprocess = "imagenet"\n',
    )
    c = ms.classifier
    assert c is not None
    assert c.model.path == CLS and c.k == 2 and c.model.info.names == {0: "a", 1: "b", 2: "c", 3: "d"}
    assert (c.choice.spec, c.choice.source) == ("imagenet", "option")
    assert sorted(ms.classify_ids or []) == [0, 1] and ms.crop_padding == 0.3
    # unset in [classifier]: the detector's provider and threads
    assert c.model.info.provider_reason == "override: cpu" and threads(c.model) == 2
    assert ms.describe()["classifier"] == {
        "id": f"{CLS.name}@{sha(CLS)[:12]}",
        "sha256": sha(CLS),
        "quantization": "qdq_int8",
    }
    assert set(ms.describe()) == {"detector", "classifier"}


def test_the_classifiers_own_provider_wins_over_the_detectors(tmp_path: Path) -> None:
    with pytest.raises(ProviderError, match="XnnpackExecutionProvider requested"):
        build(tmp_path, 'provider = "cpu"', f'model = "{CLS}"\nprovider = "xnnpack"')
    ms = build(tmp_path, "", f'model = "{CLS}"\nprovider = "cpu"')
    assert ms.classifier is not None and ms.classifier.model.info.provider_reason == "override: cpu"
    assert ms.detector.model.info.provider_reason != "override: cpu"
    assert ms.classify_ids is None and ms.crop_padding == CROP_PADDING  # classes unset: every crop


def test_a_broken_detector_is_refused_unless_the_config_allows_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    broken = make_format_detector(tmp_path / "broken.onnx", output_scale=8.0)
    with pytest.raises(ModelError) as e:
        build(tmp_path, f'model = "{broken}"')
    assert str(e.value).endswith("(to run it anyway: [detector] allow_broken_model = true)")
    assert str(broken) in str(e.value)
    caplog.set_level(logging.WARNING, logger="edge_agent")
    ms = build(tmp_path, f'model = "{broken}"\nallow_broken_model = true')
    assert ms.detector.model.path == broken
    (line,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert line.endswith("(running it: [detector] allow_broken_model = true)") and str(broken) in line


def test_a_forced_output_format_is_the_one_used(tmp_path: Path) -> None:
    assert build(tmp_path).detector.format.fmt.name == "yolov8"  # recognised
    assert build(tmp_path, 'output_format = "yolov5"').detector.format.fmt.name == "yolov5"
