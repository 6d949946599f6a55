"""Switching the active model version: install (verify, stage, gate, switch), rollback, describe.

The gate decides, the store makes it durable. Used by the CLI (``edge-agent model install/rollback``
when no agent runs) and by the agent's :class:`~edge_agent.app.updates.agent_side.ModelUpdates` (inbox,
MQTT, trial). Every path that changes the active model holds the store's lock, so the CLI and a
running agent never switch at once. Each returns one event (:func:`~edge_agent.core.updates.store_state.event`)
whose ``outcome`` is an :class:`~edge_agent.core.updates.store_state.Outcome`.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional

from edge_agent import __version__
from edge_agent.adapters.updates import signing
from edge_agent.adapters.updates.package_file import PackageReader
from edge_agent.adapters.updates.store import ModelStore, device_target
from edge_agent.adapters.updates.store import downgrade_reason as downgrade_reason  # re-exported (CLI, tests)
from edge_agent.adapters.updates.store import highest as highest
from edge_agent.core.config.schema import Config
from edge_agent.core.updates.binding import rolled_back_problem, target_problem
from edge_agent.core.updates.package import (
    check_agent_version,
    check_runtime_version,
    parse_version,
)
from edge_agent.core.updates.store_state import Highest, Outcome, RolledBack, Trial, event
from edge_agent.core.vision.defaults import CROP_PADDING
from edge_agent.errors import EdgeAgentError, ModelError

if TYPE_CHECKING:
    from edge_agent.adapters.runtime.planner import ProviderPlanner
    from edge_agent.core.vision.thresholds import Thresholds

log = logging.getLogger("edge_agent.model_update")
CONFIG_MODEL = None  # history entry meaning "the model named in the config file"


def store_for(cfg: Config) -> ModelStore:
    return ModelStore(cfg.device.state_dir)


def effective_config(cfg: Config, vid: Optional[str], store: ModelStore) -> Config:
    """``cfg`` with the detector (and classifier) of installed version ``vid``; None = the config's own."""
    if vid is None:
        return cfg
    paths = store.paths(vid)
    out = cfg.model_copy(deep=True)
    out.detector.model = str(paths["detector"])
    out.detector.labels = str(paths["detector_labels"]) if "detector_labels" in paths else None
    # the package's float source replaces the config's: it belongs to the new weights
    out.detector.float_model = str(paths["float_source"]) if "float_source" in paths else None
    if "classifier" in paths:
        from edge_agent.core.config.schema import ClassifierConfig

        c = cfg.classifier or ClassifierConfig(model="")
        out.classifier = c.model_copy(
            update={
                "model": str(paths["classifier"]),
                "labels": str(paths["classifier_labels"]) if "classifier_labels" in paths else None,
            }
        )
    return out


def current_paths(cfg: Config, store: ModelStore) -> dict[str, Path]:
    """Role -> file of the model running now (an installed version, else the config's / demo model)."""
    vid = store.state().current
    if vid:
        return store.paths(vid)
    from edge_agent.app.cli.assets import DEMO_DETECTOR, DEMO_DETECTOR_FP32, demo_file

    d = cfg.detector
    out = {"detector": Path(d.model) if d.model else demo_file(DEMO_DETECTOR, DEMO_DETECTOR_FP32)}
    if d.labels:
        out["detector_labels"] = Path(d.labels)
    if cfg.classifier is not None:
        out["classifier"] = Path(cfg.classifier.model)
        if cfg.classifier.labels:
            out["classifier_labels"] = Path(cfg.classifier.labels)
    return out


def gate_images(cfg: Config, store: ModelStore, vid: str) -> tuple[list[Path], str]:
    """The device's own recent frames; else the package's probe images; else the bundled samples,
    but only while the demo detector runs: they are shapes drawn for it, and a COCO model
    "passing" on two spurious detections there is no verdict (issue 22). None -> the gate refuses."""
    files = _ring_files(cfg, store)
    if files:
        return files, "ring"
    probe = store.probe_images(vid)
    if probe:
        return probe, "probe"
    if not _runs_demo_detector(cfg, store):
        return [], "none"
    from edge_agent.app.cli.assets import demo_samples

    try:
        samples = sorted(p for p in demo_samples().iterdir() if p.suffix.lower() in (".jpg", ".png"))
    except ModelError:
        samples = []
    return samples, "bundled-probe"


def _ring_files(cfg: Config, store: ModelStore) -> list[Path]:
    from edge_agent.adapters.updates.frame_ring import FrameRing

    mu = cfg.model_update
    return FrameRing(store.root / "ring", mu.ring_frames, mu.ring_interval_s, mu.ring_max_age_h).files()


def _runs_demo_detector(cfg: Config, store: ModelStore) -> bool:
    from edge_agent.adapters.updates.package_file import sha256_file
    from edge_agent.app.cli.assets import DEMO_DETECTOR, DEMO_DETECTOR_FP32, demo_dir

    d = demo_dir()
    if d is None:
        return False
    try:
        current = sha256_file(current_paths(cfg, store)["detector"])
        demos = {sha256_file(d / n) for n in (DEMO_DETECTOR, DEMO_DETECTOR_FP32) if (d / n).is_file()}
    except (OSError, ModelError):
        return False
    return current in demos


