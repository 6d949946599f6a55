"""The in-loop "cannot score" watch. (The detection defaults live in :mod:`edge_agent.core.defaults`.)"""

from __future__ import annotations

# a detector whose best score stays at or below this for this many consecutive frames is reported
# in the status (a model that cannot score, or a camera pointed at nothing)
NO_SCORE_LEVEL = 1e-3
NO_SCORE_FRAMES = 100
