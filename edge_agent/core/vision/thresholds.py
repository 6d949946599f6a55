"""Validation pass/fail limits; a light module so CLI parsers can show the defaults without numpy."""

from __future__ import annotations

from dataclasses import dataclass

from edge_agent.core.vision.defaults import CONF_THRESHOLD


@dataclass
class Thresholds:
    min_recall: float = 0.9  # of the reference's detections, same class and IoU >= 0.5
    min_mean_iou: float = 0.8
    max_conf_delta: float = 0.1  # mean |conf_ref - conf_cand| over matched detections
    max_map_drop: float = 0.015  # absolute, on mAP50 and mAP50-95 (with labels)
    min_top1_agreement: float = 0.95
    max_top1_drop: float = 0.02  # absolute top-1 accuracy drop (with labels)
    conf: float = CONF_THRESHOLD  # detection threshold for the agreement metrics
    conf_margin: float = 0.05  # a match may sit this far below ``conf`` on the other side
    eval_conf: float = 0.001  # for mAP
    eval_iou: float = 0.7  # Ultralytics YOLOv8 val defaults: conf 0.001, NMS IoU 0.7