def _thresholds(cfg: Config) -> Thresholds:
    from edge_agent.core.vision.thresholds import Thresholds

    mu = cfg.model_update
    return Thresholds(
        min_recall=mu.min_recall,
        min_mean_iou=mu.min_mean_iou,
        max_conf_delta=mu.max_conf_delta,
        min_top1_agreement=mu.min_top1_agreement,
    )


def install(
    cfg: Config,
    package: Path,
    *,
    force: bool = False,
    origin: str = "cli",
    baseline_rate: Optional[float] = None,
    require_signature: bool = False,
    allow_downgrade: bool = False,
    allow_rolled_back: bool = False,
    planner: Optional[ProviderPlanner] = None,
    cancelled: Optional[Callable[[], bool]] = None,
) -> dict[str, Any]:
    """Verify, stage, gate and switch; returns the outcome (also kept as ``last`` in the store).

    Refusals (bad or missing signature, a version not newer than the highest installed, a failed
    gate) return ``{"outcome": "refused", ...}``; the running model stays. ``require_signature``:
    the package came from outside (MQTT). ``force`` and ``allow_downgrade`` are local decisions:
    only the CLI passes them, and ``allow_rolled_back`` (a version this device rolled back).
    A package from MQTT must name this device or one of its groups in its signed manifest; a
    local one may name nobody, but one that names others (or another board) is refused too. ``planner``: the running agent's, for the gate's model loads."""
    from edge_agent.app.updates.gate import run_gate

    store = store_for(cfg)
    mu = cfg.model_update
    t0 = time.monotonic()
    with store.locked():
        size = package.stat().st_size
        if size > mu.max_package_mb * 1e6:
            return record(store, origin, None, Outcome.REFUSED, f"{package}: {size} bytes > max_package_mb")
        state = store.state()
        try:
            with PackageReader(package) as reader:
                m = reader.manifest
                check_agent_version(m, __version__, str(package))
                check_runtime_version(m, _ort_version(), str(package))
                signer = signing.verify(reader.manifest_data, reader.signature, mu.trusted_keys, str(package))
                if require_signature and signer is None:
                    raise ModelError(
                        f"{package}: unsigned package from {origin} refused: a package from outside the "
                        "device must be signed (set model_update.trusted_keys; docs/threat-model.md)"
                    )
                # the signed target fields, never the topic: a replay elsewhere is not for us
                problem = target_problem(m, device_target(cfg), network=require_signature)
                if problem:
                    raise ModelError(f"{package}: not for this device: the package {problem}")
                problem = None if allow_rolled_back else rolled_back_problem(state, m)
                if problem:
                    raise ModelError(f"{package}: {problem}")
                if state.current == m.version_id:
                    return record(
                        store,
                        origin,
                        m.summary(),
                        Outcome.UNCHANGED,
                        f"{m.version_id} is already the running model",
                    )
                why = None if allow_downgrade else downgrade_reason(store, state, m)
                if why:
                    raise ModelError(f"{package}: {why}")
                vid = store.stage(reader)
                if m.force and signer is not None:
                    force = True
                    log.warning("%s: its signed manifest asks to switch even if the gate refuses", vid)
        except ModelError as exc:
            return record(store, origin, None, Outcome.REFUSED, str(exc))
        except OSError as exc:  # a full disk while extracting: the true reason, not a retry loop
            store.clean_staging()
            return record(store, origin, None, Outcome.REFUSED, f"{package}: cannot extract it: {exc}")
        cur = current_paths(cfg, store)
        files, source = gate_images(cfg, store, vid)
        try:
            with tempfile.TemporaryDirectory(dir=store.root, prefix=".gate-") as snap:
                # a snapshot: the loop keeps rotating the ring while the gate reads it
                if source == "ring":
                    files = _snapshot(files, Path(snap), lambda: _ring_files(cfg, store))
                gate = run_gate(
                    cur,
                    store.paths(vid),
                    files,
                    source,
                    _thresholds(cfg),
                    cfg.detector.provider,
                    cfg.detector.threads,
                    cfg.classifier.crop_padding if cfg.classifier else CROP_PADDING,
                    planner=planner,
                )
        except (EdgeAgentError, OSError) as exc:  # OSError: a disk full for the ring's snapshot
            store.prune(state.kept())  # the refused candidate goes, unless the device keeps it
            return record(store, origin, m.summary(), Outcome.REFUSED, f"the gate could not run: {exc}")
        log.info("%s: %s", vid, gate.summary())
        if cancelled is not None and cancelled():  # the sender cancelled it while the gate ran
            store.prune(state.kept())
            return record(store, origin, m.summary(), Outcome.REFUSED, "cancelled by its sender")
        if not gate.passed and not force:
            store.prune(state.kept())
            return record(store, origin, m.summary(), Outcome.REFUSED, gate.summary(), gate.to_json())
        if not gate.passed:
            log.warning("%s: gate failed but --force given by %s: switching anyway", vid, origin)
        if downgrade_reason(store, state, m) is None:  # an --allow-downgrade keeps the highest
            state.highest = Highest(version=m.version, vid=vid)
        # a version installed (newer, or this one by --allow-rolled-back) ends the refusal of
        # the rolled-back versions up to it; newer rolled-back ones stay refused
        state.rolled_back = [r for r in state.rolled_back if not _at_most(r.version, m.version)]
        state.history = [*state.history, state.current][-(mu.keep_versions - 1) :]
        state.current = vid
        state.trial = Trial(
            vid=vid, since=time.time(), baseline_rate=baseline_rate, forced=bool(force and not gate.passed)
        )
        store.save(state)
        store.prune(state.kept())
        detail = gate.summary() + (" (forced)" if force and not gate.passed else "")
        out = record(store, origin, m.summary(), Outcome.SWITCHED, detail, gate.to_json(), signer=signer)
        log.info("switched to %s in %.1fs (%s)", vid, time.monotonic() - t0, origin)
        return out


