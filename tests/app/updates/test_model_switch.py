"""install / rollback / describe and the gate in process, on packages written in process (the demo
INT8 as the candidate, the demo FP32 running): fast enough for `python .ci/mutation.py model-switch`,
and each test names the rule it pins (gate thresholds, anti-rollback, history, caps, signatures)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable

import pytest
from support.updates import FP32, INT8, SAMPLES, make_dim_scores, pack_in_process, write_config

from edge_agent.adapters.updates.store import ModelStore
from edge_agent.app.cli.configfile import load_config
from edge_agent.app.updates import switch as model_switch
from edge_agent.app.updates.switch import describe, downgrade_reason, effective_config, install, rollback
from edge_agent.core.updates.store_state import Highest, StoreState

if not INT8.is_file():  # pragma: no cover - the demo models are part of the repository
    pytest.skip(f"{INT8} missing", allow_module_level=True)


@pytest.fixture
def cfg_of(tmp_path: Path) -> Callable[..., Any]:
    def make(extra: str = "", device: str = "cam-1") -> Any:
        return load_config(write_config(tmp_path, extra=extra, device=device))

    return make


ONE_PROBE = sorted(SAMPLES.glob("*.jpg"))[:1]  # a gate on one image: these tests are run per mutant


def _pkg(tmp: Path, version: str, **kw: Any) -> Path:
    return pack_in_process(tmp / f"v{version}.pkg", INT8, version=version, **{"probe": ONE_PROBE, **kw})


def _state(cfg: Any) -> StoreState:
    return ModelStore(cfg.device.state_dir).state()


def test_install_switches_records_and_rollback_returns_to_the_config_model(
    tmp_path: Path, cfg_of: Callable[..., Any]
) -> None:
    cfg = cfg_of()
    res = install(cfg, _pkg(tmp_path, "2.0", probe=[]), origin="test", baseline_rate=1.5)
    assert res["outcome"] == "switched", res["detail"]
    assert res["detail"].startswith("gate on 6 bundled-probe images") and "(forced)" not in res["detail"]
    assert res["origin"] == "test" and res["version"]["version"] == "2.0" and res["signed_by_key"] is None
    assert res["gate"]["passed"] is True and res["gate"]["source"] == "bundled-probe"
    st = _state(cfg)
    vid = st.current
    assert vid is not None and vid.startswith("demo-2.0-")
    assert st.history == [None] and st.highest == Highest(version="2.0", vid=vid)
    assert st.trial is not None and (st.trial.vid, st.trial.baseline_rate, st.trial.forced) == (
        vid,
        1.5,
        False,
    )
    assert st.last is not None and st.last["outcome"] == "switched"
    info = describe(cfg)
    assert info["current"]["id"] == vid and info["current"]["version"] == "2.0"
    assert info["current"]["created_at"] == "2026-11-30T00:00:00Z" and info["trial"]["vid"] == vid
    eff = effective_config(cfg, vid, ModelStore(cfg.device.state_dir))
    assert eff.detector.model.endswith(f"{vid}/detector.onnx") and cfg.detector.model == str(FP32)
    back = rollback(cfg, "test says so")
    assert back["outcome"] == "rolled_back" and back["detail"] == f"{vid} -> config model: test says so"
    st = _state(cfg)
    assert (st.current, st.trial, st.history) == (None, None, [])
    assert list(ModelStore(cfg.device.state_dir).versions.iterdir()) == []  # the abandoned one deleted
    info = describe(cfg)
    assert info["current"] == {"id": None, "model": str(FP32)} and info["trial"] is None
    again = rollback(cfg, "again")
    assert again["outcome"] == "refused" and "nothing to roll back" in again["detail"]


def test_rollback_goes_to_the_previous_version_not_the_oldest(
    tmp_path: Path, cfg_of: Callable[..., Any]
) -> None:
    cfg = cfg_of("[model_update]\nkeep_versions = 3")
    vids = []
    for v in ("1.0", "2.0", "3.0"):
        assert install(cfg, _pkg(tmp_path, v), origin="test")["outcome"] == "switched"
        vids.append(_state(cfg).current)
    st = _state(cfg)
    assert st.history == [vids[0], vids[1]]  # keep_versions - 1 kept behind the current one
    store = ModelStore(cfg.device.state_dir)
    assert sorted(p.name for p in store.versions.iterdir()) == sorted(vids)
    assert rollback(cfg, "r")["detail"].startswith(f"{vids[2]} -> {vids[1]}:")
    assert _state(cfg).current == vids[1]
    assert sorted(p.name for p in store.versions.iterdir()) == sorted(vids[:2])
    assert rollback(cfg, "r")["detail"].startswith(f"{vids[1]} -> {vids[0]}:")
    assert rollback(cfg, "r")["detail"].startswith(f"{vids[0]} -> config model:")


def test_only_if_current_never_rolls_back_another_version(tmp_path: Path, cfg_of: Callable[..., Any]) -> None:
    cfg = cfg_of()
    install(cfg, _pkg(tmp_path, "1.0"), origin="test")
    vid = _state(cfg).current
    res = rollback(cfg, "trial failed", origin="trial", only_if_current="demo-0.1-00000000")
    assert res == {"outcome": "unchanged", "detail": "demo-0.1-00000000 no longer runs", "origin": "trial"}
    assert _state(cfg).current == vid
    assert rollback(cfg, "trial failed", only_if_current=vid)["outcome"] == "rolled_back"


def test_history_is_capped_by_keep_versions(tmp_path: Path, cfg_of: Callable[..., Any]) -> None:
    cfg = cfg_of("[model_update]\nkeep_versions = 2")
    vids = []
    for v in ("1.0", "2.0", "3.0"):
        install(cfg, _pkg(tmp_path, v), origin="test")
        vids.append(_state(cfg).current)
    assert _state(cfg).history == [vids[1]]
    store = ModelStore(cfg.device.state_dir)
    assert sorted(p.name for p in store.versions.iterdir()) == sorted(vids[1:])


def test_the_same_version_again_is_unchanged_and_an_older_one_refused(
    tmp_path: Path, cfg_of: Callable[..., Any]
) -> None:
    cfg = cfg_of()
    assert install(cfg, _pkg(tmp_path, "2.0"), origin="test")["outcome"] == "switched"
    top = _state(cfg).current
    same = install(cfg, _pkg(tmp_path, "2.0"), origin="test")
    assert same["outcome"] == "unchanged" and same["detail"] == f"{top} is already the running model"
    old = install(cfg, _pkg(tmp_path, "1.0"), origin="test")
    assert old["outcome"] == "refused" and "version 1.0 is not newer than 2.0" in old["detail"]
    assert _state(cfg).current == top
    down = install(cfg, _pkg(tmp_path, "1.0"), origin="test", allow_downgrade=True)
    assert down["outcome"] == "switched"
    st = _state(cfg)
    assert st.current != top and st.highest == Highest(version="2.0", vid=top)  # the mark stays
    # the very package that set the mark may come back after a rollback, but only on purpose
    # (a rolled-back version stays refused until a newer one); another 2.0 may not at all
    rollback(cfg, "r")
    rollback(cfg, "bad in the field")
    assert [r.version for r in _state(cfg).rolled_back] == ["1.0", "2.0"]
    again = install(cfg, _pkg(tmp_path, "2.0"), origin="test")
    assert (
        again["outcome"] == "refused"
        and "version 2.0 was rolled back on this device (bad in the field)" in again["detail"]
    )
    assert install(cfg, _pkg(tmp_path, "2.0"), origin="test", allow_rolled_back=True)["outcome"] == "switched"
    assert _state(cfg).rolled_back == []  # 2.0 installed: 1.0 and 2.0 no longer need the list
    other = pack_in_process(tmp_path / "o.pkg", FP32, version="2.0")
    res = install(cfg, other, origin="test")
    assert res["outcome"] == "refused" and "not newer than 2.0" in res["detail"]


def test_downgrade_reason_without_a_mark_uses_the_current_manifest(
    tmp_path: Path, cfg_of: Callable[..., Any]
) -> None:
    cfg = cfg_of()
    install(cfg, _pkg(tmp_path, "2.0"), origin="test")
    store = ModelStore(cfg.device.state_dir)
    st = store.state()
    st.highest = None  # a store from before anti-rollback
    m1 = ModelStore.manifest(store, st.current or "")
    assert downgrade_reason(store, st, m1) is None  # the same package
    st.highest = Highest(version="not pep 440!", vid="x")  # hand-written: not a reason to refuse
    assert downgrade_reason(store, st, m1) is None
    st.highest = Highest(version="2.0", vid="x")
    assert "not newer than 2.0" in (downgrade_reason(store, st, m1) or "")
    st.highest = Highest(version="1.9", vid="x")
    assert downgrade_reason(store, st, m1) is None
    assert downgrade_reason(store, StoreState(), m1) is None
    assert downgrade_reason(store, StoreState(current="gone-1.0-00000000"), m1) is None


def test_the_size_cap_holds_before_anything_is_read(tmp_path: Path, cfg_of: Callable[..., Any]) -> None:
    pkg = _pkg(tmp_path, "2.0")
    size = pkg.stat().st_size
    cfg = cfg_of(f"[model_update]\nmax_package_mb = {(size - 1) / 1e6}")
    res = install(cfg, pkg, origin="test")
    assert res["outcome"] == "refused" and res["detail"] == f"{pkg}: {size} bytes > max_package_mb"
    assert not ModelStore(cfg.device.state_dir).versions.exists() or not any(
        ModelStore(cfg.device.state_dir).versions.iterdir()
    )
    cfg = cfg_of(f"[model_update]\nmax_package_mb = {size / 1e6}")
    assert install(cfg, pkg, origin="test")["outcome"] == "switched"  # exactly the cap


@pytest.mark.parametrize(
    ("key", "value", "check"),
    [
        ("max_conf_delta", "0.0", "mean_abs_conf_delta"),
        ("min_mean_iou", "1.0", "mean_iou"),
    ],
)
def test_every_gate_threshold_is_honoured(
    tmp_path: Path, cfg_of: Callable[..., Any], key: str, value: str, check: str
) -> None:
    cfg = cfg_of(f"[model_update]\n{key} = {value}")
    res = install(cfg, _pkg(tmp_path, "2.0"), origin="test")
    assert res["outcome"] == "refused" and res["origin"] == "test", res["detail"]
    assert res["version"]["version"] == "2.0" and _state(cfg).last == res
    failed = [c for c in res["gate"]["detector"]["checks"] if not c["passed"]]
    assert [c["name"] for c in failed] == [check], failed
    assert f"detector {check} " in res["detail"] and f"{float(value):g})" in res["detail"]
    assert list(ModelStore(cfg.device.state_dir).versions.iterdir()) == []  # the refused one goes
    assert _state(cfg).current is None


def test_thresholds_are_the_configured_ones(tmp_path: Path) -> None:
    cfg = load_config(
        write_config(
            tmp_path,
            extra="[model_update]\nmin_recall = 0.5\nmin_mean_iou = 0.4\nmax_conf_delta = 0.3\n"
            "min_top1_agreement = 0.2",
        )
    )
    th = model_switch._thresholds(cfg)
    assert (th.min_recall, th.min_mean_iou, th.max_conf_delta, th.min_top1_agreement) == (0.5, 0.4, 0.3, 0.2)


def test_force_switches_past_a_refusing_gate_and_is_recorded(
    tmp_path: Path, cfg_of: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    import logging

    cfg = cfg_of("[model_update]\nmax_conf_delta = 0.0")
    with caplog.at_level(logging.WARNING, logger="edge_agent.model_update"):
        res = install(cfg, _pkg(tmp_path, "2.0"), origin="cli", force=True)
    assert res["outcome"] == "switched" and res["detail"].endswith(" (forced)")
    assert _state(cfg).trial.forced is True  # type: ignore[union-attr]
    vid = _state(cfg).current
    assert caplog.messages == [f"{vid}: gate failed but --force given by cli: switching anyway"]
    # --force on a package the gate passes: an ordinary switch, not a forced one
    ok = cfg_of(device="cam-2")
    res = install(ok, _pkg(tmp_path, "3.0"), origin="cli", force=True)
    assert res["outcome"] == "switched" and res["detail"].endswith(": passed"), res["detail"]
    assert _state(ok).trial.forced is False  # type: ignore[union-attr]


def test_signatures_and_force_in_the_manifest(tmp_path: Path, cfg_of: Callable[..., Any]) -> None:
    from edge_agent.adapters.updates import signing

    key, other = tmp_path / "k", tmp_path / "o"
    pub, opub = signing.generate_key(key), signing.generate_key(other)
    cfg = cfg_of(f'[model_update]\ntrusted_keys = ["{opub}", "{pub}"]\nmax_conf_delta = 0.0')
    unsigned = install(cfg, _pkg(tmp_path, "2.0"), origin="mqtt:x", require_signature=True)
    assert unsigned["outcome"] == "refused" and "unsigned" in unsigned["detail"]
    # signed, asking for force: honoured (the author's decision, covered by the signature)
    res = install(cfg, _pkg(tmp_path, "2.1", signature_key=key, force=True), origin="mqtt:x")
    assert res["outcome"] == "switched" and res["signed_by_key"] == 1 and "(forced)" in res["detail"]
    nokeys = cfg_of("[model_update]\nmax_conf_delta = 0.0", device="cam-2")
    res = install(nokeys, _pkg(tmp_path, "2.2", force=True), origin="inbox:x")  # unsigned force: ignored
    assert res["outcome"] == "refused", res["detail"]
    res = install(nokeys, _pkg(tmp_path, "2.3"), origin="mqtt:x", require_signature=True)
    assert res["outcome"] == "refused" and "must be signed" in res["detail"]


def test_gate_images_prefer_the_packages_probe_images_over_the_samples(
    tmp_path: Path, cfg_of: Callable[..., Any]
) -> None:
    cfg = cfg_of()
    probe = sorted(SAMPLES.glob("*.jpg"))[:2]
    res = install(cfg, pack_in_process(tmp_path / "p.pkg", INT8, version="2.0", probe=probe), origin="test")
    assert res["gate"]["source"] == "probe" and res["gate"]["images"] == 2, res["detail"]
    other = cfg_of(device="cam-2")
    # not the demo detector: the bundled samples are no verdict
    other.detector.model = str(make_dim_scores(INT8, tmp_path / "dim.onnx"))
    res = install(other, pack_in_process(tmp_path / "q.pkg", FP32, version="3.0"), origin="test")
    assert res["outcome"] == "refused" and res["gate"]["source"] == "none", res["detail"]
    assert json.dumps(res["gate"]["reasons"]).count("no verdict") == 1


# ---- survivors of the first mutation run, each pinned --------------------------------------
CLS, CLS8 = FP32.parent / "demo-classifier.onnx", FP32.parent / "demo-classifier-int8.onnx"


def _names(model: Path) -> list[str]:
    from edge_agent.adapters.runtime.onnx_model import OnnxModel

    names = OnnxModel(model, warmup=False).info.names
    return [names[i] for i in sorted(names)]


def test_a_cascade_package_gates_the_classifier_on_crops_and_its_files_replace_the_configs(
    tmp_path: Path, cfg_of: Callable[..., Any]
) -> None:
    base = cfg_of()
    cfg = base.model_copy(deep=True)
    from edge_agent.core.config.schema import ClassifierConfig

    cfg.classifier = ClassifierConfig(model=str(CLS), crop_padding=0.2)
    cfg.detector.float_model = "/config/float.onnx"
    pkg = pack_in_process(
        tmp_path / "c.pkg",
        INT8,
        version="3.0",
        classifier=CLS8,
        float_source=FP32,
        labels={"detector": _names(INT8), "classifier": _names(CLS8)},
        probe=sorted(SAMPLES.glob("*.jpg"))[:2],
    )
    res = install(cfg, pkg, origin="test")
    assert res["outcome"] == "switched", res["detail"]
    checks = {c["name"]: c for c in res["gate"]["classifier"]["checks"]}
    assert checks["top1_agreement"]["passed"] is True and res["gate"]["classifier"]["images"] > 0
    vid = _state(cfg).current
    store = ModelStore(cfg.device.state_dir)
    d = store.version_dir(vid or "")
    eff = effective_config(cfg, vid, store)
    assert eff.detector.model == str(d / "detector.onnx")
    assert eff.detector.labels == str(d / "detector.labels.json")
    assert eff.detector.float_model == str(d / "float_source.onnx")  # the package's, not the config's
    assert eff.classifier is not None and eff.classifier.model == str(d / "classifier.onnx")
    assert eff.classifier.labels == str(d / "classifier.labels.json") and eff.classifier.crop_padding == 0.2
    assert cfg.classifier.model == str(CLS) and cfg.detector.float_model == "/config/float.onnx"  # a copy
    assert effective_config(cfg, None, store) is cfg
    # a config without a classifier gets one from the package
    eff2 = effective_config(base, vid, store)
    assert eff2.classifier is not None and eff2.classifier.model == str(d / "classifier.onnx")
    # a plain package: no labels, no float source, the config's classifier untouched
    plain = pack_in_process(tmp_path / "p.pkg", INT8, version="4.0", probe=ONE_PROBE)
    cfg.model_update.max_conf_delta = 1.0
    assert install(cfg, plain, origin="test")["outcome"] == "switched"
    vid2 = _state(cfg).current
    eff3 = effective_config(cfg, vid2, store)
    assert eff3.detector.labels is None and eff3.detector.float_model is None
    assert eff3.classifier is not None and eff3.classifier.model == str(CLS)


def test_the_gate_uses_a_snapshot_of_the_frame_ring(tmp_path: Path, cfg_of: Callable[..., Any]) -> None:
    import time

    import cv2

    from edge_agent.adapters.updates.frame_ring import FrameRing

    cfg = cfg_of("[model_update]\nring_frames = 4\nring_interval_s = 1")
    ring = FrameRing(Path(cfg.device.state_dir) / "models" / "ring", 4, 1.0, 1.0)
    for i, s in enumerate(sorted(SAMPLES.glob("*.jpg"))[:3]):
        assert ring.offer(cv2.imread(str(s)), now=time.time() + 2 * i)
    res = install(cfg, _pkg(tmp_path, "2.0"), origin="test")
    assert res["gate"]["source"] == "ring" and res["gate"]["images"] == 3, res["detail"]
    assert len(ring.files()) == 3  # the ring itself is left as it was
    got = model_switch._snapshot([*ring.files(), tmp_path / "gone.jpg"], tmp_path, ring.files)
    assert [p.name for p in got] == [p.name for p in ring.files()]


def test_describe_shows_a_broken_current_version_and_the_last_event(
    tmp_path: Path, cfg_of: Callable[..., Any]
) -> None:
    cfg = cfg_of()
    install(cfg, _pkg(tmp_path, "2.0"), origin="test")
    st = _state(cfg)
    info = describe(cfg)
    assert info["history"] == [None] and info["last"] == st.last and info["last"]["outcome"] == "switched"
    store = ModelStore(cfg.device.state_dir)
    (store.version_dir(st.current or "") / "manifest.json").write_bytes(b"{")
    info = describe(cfg)
    assert info["current"]["id"] == st.current and "manifest.json is not JSON" in info["current"]["error"]
    assert set(info["current"]) == {"id", "error"}
    demo = cfg_of(device="cam-2")
    demo.detector.model = ""
    assert describe(demo)["current"] == {"id": None, "model": "bundled demo detector"}


def test_a_refused_rollback_is_recorded_with_its_origin(cfg_of: Callable[..., Any]) -> None:
    cfg = cfg_of()
    res = rollback(cfg, "why")
    assert res["origin"] == "cli" and res["detail"] == "nothing to roll back: the config's model runs"
    assert _state(cfg).last == res


def test_the_samples_count_only_while_the_demo_detector_runs(
    tmp_path: Path, cfg_of: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from edge_agent.app.cli import assets

    cfg = cfg_of()
    store = ModelStore(cfg.device.state_dir)
    assert model_switch._runs_demo_detector(cfg, store) is True
    monkeypatch.setattr(assets, "demo_dir", lambda: None)  # an install without the demo models
    assert model_switch._runs_demo_detector(cfg, store) is False
    monkeypatch.undo()
    cfg.detector.model = str(tmp_path / "missing.onnx")
    assert model_switch._runs_demo_detector(cfg, store) is False


def test_current_paths_are_the_installed_version_else_the_configs_files(
    tmp_path: Path, cfg_of: Callable[..., Any]
) -> None:
    from edge_agent.app.cli import assets
    from edge_agent.core.config.schema import ClassifierConfig

    cfg = cfg_of()
    store = ModelStore(cfg.device.state_dir)
    assert model_switch.current_paths(cfg, store) == {"detector": FP32}
    cfg.detector.labels = "/l/det.json"
    cfg.classifier = ClassifierConfig(model="/m/cls.onnx", labels="/l/cls.json")
    assert model_switch.current_paths(cfg, store) == {
        "detector": FP32,
        "detector_labels": Path("/l/det.json"),
        "classifier": Path("/m/cls.onnx"),
        "classifier_labels": Path("/l/cls.json"),
    }
    cfg.classifier = ClassifierConfig(model="/m/cls.onnx")
    cfg.detector.labels = None
    assert model_switch.current_paths(cfg, store) == {"detector": FP32, "classifier": Path("/m/cls.onnx")}
    cfg.detector.model = ""
    want = assets.demo_file(assets.DEMO_DETECTOR, assets.DEMO_DETECTOR_FP32)
    assert model_switch.current_paths(cfg, store)["detector"] == want  # the bundled demo detector
    cfg.classifier = None
    install(cfg, _pkg(tmp_path, "2.0"), origin="test")
    vid = _state(cfg).current or ""
    assert model_switch.current_paths(cfg, store) == {"detector": store.version_dir(vid) / "detector.onnx"}


def test_defaults_and_log_lines_of_install_and_rollback(
    tmp_path: Path, cfg_of: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    import logging

    cfg = cfg_of()
    assert install(cfg, _pkg(tmp_path, "1.0"))["origin"] == "cli"
    first = _state(cfg).current
    install(cfg, _pkg(tmp_path, "2.0"))
    second = _state(cfg).current
    caplog.set_level(logging.WARNING, logger="edge_agent.model_update")
    assert rollback(cfg, "too slow")["origin"] == "cli"
    assert rollback(cfg, "again")["origin"] == "cli"
    assert caplog.messages == [
        f"rolled back from {second} to {first}: too slow",
        f"rolled back from {first} to the config's model: again",
    ]


def test_no_samples_to_fall_back_on_is_no_verdict_not_a_crash(
    tmp_path: Path, cfg_of: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from edge_agent.app.cli import assets
    from edge_agent.errors import ModelError

    def gone() -> Path:
        raise ModelError("demo samples not installed")

    monkeypatch.setattr(assets, "demo_samples", gone)
    cfg = cfg_of()
    res = install(cfg, _pkg(tmp_path, "2.0", probe=[]), origin="test")
    assert res["outcome"] == "refused" and res["gate"]["source"] == "bundled-probe", res["detail"]
    assert res["gate"]["images"] == 0 and "no verdict" in res["detail"]


def test_refusals_name_the_package_and_keep_the_origin(
    tmp_path: Path, cfg_of: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    import logging

    from edge_agent.adapters.updates import signing

    key, other = tmp_path / "k", tmp_path / "o"
    pub = signing.generate_key(key)
    signing.generate_key(other)
    cfg = cfg_of()
    for pkg, why in (
        (pack_in_process(tmp_path / "a.pkg", INT8, min_agent_version="999"), "999"),
        (pack_in_process(tmp_path / "r.pkg", INT8, min_onnxruntime="99.0"), "99.0"),
    ):
        res = install(cfg, pkg, origin="test")
        assert res["outcome"] == "refused" and res["origin"] == "test", res
        assert res["detail"].startswith(f"{pkg}: ") and why in res["detail"], res["detail"]
    keyed = cfg_of(f'[model_update]\ntrusted_keys = ["{pub}"]', device="cam-2")
    bad = pack_in_process(tmp_path / "b.pkg", INT8, signature_key=other)
    res = install(keyed, bad, origin="test")
    assert res["detail"].startswith(f"{bad}: bad signature") and res["origin"] == "test"
    plain = cfg_of(device="cam-3")
    res = install(plain, _pkg(tmp_path, "2.0"), origin="mqtt:x", require_signature=True)
    assert res["detail"].endswith("(set model_update.trusted_keys; docs/threat-model.md)")
    assert install(plain, _pkg(tmp_path, "2.0"), origin="test")["outcome"] == "switched"
    same = install(plain, _pkg(tmp_path, "2.0"), origin="again")
    assert same["version"]["version"] == "2.0" and same["origin"] == "again"
    # a signed manifest asking for force is honoured, and says so in the log
    forced = cfg_of(f'[model_update]\ntrusted_keys = ["{pub}"]\nmax_conf_delta = 0.0', device="cam-4")
    caplog.set_level(logging.WARNING, logger="edge_agent.model_update")
    res = install(forced, _pkg(tmp_path, "3.0", signature_key=key, force=True), origin="test")
    vid = _state(forced).current
    assert res["outcome"] == "switched"
    assert f"{vid}: its signed manifest asks to switch even if the gate refuses" in caplog.messages


def test_the_size_cap_is_in_decimal_megabytes_to_the_byte(tmp_path: Path, cfg_of: Callable[..., Any]) -> None:
    big = tmp_path / "big.jpg"
    big.write_bytes(os.urandom(1_500_000))  # a package over 1 MB: the cap's unit shows at the byte
    pkg = _pkg(tmp_path, "2.0", probe=[big])
    size = pkg.stat().st_size
    res = install(cfg_of(f"[model_update]\nmax_package_mb = {(size - 1) / 1e6}"), pkg, origin="test")
    assert res["detail"] == f"{pkg}: {size} bytes > max_package_mb" and res["origin"] == "test"


def test_a_store_from_before_anti_rollback_still_refuses_an_older_version(
    tmp_path: Path, cfg_of: Callable[..., Any]
) -> None:
    cfg = cfg_of()
    install(cfg, _pkg(tmp_path, "2.0"), origin="test")
    store = ModelStore(cfg.device.state_dir)
    st = store.state()
    st.highest = None  # the pointer of an agent from before the mark: its current version counts
    store.save(st)
    res = install(cfg, _pkg(tmp_path, "1.0"), origin="test")
    assert res["outcome"] == "refused" and "not newer than 2.0" in res["detail"]
    assert install(cfg, _pkg(tmp_path, "3.0"), origin="test")["outcome"] == "switched"
    st = _state(cfg)
    assert st.highest == Highest(version="3.0", vid=st.current or "")  # the mark starts again


# ---- survivors of the re-run after the split (model-switch area) ------------------------------
def test_a_cascade_package_without_classifier_labels_leaves_the_labels_unset(
    tmp_path: Path, cfg_of: Callable[..., Any]
) -> None:
    cfg = cfg_of()
    pkg = pack_in_process(tmp_path / "c.pkg", INT8, version="3.0", classifier=CLS8, probe=ONE_PROBE)
    assert install(cfg, pkg, origin="test")["outcome"] == "switched"
    store = ModelStore(cfg.device.state_dir)
    vid = _state(cfg).current or ""
    eff = effective_config(cfg, vid, store)
    # the classifier's own names then come from its ONNX metadata, not from a labels file
    assert eff.classifier is not None and eff.classifier.model == str(
        store.version_dir(vid) / "classifier.onnx"
    )
    assert eff.classifier.labels is None and eff.detector.labels is None


def test_the_bundled_samples_are_the_jpeg_and_png_files_of_the_samples_folder(
    tmp_path: Path, cfg_of: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from edge_agent.app.cli import assets

    samples = tmp_path / "samples"
    samples.mkdir()
    for name in ("b.PNG", "a.jpg", "c.JPG", "notes.txt", "d.png"):
        (samples / name).write_bytes(b"x")
    monkeypatch.setattr(assets, "demo_samples", lambda: samples)
    from edge_agent.adapters.updates.package_file import PackageReader

    cfg = cfg_of()
    store = ModelStore(cfg.device.state_dir)
    with PackageReader(_pkg(tmp_path, "2.0", probe=[])) as reader:  # no probe images of its own
        vid = store.stage(reader)
    files, source = model_switch.gate_images(cfg, store, vid)
    assert source == "bundled-probe"
    assert [p.name for p in files] == ["a.jpg", "b.PNG", "c.JPG", "d.png"]


def test_a_ring_frame_rotated_out_while_copying_drops_only_that_frame(tmp_path: Path) -> None:
    frames = []
    for name in ("1.jpg", "2.jpg", "3.jpg"):
        (tmp_path / name).write_bytes(name.encode())
        frames.append(tmp_path / name)
    dest = tmp_path / "snap"
    dest.mkdir()
    got = model_switch._snapshot(
        [frames[0], tmp_path / "gone.jpg", frames[1], frames[2]], dest, lambda: frames
    )
    assert got == [dest / "1.jpg", dest / "2.jpg", dest / "3.jpg"]
    assert [p.read_bytes() for p in got] == [b"1.jpg", b"2.jpg", b"3.jpg"]


def test_a_ring_that_rotates_while_copying_still_gives_the_gate_a_full_ring(tmp_path: Path) -> None:
    """The loop wrote frame 4 and pruned frame 1 between the gate's listing and its copy: the gate
    gets 2, 3, 4 (the ring's size), not 2 and 3 (CI: "gate on 2 ring images" of a 3-frame ring)."""
    frames = []
    for name in ("1.jpg", "2.jpg", "3.jpg", "4.jpg"):
        (tmp_path / name).write_bytes(name.encode())
        frames.append(tmp_path / name)
    listed = frames[:3]
    frames[0].unlink()  # rotated out after the listing
    dest = tmp_path / "snap"
    dest.mkdir()
    got = model_switch._snapshot(listed, dest, lambda: frames[1:])
    assert [p.name for p in got] == ["2.jpg", "3.jpg", "4.jpg"]
    # a ring that keeps rotating under every listing: bounded tries, the newest it could copy
    gone = [tmp_path / f"x{i}.jpg" for i in range(3)]
    assert model_switch._snapshot(gone, dest, lambda: gone) == []


def test_a_rollback_event_names_the_version_it_left_and_describe_has_its_four_keys(
    tmp_path: Path, cfg_of: Callable[..., Any]
) -> None:
    cfg = cfg_of()
    assert set(describe(cfg)) == {"current", "history", "trial", "last"}  # `model status --json`
    install(cfg, _pkg(tmp_path, "2.0"), origin="test")
    vid = _state(cfg).current
    assert set(describe(cfg)) == {"current", "history", "trial", "last"}
    back = rollback(cfg, "slow")
    assert back["version"] == {"name": vid} and _state(cfg).last == back


def test_without_the_int8_demo_the_running_model_is_the_fp32_demo(
    tmp_path: Path, cfg_of: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    from edge_agent.app.cli import assets

    only_fp32 = tmp_path / "demo"
    only_fp32.mkdir()
    shutil.copy(FP32, only_fp32 / assets.DEMO_DETECTOR_FP32)
    monkeypatch.setattr(assets, "_CANDIDATES", [only_fp32])
    cfg = cfg_of()
    cfg.detector.model = ""
    got = model_switch.current_paths(cfg, ModelStore(cfg.device.state_dir))
    assert got == {"detector": only_fp32 / assets.DEMO_DETECTOR_FP32}


def test_the_anti_rollback_refusal_names_both_ways_back() -> None:
    from edge_agent.core.updates.package import Manifest

    m = Manifest(name="demo", version="1.0", task="detect", created_at="2026-11-30T00:00:00Z", files={})
    why = downgrade_reason(None, StoreState(highest=Highest(version="2.0", vid="demo-2.0-1")), m)  # type: ignore[arg-type]
    assert why == (
        "version 1.0 is not newer than 2.0, the highest installed (anti-rollback); to go back on purpose "
        "run `edge-agent model rollback` or `edge-agent model install --allow-downgrade PACKAGE` on the device"
    )


@pytest.mark.parametrize(
    ("inodes", "why"),
    [
        (8, "{pkg}: cannot extract it: [Errno 28] No space left on device"),
        (10, "the gate could not run: [Errno 28] No space left on device"),
    ],
    ids=["extracting", "gate-snapshot"],
)
def test_a_disk_that_fills_during_an_install_is_a_refusal_with_the_true_reason(
    tmp_path: Path, cfg_of: Callable[..., Any], inodes: int, why: str
) -> None:
    from support.tmpfs import tmpfs

    pkg = _pkg(tmp_path, "2.0")
    cfg = cfg_of()
    # room in bytes (the up-front free-space check passes) but too few inodes: the filesystem is
    # full while extracting (8) or when the gate makes its snapshot folder (10), as when another
    # writer takes the space meanwhile
    with tmpfs(Path(cfg.device.state_dir), size=f"32m,nr_inodes={inodes}"):
        res = install(cfg, pkg, origin="mqtt:x")
        assert res["outcome"] == "refused" and res["origin"] == "mqtt:x", res
        assert why.format(pkg=pkg) in res["detail"], res["detail"]
        # the version is known once the package is read (the gate case), not while extracting
        assert res["version"] == (None if inodes == 8 else {**res["version"], "version": "2.0"})
        store = ModelStore(cfg.device.state_dir)
        assert store.state().last == res and store.state().current is None  # recorded; nothing switched
        assert list(store.versions.iterdir()) == [] and list(store.staging.iterdir()) == []  # nothing left


def test_the_gate_gets_the_configured_runtime_and_a_hidden_ring_snapshot_on_the_state_disk(
    tmp_path: Path, cfg_of: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    import cv2

    from edge_agent.adapters.updates.frame_ring import FrameRing
    from edge_agent.app.updates import gate as model_gate
    from edge_agent.core.config.schema import ClassifierConfig

    calls: list[dict[str, Any]] = []
    real = model_gate.run_gate

    def recorded(cur: Any, cand: Any, files: list[Path], source: str, th: Any, *rest: Any, **kw: Any) -> Any:
        calls.append({"files": list(files), "source": source, "rest": rest, "kw": kw})
        return real(cur, cand, files, source, th, *rest, **kw)

    monkeypatch.setattr(model_gate, "run_gate", recorded)
    cfg = cfg_of("[model_update]\nring_frames = 4\nring_interval_s = 1")
    cfg.detector.provider, cfg.detector.threads = "cpu", 1
    store = ModelStore(cfg.device.state_dir)
    ring = FrameRing(store.root / "ring", 4, 1.0, 1.0)
    for i, s in enumerate(ONE_PROBE * 2):
        assert ring.offer(cv2.imread(str(s)), now=time.time() + 2 * i)
    assert install(cfg, _pkg(tmp_path, "2.0"), origin="test")["outcome"] == "switched"
    (call,) = calls
    assert call["source"] == "ring" and call["rest"] == ("cpu", 1, 0.1)  # no classifier: the default padding
    assert call["kw"] == {"planner": None}  # `model install` without a running agent: this host, per model
    snap = {f.parent for f in call["files"]}
    (d,) = snap  # a copy in one folder, hidden, beside the store (never /tmp: often RAM on a Pi)
    assert d.parent == store.root and d.name.startswith(".gate-") and not d.exists()
    assert sorted(f.name for f in call["files"]) == sorted(f.name for f in ring.files())
    # a package's probe images are read where they are; the classifier's crop padding is the config's
    for f in ring.files():
        f.unlink()
    cfg.classifier = ClassifierConfig(model=str(CLS), crop_padding=0.3)
    calls.clear()
    res = install(cfg, _pkg(tmp_path, "3.0", classifier=CLS8), origin="test")
    (call,) = calls
    vid = _state(cfg).current if res["outcome"] == "switched" else None
    assert call["source"] == "probe" and call["rest"] == ("cpu", 1, 0.3), res["detail"]
    assert [f.parent.name for f in call["files"]] == ["probe"] and vid is not None
    assert call["files"][0].parent.parent == store.version_dir(vid)


def test_the_gate_verdict_is_one_journal_line_naming_the_version(
    tmp_path: Path, cfg_of: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    import logging
    import re
    import time

    cfg = cfg_of()
    t0 = time.monotonic()
    with caplog.at_level(logging.INFO, logger="edge_agent.model_update"):
        res = install(cfg, _pkg(tmp_path, "2.0"), origin="test")
        took = time.monotonic() - t0
        refused = install(cfg, _pkg(tmp_path, "1.0"), origin="mqtt:x")
    vid = _state(cfg).current
    verdicts = [m for m in caplog.messages if "gate on" in m]
    assert verdicts == [f"{vid}: {res['detail']}"] and res["detail"].startswith("gate on 1 probe images (")
    assert res["detail"].endswith("s): passed") and abs(res["at"] - time.time()) < 60
    (done,) = [m for m in caplog.messages if m.startswith("switched to")]
    match = re.fullmatch(rf"switched to {vid} in (\d+\.\d)s \(test\)", done)
    assert match is not None and float(match[1]) <= took + 0.05, done
    assert caplog.messages[-1] == f"model update refused (mqtt:x): {refused['detail']}"


def test_ring_max_age_h_keeps_old_frames_out_of_the_gate(tmp_path: Path, cfg_of: Callable[..., Any]) -> None:
    import time

    import cv2

    from edge_agent.adapters.updates.frame_ring import FrameRing

    cfg = cfg_of("[model_update]\nring_frames = 4\nring_interval_s = 1\nring_max_age_h = 1")
    store = ModelStore(cfg.device.state_dir)
    ring = FrameRing(store.root / "ring", 4, 1.0, 1000.0)
    img = cv2.imread(str(sorted(SAMPLES.glob("*.jpg"))[0]))
    now = time.time()
    assert ring.offer(img, now=now - 2 * 3600) and ring.offer(img, now=now - 60)
    files, source = model_switch.gate_images(cfg, store, "none")
    assert source == "ring" and [int(p.stem) // 1000 for p in files] == [int((now - 60) * 1000) // 1000]


def test_a_format_1_package_still_installs_locally(tmp_path: Path, cfg_of: Callable[..., Any]) -> None:
    """Made before targets and plans (manifest first): the operator's local install takes it."""
    from edge_agent.adapters.updates.package_file import PackageReader, write_package
    from edge_agent.core.updates.package import Manifest, PackageFile

    with PackageReader(_pkg(tmp_path, "2.0")) as r:
        files: dict[str, PackageFile] = dict(r.manifest.files)
    m = Manifest(format=1, name="demo", version="2.0", created_at="2026-01-01T00:00:00Z", files=files)
    old = tmp_path / "old.pkg"
    write_package(old, m, {"detector.onnx": INT8}, b"")  # a "signature" of nothing: no key is set
    with PackageReader(old) as r:
        assert r.manifest.format == 1 and r.manifest.transfer is None
    assert install(cfg_of(), old, origin="cli")["outcome"] == "switched"


def test_locally_a_package_for_other_devices_or_boards_is_refused(
    tmp_path: Path, cfg_of: Callable[..., Any]
) -> None:
    cfg = cfg_of()  # cam-1, no groups, on this machine's board
    for over, why in (
        (
            {"for_devices": ["cam-9"], "for_groups": []},
            "not for this device: the package is for devices ['cam-9']",
        ),
        ({"boards": ["jetson"]}, "not for this device: the package is for boards ['jetson']"),
    ):
        res = install(cfg, _pkg(tmp_path, "2.0", **over), origin="cli")
        assert res["outcome"] == "refused" and why in res["detail"], res["detail"]
    assert (
        install(cfg, _pkg(tmp_path, "2.0", for_devices=[], for_groups=[]), origin="cli")["outcome"]
        == "switched"
    )


def test_a_transfer_its_sender_cancelled_during_the_gate_is_refused_and_not_switched(
    tmp_path: Path, cfg_of: Callable[..., Any]
) -> None:
    cfg = cfg_of()
    res = install(cfg, _pkg(tmp_path, "2.0"), origin="mqtt:t1", cancelled=lambda: True)
    assert res["outcome"] == "refused" and res["detail"] == "cancelled by its sender"
    assert _state(cfg).current is None
    assert (
        install(cfg, _pkg(tmp_path, "2.0"), origin="test", cancelled=lambda: False)["outcome"] == "switched"
    )
