"""Detection defaults, in one place: CLI flags, config schema, validate, the gate and the decoders
read them.

No imports beyond the standard library, so argparse parsers and the pydantic config can show them
without loading numpy. They are Ultralytics' predict defaults, so results match its reference.
"""

from __future__ import annotations

CONF_THRESHOLD = 0.25  # a detection's score must be strictly above this (Ultralytics: ``conf > thres``)
IOU_THRESHOLD = 0.45  # class-aware NMS IoU
MAX_DET = 300
# a detection's crop for the classifier grows by this fraction of the box size on each side
CROP_PADDING = 0.1