def _at_most(a: str, b: str) -> bool:
    try:
        return parse_version(a) <= parse_version(b)
    except ValueError:
        return False


def _snapshot(
    files: list[Path], dest: Path, relist: Callable[[], list[Path]], attempts: int = 3
) -> list[Path]:
    """Copies of the ring's newest ``len(files)`` frames. The loop keeps writing a frame and
    pruning the oldest while this copies, so a listed frame can be gone by its turn: list again
    and copy the newer ones (CI once gated on 2 of a 3-frame ring when one rotated out)."""
    want = len(files)
    got: dict[str, Path] = {}
    for _ in range(attempts):
        missed = False
        for f in files:
            if f.name in got:
                continue
            try:
                got[f.name] = Path(shutil.copy2(f, dest / f.name))
            except FileNotFoundError:  # rotated out between listing and copying
                missed = True
        if not missed:
            break
        files = relist()
    return [got[name] for name in sorted(got)[-want:]] if want else []


def rollback(
    cfg: Config, reason: str, origin: str = "cli", only_if_current: Optional[str] = None
) -> dict[str, Any]:
    """Back to the previous version (or the config's model); the abandoned one is deleted.

    ``only_if_current``: an automatic rollback of that version, skipped when another install
    replaced it meanwhile (never roll back the wrong model)."""
    store = store_for(cfg)
    with store.locked():
        state = store.state()
        cur = state.current
        if only_if_current is not None and cur != only_if_current:
            return {
                "outcome": Outcome.UNCHANGED.value,
                "detail": f"{only_if_current} no longer runs",
                "origin": origin,
            }
        if cur is None:
            return record(
                store, origin, None, Outcome.REFUSED, "nothing to roll back: the config's model runs"
            )
        prev = state.history.pop() if state.history else CONFIG_MODEL
        try:  # refused over MQTT from now on, whatever transfer id a replay comes under
            version = store.manifest(cur).version
            state.remember_rollback(RolledBack(version=version, vid=cur, reason=reason[:300], at=time.time()))
        except ModelError as exc:  # its files are gone or damaged: the version is not known
            log.warning("rolled-back %s: its version is unknown (%s), not remembered", cur, exc)
        state.current, state.trial = prev, None
        store.save(state)
        store.prune(state.kept())
        log.warning("rolled back from %s to %s: %s", cur, prev or "the config's model", reason)
        return record(
            store, origin, {"name": cur}, Outcome.ROLLED_BACK, f"{cur} -> {prev or 'config model'}: {reason}"
        )


def record(
    store: ModelStore,
    origin: str,
    version: Optional[dict[str, str]],
    outcome: Outcome,
    detail: str,
    gate: Optional[dict[str, Any]] = None,
    signer: Optional[int] = None,
) -> dict[str, Any]:
    """The event, kept as ``last`` in the store (the status and `model status` show it)."""
    ev = event(outcome, detail, origin, time.time(), version, gate, signer)
    if outcome is Outcome.REFUSED and origin != "cli":  # the command prints its own refusal, once
        log.error("model update refused (%s): %s", origin, detail)
    state = store.state()
    state.last = ev
    store.save(state)
    return ev


def describe(cfg: Config) -> dict[str, Any]:
    """What `model status` and the status topic show: the active version, the trial, the last event."""
    store = store_for(cfg)
    state = store.state()
    cur = state.current
    info: dict[str, Any] = {"current": None, "history": state.history}
    if cur:
        try:
            m = store.manifest(cur)
            info["current"] = {**m.summary(), "id": cur, "created_at": m.created_at}
        except ModelError as exc:
            info["current"] = {"id": cur, "error": str(exc)}
    else:
        info["current"] = {"id": None, "model": cfg.detector.model or "bundled demo detector"}
    info["trial"] = state.trial.to_json() if state.trial is not None else None
    info["last"] = state.last
    return info


def _ort_version() -> str:
    import onnxruntime

    return str(onnxruntime.__version__)
