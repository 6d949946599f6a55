"""core.messages.fleet_metrics, the edges its mutation run left (issue 36): every sample of a device
that reported little and of one that reported a rollback, infinities as the exposition format
spells them, and a collector value without its own help."""

from __future__ import annotations

from edge_agent.core.messages.fleet_metrics import Family, collector_families, device_families, number
from edge_agent.core.messages.health_history import health


def by_sample(fams: list[Family]) -> dict[tuple[str, str], float]:
    """(family, device) -> value; the model info's labels beside the device."""
    out = {}
    for f in fams:
        for labels, v in f.samples:
            extra = ",".join(f"{k}={labels[k]}" for k in sorted(labels) if k != "device")
            out[(f.name, labels["device"] + (f" {extra}" if extra else ""))] = v
    return out


def test_every_sample_of_a_quiet_device_and_of_one_that_rolled_back() -> None:
    quiet = {"device": "cam-q", "state": "offline", "last_seen": 5.0, "health": None}  # no counts, no health
    rolled = {
        "device": "cam-r",
        "state": "draining",
        "last_seen": 7.0,
        "crashes": 3,
        "gaps": 2,
        "missing": 9,
        "conflicts": 4,
        "health": health(
            {
                "queue": {"disk_full": True},
                "models": {"detector": {"id": "yolo"}},
                "model_update": {"last": {"outcome": "rolled_back", "at": 1.0}},
            }
        ),
    }
    # the quiet device first: a device without health must not end the loop for the others
    assert by_sample(device_families([quiet, rolled])) == {
        ("device_online", "cam-q"): 0.0,
        ("device_last_seen_seconds", "cam-q"): 5.0,
        # what the database has no row for is 0 (no crash, no gap, no conflict), not absent
        ("device_crashes_total", "cam-q"): 0.0,
        ("device_gaps", "cam-q"): 0.0,
        ("device_missing_messages", "cam-q"): 0.0,
        ("device_conflicts_total", "cam-q"): 0.0,
        ("device_online", "cam-r"): 1.0,
        ("device_last_seen_seconds", "cam-r"): 7.0,
        ("device_crashes_total", "cam-r"): 3.0,
        ("device_gaps", "cam-r"): 2.0,
        ("device_missing_messages", "cam-r"): 9.0,
        ("device_conflicts_total", "cam-r"): 4.0,
        ("device_disk_full", "cam-r"): 1.0,
        ("device_update_refused", "cam-r"): 0.0,
        ("device_update_rolled_back", "cam-r"): 1.0,
        ("device_model_info", "cam-r model_id=yolo,version="): 1.0,
    }


def test_infinities_are_spelled_as_the_exposition_format_wants() -> None:
    assert (number(float("inf")), number(float("-inf")), number(float("nan"))) == ("+Inf", "-Inf", "NaN")
    assert (number(0.0), number(-3.0), number(0.25)) == ("0", "-3", "0.25")


def test_a_collector_value_without_its_own_help_is_a_gauge_helped_by_its_name() -> None:
    (fam,) = collector_families({"collector_new_figure": 2}, {"collector": "c1"})
    assert fam == Family(
        "collector_new_figure", "gauge", "collector new figure", [({"collector": "c1"}, 2.0)]
    )
