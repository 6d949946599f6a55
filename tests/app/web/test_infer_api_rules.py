"""POST /api/v1/infer's logic in process (issue 36: no server, so mutation testing reaches it): the
answer is what ``edge-agent infer --json`` prints, bad images are one line with their status, the
gate lets one run and ``infer_queue`` wait, and the detector copy is per model set."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path
from typing import Any, Optional

import cv2
import numpy as np
import pytest
from support.clip import REPO, SAMPLES
from support.world import agent_toml

from edge_agent.app.agent.modelset import ModelSet
from edge_agent.app.cli.main import main
from edge_agent.app.web import infer_api
from edge_agent.app.web.infer_api import InferApi, InferGate
from edge_agent.core.config.schema import parse_config
from edge_agent.core.web.request_limits import RequestError
from edge_agent.errors import EdgeAgentError

DEMO = REPO / "models" / "demo-detector.onnx"


def models(tmp: Path) -> ModelSet:
    text = agent_toml(tmp / "state", SAMPLES, DEMO, detector={"conf_threshold": 0.3})
    return ModelSet.from_config(parse_config(text))


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> ModelSet:
    return models(tmp_path_factory.mktemp("demo"))


def refused(api: InferApi, data: bytes) -> tuple[int, str]:
    with pytest.raises(RequestError) as got:
        api.infer(data)
    return got.value.status, got.value.message


def test_the_answer_is_what_infer_json_prints(demo: ModelSet, capsys: pytest.CaptureFixture[str]) -> None:
    image = SAMPLES / "sample_1.jpg"
    api = InferApi(lambda: demo, 10**7, 0)
    got = api.infer(image.read_bytes(), "sample_1.jpg")
    assert main(["infer", "--json", "--conf", "0.3", "--model", str(DEMO), str(image)]) == 0
    want = json.loads(capsys.readouterr().out.splitlines()[0])
    assert got["detections"] and got["detections"] == want["detections"]
    assert (got["image"], got["width"], got["height"]) == ("sample_1.jpg", want["width"], want["height"])
    assert api.infer(image.read_bytes())["image"] == "upload"
    assert (api.gate.done, api.gate.inside) == (2, 0)


def test_width_and_height_are_the_images_own(demo: ModelSet) -> None:
    ok, buf = cv2.imencode(".png", np.full((30, 50, 3), 128, np.uint8))
    assert ok
    got = InferApi(lambda: demo, 10**7, 0).infer(buf.tobytes())
    assert (got["width"], got["height"]) == (50, 30)


def test_bad_images_are_one_line_with_their_status(demo: ModelSet) -> None:
    api = InferApi(lambda: demo, 64 * 48 - 1, 0)
    ok, buf = cv2.imencode(".png", np.zeros((48, 64, 3), np.uint8))
    assert ok
    status, msg = refused(api, buf.tobytes())
    assert status == 413 and "exceeds the limit" in msg and re.search(r"\bweb\.max_pixels\b", msg)
    status, msg = refused(api, b"not an image at all")
    assert status == 400 and "upload" in msg
    ok, jpg = cv2.imencode(".jpg", np.zeros((48, 64, 3), np.uint8))
    broken = jpg.tobytes()[:200]  # the header says 64x48, the data stops short
    api = InferApi(lambda: demo, 10**6, 0)
    try:
        status, msg = refused(api, broken)
    except pytest.fail.Exception:  # libjpeg decodes a cut JPEG as far as it goes: not refused
        pytest.skip("this OpenCV decodes a truncated JPEG; the undecodable branch is not reached")
    assert (
        status == 400
        and msg == f"upload: not a decodable image ({len(broken)} bytes), expected JPEG/PNG/WebP/BMP"
    )
    assert api.gate.done == 0  # refused before the gate


def test_no_models_yet_is_503_and_a_failing_model_500(
    demo: ModelSet, monkeypatch: pytest.MonkeyPatch
) -> None:
    image = (SAMPLES / "sample_1.jpg").read_bytes()
    api = InferApi(lambda: None, 10**7, 0)
    assert refused(api, image) == (503, "the models are not loaded yet")
    assert (api.gate.inside, api.gate.done) == (0, 1)  # the gate is left on the way out

    def broken(*_a: Any, **_k: Any) -> Any:
        raise EdgeAgentError("the session failed")

    monkeypatch.setattr(infer_api, "run_cascade", broken)
    assert refused(InferApi(lambda: demo, 10**7, 0), image) == (
        500,
        "upload: inference failed: the session failed",
    )


def test_the_detector_is_copied_once_per_model_set(demo: ModelSet, tmp_path: Path) -> None:
    current: list[Optional[ModelSet]] = [demo]
    api = InferApi(lambda: current[0], 10**7, 0)
    first = api._detector(demo)
    assert first is not demo.detector and first._ring is not demo.detector._ring
    assert api._detector(demo) is first  # the same set: the same copy
    reloaded = models(tmp_path)
    second = api._detector(reloaded)
    assert second is not first and second is not reloaded.detector
    assert api._detector(reloaded) is second


def test_the_gate_refuses_beyond_one_running_and_the_queue() -> None:
    gate = InferGate(queue=0)
    assert gate.limit == 1
    with gate:
        with pytest.raises(RequestError) as err:
            gate.__enter__()
        assert err.value.status == 429
        assert (
            err.value.message == "1 inference requests running or waiting (1 + web.infer_queue); retry later"
        )
    with gate, pytest.raises(RequestError):
        gate.__enter__()
    assert (gate.inside, gate.refused, gate.done) == (0, 2, 2)
    with gate:  # free again
        assert gate.inside == 1
    queued = InferGate(queue=2)
    release = threading.Event()
    started = threading.Semaphore(0)

    def hold() -> None:
        started.release()
        with queued:
            release.wait(10)

    threads = [threading.Thread(target=hold) for _ in range(3)]
    for t in threads:
        t.start()
    for _ in threads:
        started.acquire()
    for _ in range(10_000):  # a bound, not a timing: the threads are inside within milliseconds
        if queued.inside == 3:
            break
        threading.Event().wait(0.001)
    assert queued.inside == 3
    with pytest.raises(RequestError):
        queued.__enter__()
    release.set()
    for t in threads:
        t.join()
    assert (queued.inside, queued.refused, queued.done) == (0, 1, 3)


def test_the_classifier_its_classes_and_crop_padding_reach_the_answer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    classifier = REPO / "models" / "demo-classifier.onnx"
    text = agent_toml(
        tmp_path / "state",
        SAMPLES,
        DEMO,
        detector={"conf_threshold": 0.3},
        classifier={"model": str(classifier), "classes": ["circle"], "crop_padding": 0.3},
    )
    api = InferApi(lambda: ModelSet.from_config(parse_config(text)), 10**7, 0)
    image = SAMPLES / "sample_1.jpg"
    got = api.infer(image.read_bytes())
    argv = ["infer", "--json", "--conf", "0.3", "--model", str(DEMO), "--classifier", str(classifier)]
    argv += ["--classify-classes", "circle", "--crop-padding", "0.3", str(image)]
    assert main(argv) == 0
    want = json.loads(capsys.readouterr().out.splitlines()[0])
    assert got["detections"] == want["detections"]
    classified = [d for d in got["detections"] if "classification" in d]
    assert classified and all(d["label"] == "circle" for d in classified)  # only the classes asked
    assert len(classified) < len(got["detections"])
    assert set(got["timings_ms"]) == {"pre", "infer", "post", "classify"}
