"""core.messages.agent_metrics, the edges its mutation run left (issue 36): a figure in
milliseconds is a family in seconds, a gauge that ends in ``_total`` cannot read as a counter, and
a camera's label comes back as the camera's own id whatever characters it holds."""

from __future__ import annotations

import pytest

from edge_agent.core.messages.agent_metrics import agent_families
from edge_agent.core.messages.status import prometheus_values


def test_a_cameras_frame_age_in_ms_is_a_family_in_seconds() -> None:
    snap = {"state": "running", "cameras": {"gate": {"frame_age_ms": 250, "state": "streaming"}}}
    fams = {f.name: f for f in agent_families(prometheus_values(snap), {"device": "cam-1"})}
    assert "camera_frame_age_ms" not in fams
    fam = fams["camera_frame_age_seconds"]
    assert (fam.type, fam.samples) == ("gauge", [({"device": "cam-1", "camera": "gate"}, 0.25)])


def test_a_gauge_that_ends_in_total_is_renamed_sum() -> None:
    (fam,) = agent_families({"disk_total": 5.0}, {})
    assert (fam.name, fam.type, fam.samples) == ("disk_sum", "gauge", [({}, 5.0)])


@pytest.mark.parametrize("cam", ["a=b", "line\nnext", 'q"uote', "back\\slash", "n\\n"])
def test_a_camera_label_is_the_cameras_own_id(cam: str) -> None:
    snap = {"state": "running", "cameras": {cam: {"fps": 2.0, "state": "streaming"}}}
    fams = {f.name: f for f in agent_families(prometheus_values(snap), {"device": "cam-1"})}
    assert fams["camera_fps"].samples == [({"device": "cam-1", "camera": cam}, 2.0)]
