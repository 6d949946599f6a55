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

# the in-loop "cannot score" watch: a detector whose best score stays at or below this for this many
# consecutive frames is reported in the status (a model that cannot score, or a camera pointed at
# nothing)
NO_SCORE_LEVEL = 1e-3
NO_SCORE_FRAMES = 100
