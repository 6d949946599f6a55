"""``edge-agent validate``: load a reference and a candidate model and compare them on images.

The comparison itself lives in :mod:`edge_agent.inference.compare` (the update gate uses it too);
this adds loading both models and the progress bar.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from edge_agent.core.vision.thresholds import Thresholds
from edge_agent.errors import EdgeAgentError
from edge_agent.inference.compare import validate_classifier, validate_detector
from edge_agent.inference.report import ValidationReport


def validate_models(
    ref_path: Path,
    cand_path: Path,
    files: list[Path],
    images_root: Path,
    labels_dir: Optional[Path] = None,
    thresholds: Optional[Thresholds] = None,
    provider: Optional[str] = None,
    threads: Optional[int] = None,
    show_progress: bool = True,
) -> ValidationReport:
    """Load both models and compare them on ``files``; which comparison depends on the model kind."""
    from edge_agent.adapters.runtime.onnx_model import OnnxModel
    from edge_agent.inference.task import input_kind, model_task
    from edge_agent.tools.progress import Progress

    th = thresholds or Thresholds()
    ref = OnnxModel(ref_path, provider=provider, threads=threads, warmup=False)
    cand = OnnxModel(cand_path, provider=provider, threads=threads, warmup=False)
    for m in (ref, cand):
        if input_kind(m) == "tensor":
            inputs = ", ".join(f"{t.name} {t.type} {list(t.shape)}" for t in m.info.inputs)
            raise EdgeAgentError(
                f"{m.path}: inputs {inputs} are not an image: validate compares models on images; "
                "`edge-agent quantize` compares a dynamic INT8 copy with FP32 on generated inputs"
            )
    kind, ckind = model_task(ref), model_task(cand)
    if kind != ckind:
        raise EdgeAgentError(f"{cand_path} is a {ckind} model but {ref_path} is a {kind} model")
    bar = Progress(len(files), "validating") if show_progress else None
    try:
        if kind == "detect":
            return validate_detector(ref, cand, files, labels_dir, th, bar)
        return validate_classifier(ref, cand, files, images_root, th, bar)
    except (ValueError, IndexError, KeyError) as exc:  # one line, never a traceback
        raise EdgeAgentError(
            f"cannot compare {cand_path} with {ref_path}: {type(exc).__name__}: {exc}"
        ) from None
    finally:
        if bar:
            bar.close()
