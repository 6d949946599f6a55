"""Compare two ``edge-agent infer --json`` outputs made in different environments.

    python .ci/same_detections.py REF.jsonl CAND.jsonl [--min-recall 0.9] [--min-iou 0.9]

``validate`` compares two models inside one process; this compares what two *installations*
printed (e.g. the FP32 model on today's onnxruntime against its INT8 copy on the Jetson Nano's
onnxruntime 1.11 under Python 3.8). Detections are matched per image and label by best IoU.
Exit 0 when recall of the reference and the mean IoU of matches reach the limits.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Dict, List, Tuple


def _iou(a: List[float], b: List[float]) -> float:
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def _load(path: str) -> Dict[str, List[Tuple[str, List[float]]]]:
    out: Dict[str, List[Tuple[str, List[float]]]] = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                r = json.loads(line)
                out[r["image"]] = [(d["label"], d["box"]) for d in r["detections"]]
    return out


def compare(ref_path: str, cand_path: str) -> Tuple[int, int, float]:
    """(reference detections, matched, mean IoU of the matches)."""
    ref, cand = _load(ref_path), _load(cand_path)
    total = matched = 0
    ious: List[float] = []
    for image, dets in ref.items():
        free = list(cand.get(image, []))
        for label, box in dets:
            total += 1
            best, best_i = 0.0, -1
            for i, (cl, cb) in enumerate(free):
                v = _iou(box, cb) if cl == label else 0.0
                if v > best:
                    best, best_i = v, i
            if best_i >= 0 and best >= 0.5:
                matched += 1
                ious.append(best)
                free.pop(best_i)
    return total, matched, (sum(ious) / len(ious) if ious else 0.0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("reference")
    ap.add_argument("candidate")
    ap.add_argument("--min-recall", type=float, default=0.9)
    ap.add_argument("--min-iou", type=float, default=0.9)
    a = ap.parse_args()
    total, matched, iou = compare(a.reference, a.candidate)
    recall = matched / total if total else 0.0
    ok = total > 0 and recall >= a.min_recall and iou >= a.min_iou
    print(
        f"{a.candidate} vs {a.reference}: {matched}/{total} reference detections matched "
        f"(recall {recall:.3f} >= {a.min_recall}), mean IoU {iou:.3f} >= {a.min_iou}: {'PASS' if ok else 'FAIL'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
