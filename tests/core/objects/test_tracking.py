"""Tracker, zones/lines and the object lifecycle on exact synthetic tracks (frame times known)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edge_agent.core.config.schema import LineConfig, TrackerConfig, ZoneConfig, parse_config
from edge_agent.core.objects.lifecycle import ObjectEvents
from edge_agent.core.objects.mot import format_tracks, parse_detections
from edge_agent.core.objects.tracker import Tracker, TrackerParams, assign, greedy_match, optimal_match
from edge_agent.core.objects.zones import LineState, line_step, polygon_problem
from edge_agent.errors import ConfigError, EdgeAgentError


def box(x: float, y: float = 100, s: float = 50) -> list[float]:
    return [x, y, x + s, y + s]


def test_ids_are_stable_and_a_low_score_detection_keeps_an_occluded_track() -> None:
    tr = Tracker()
    ids = []
    for f in range(20):
        score = 0.2 if 8 <= f < 12 else 0.9  # partly hidden: the detector's score drops
        out = tr.update([box(10 + 10 * f), box(400 - 10 * f, 300)], [score, 0.9])
        ids.append(sorted(t.track_id for t in out))
    assert ids[0] == [1, 2] and ids[-1] == [1, 2]
    assert all(i == [1, 2] for i in ids)  # the low-score frames still continue track 1 (second stage)


def test_a_lost_track_is_refound_within_the_buffer_and_forgotten_after_it() -> None:
    tr = Tracker(TrackerParams(lost_frames=5))
    for f in range(10):
        tr.update([box(10 + 5 * f)], [0.9])
    for _ in range(3):
        assert tr.update([], []) == []
    (t,) = tr.update([box(10 + 5 * 13)], [0.9])  # where the motion model expects it
    assert t.track_id == 1
    for _ in range(7):
        tr.update([], [])
    assert tr.tracks == []  # lost longer than lost_frames: forgotten
    tr2 = Tracker(TrackerParams(lost_frames=5))
    for f in range(10):
        tr2.update([box(10 + 5 * f)], [0.9])
    removed = []
    for _ in range(7):
        tr2.update([], [])
        removed += [r.track_id for r in tr2.removed]
    assert removed == [1]


def test_a_single_frame_blip_never_becomes_a_track_and_uses_no_id() -> None:
    tr = Tracker()
    tr.update([box(10)], [0.9])  # frame 1: confirmed at once (ByteTrack)
    tr.update([box(12), box(300)], [0.9, 0.9])  # a blip at 300
    out = tr.update([box(14)], [0.9])
    assert [t.track_id for t in out] == [1]
    tr.update([box(16), box(500)], [0.9, 0.9])
    out = tr.update([box(18), box(502)], [0.9, 0.9])
    assert sorted(t.track_id for t in out) == [1, 2]  # the second sighting confirms, with the next id


def test_per_class_tracks_do_not_swap_classes() -> None:
    tr = Tracker(TrackerParams(per_class=True))
    tr.update([box(10)], [0.9], [0])
    tr.update([box(10)], [0.9], [0])
    out = tr.update([box(10)], [0.9], [1])  # same place, other class: not the same object
    assert out == []


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.floats(0, 1), min_size=1, max_size=6), min_size=1, max_size=6))
def test_optimal_match_is_optimal_and_assign_agrees(rows: list[list[float]]) -> None:
    import itertools

    m = min(len(r) for r in rows)
    sim = np.array([r[:m] for r in rows])
    gate = 0.3
    got = optimal_match(sim, gate)
    assert len({r for r, _ in got}) == len(got) and len({c for _, c in got}) == len(got)
    assert all(sim[r, c] >= gate for r, c in got)
    g = np.where(sim >= gate, sim, 0.0)
    n, k = g.shape
    best = max(
        sum(g[r, c] for r, c in zip(rows_, cols))
        for rows_ in itertools.permutations(range(n), min(n, k))
        for cols in itertools.permutations(range(k), min(n, k))
    )
    assert sum(sim[r, c] for r, c in got) == pytest.approx(best)
    assert sum(sim[r, c] for r, c in assign(sim, gate)) == pytest.approx(best)
    assert sum(sim[r, c] for r, c in greedy_match(sim, gate)) <= best + 1e-9


def test_mot_files_bad_lines_are_named_and_tracks_are_written() -> None:
    dets = parse_detections(["1,-1,10,20,30,40,0.9", "", "2,-1,10,20,30,40,0.8,2"], "d.txt")
    assert dets[1][0] == (10.0, 20.0, 40.0, 60.0, 0.9, 0) and dets[2][0][5] == 2
    for bad, what in [
        ("1,-1,a,2,3,4,5", "d.txt:1"),
        ("0,-1,1,2,3,4,5", "frame"),
        ("1,-1,1,2,3", "columns"),
        ("1,-1,nan,2,3,4,5", "finite"),
    ]:
        with pytest.raises(EdgeAgentError, match=what):
            parse_detections([bad], "d.txt")
    assert list(format_tracks(3, [(7, (10.0, 20.0, 40.0, 60.0), 0.5)])) == [
        "3,7,10.00,20.00,30.00,40.00,0.500,-1,-1,-1\n"
    ]


# ---- lines and zones ---------------------------------------------------------------------------
A, B = (0.5, 0.0), (0.5, 1.0)  # heading down the middle: "right" of it is the left half (y is down)


def test_jitter_on_the_line_counts_one_crossing() -> None:
    st_ = LineState()
    xs = [0.3, 0.4, 0.49, 0.51, 0.495, 0.505, 0.49, 0.51, 0.6, 0.7, 0.515, 0.6]
    got = [line_step(st_, (x, 0.5), A, B, 0.02, in_sign=-1) for x in xs]
    assert [g for g in got if g] == ["in"]  # left half -> right half once; the band eats the jitter


def test_a_real_back_and_forth_counts_both_ways_and_a_pass_beside_the_segment_none() -> None:
    st_ = LineState()
    got = [line_step(st_, (x, 0.5), A, B, 0.02, -1) for x in (0.3, 0.7, 0.3)]
    assert [g for g in got if g] == ["in", "out"]
    short = ((0.5, 0.0), (0.5, 0.4))
    st2 = LineState()
    assert [line_step(st2, (x, 0.8), *short, 0.02, -1) for x in (0.3, 0.7)] == [None, None]


def events_for(
    path: list[list[list[float] | None]],
    zones: list[ZoneConfig],
    lines: list[LineConfig],
    exit_frames: int = 3,
    label: str = "car",
) -> list[tuple[int, str, float]]:
    """Feed per-frame boxes (None = not detected) at 10 fps; returns (frame, event, dwell)."""
    cfg = TrackerConfig(min_hits=1, anchor="center", zone_exit_frames=exit_frames)
    ev = ObjectEvents(cfg, zones, lines, 60, 0.0)
    tr = Tracker(TrackerParams(lost_frames=10))
    out = []
    for f, boxes in enumerate(path):
        b = [x for x in boxes if x is not None]
        tracks = tr.update(b, [0.9] * len(b))
        for e in ev.update(f / 10, tracks, tr.removed, (1000, 1000), lambda c: label):
            out.append((f, e["event"] if "direction" not in e else e["direction"], e.get("dwell_s", 0.0)))
    for e in ev.end_all(tr.end_all(), len(path) / 10):
        out.append((len(path), e["event"], e.get("dwell_s", 0.0)))
    return out


def test_a_track_lost_on_the_line_and_refound_beyond_it_counts_once() -> None:
    line = LineConfig(name="gate", points=[(0.5, 0.0), (0.5, 1.0)], in_side="left")
    path: list[list[list[float] | None]] = [[box(300 + 20 * f, 475)] for f in range(10)]
    path += [[None]] * 3  # lost exactly while crossing
    path += [[box(300 + 20 * f, 475)] for f in range(13, 25)]
    got = [e for e in events_for(path, [], [line]) if e[1] in ("in", "out")]
    assert got == [(13, "in", 0.0)]


def test_dwell_is_exact_in_frame_time_and_a_short_visit_does_not_enter() -> None:
    zone = ZoneConfig(name="bay", polygon=[(0.2, 0.2), (0.8, 0.2), (0.8, 0.8), (0.2, 0.8)], min_dwell_s=1.0)
    path: list[list[list[float] | None]] = [[box(50 + 20 * f, 475)] for f in range(10)]  # outside -> inside
    path += [[box(250, 475)]] * 25  # first inside at frame 7 (centre 215 > 200), stays to frame 34
    path += [[box(250 - 20 * k, 475)] for k in range(1, 11)]  # walks out: last inside frame 37
    got = events_for(path, [zone], [])
    zone_events = [(f, e, d) for f, e, d in got if e.startswith("zone")]
    # entered 1.0 s after frame 7 (frame 17); the Kalman-filtered box lags the turn by one frame, so
    # the last inside frame is 38 and it left on the 3rd frame outside (39, 40, 41): dwell 3.1 s
    assert zone_events == [(17, "zone_entered", 1.0), (41, "zone_left", 3.1)]
    short: list[list[list[float] | None]] = [[box(250, 475)]] * 8 + [[box(50, 475)]] * 5
    assert not [e for e in events_for(short, [zone], []) if e[1].startswith("zone")]


def test_zone_jitter_on_the_edge_is_one_stay() -> None:
    zone = ZoneConfig(name="bay", polygon=[(0.2, 0.2), (0.8, 0.2), (0.8, 0.8), (0.2, 0.8)])
    xs = [300, 170, 300, 170, 170, 300, 300, 300] + [50] * 4  # two frames out never leave (exit_frames 3)
    got = [e[1] for e in events_for([[box(x, 475)] for x in xs], [zone], []) if e[1].startswith("zone")]
    assert got == ["zone_entered", "zone_left"]


def test_counts_restore_refuses_garbage_and_continues_totals() -> None:
    line = LineConfig(name="gate", points=[(0.5, 0.0), (0.5, 1.0)])
    ev = ObjectEvents(TrackerConfig(), [], [line], 60, 0.0)
    assert (
        ev.restore_counts(
            {
                "interval_start": 5.0,
                "interval": {"lines": {"gate": {"in": 2}}, "zones": {}},
                "totals": {"lines": {"gate": {"in": 7, "out": 1}}, "zones": {}},
            }
        )
        is None
    )
    assert ev.take_counts(10.0)["lines"]["gate"] == {"in": 2, "out": 0, "total_in": 7, "total_out": 1}
    for bad in (
        {},
        {"interval_start": "x"},
        {
            "interval_start": 1,
            "interval": {"lines": {"gate": {"in": -1}}, "zones": {}},
            "totals": {"lines": {}, "zones": {}},
        },
        {
            "interval_start": 1,
            "interval": {"lines": {"gate": {"in": 10**13}}, "zones": {}},
            "totals": {"lines": {}, "zones": {}},
        },
    ):
        assert ev.restore_counts(bad) is not None


# ---- config check ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "section, expected",
    [
        (
            '[[zones]]\nname = "a"\npolygon = [[0.1, 0.1], [0.9, 0.9], [0.9, 0.1], [0.1, 0.9]]',
            "zones.0.polygon.*self-intersecting",
        ),
        (
            '[[zones]]\nname = "a"\npolygon = [[0.1, 0.1], [1.2, 0.1], [0.5, 0.5]]',
            "zones.0.polygon.*outside 0..1",
        ),
        ('[[lines]]\nname = "l"\npoints = [[0.5, 0.5], [0.5, 0.5]]', "lines.0.points.*degenerate"),
        ('[[lines]]\nname = "l"\npoints = [[0.5, 0.5], [0.5, -0.1]]', "lines.0.points.*outside 0..1"),
        (
            '[[lines]]\nname = "l"\npoints = [[0.1, 0.5], [0.9, 0.5]]\n[[lines]]\nname = "l"\npoints = [[0.1, 0.5], [0.9, 0.5]]',
            "used twice",
        ),
        ('[[lines]]\nname = "l\\u0007"\npoints = [[0.1, 0.5], [0.9, 0.5]]', "lines.0.name"),
    ],
)
def test_config_check_names_the_bad_geometry_in_one_line(section: str, expected: str) -> None:
    with pytest.raises(ConfigError, match=expected) as exc:
        parse_config(section, "c.toml")
    assert "\n" not in str(exc.value)


def test_a_convex_and_a_concave_polygon_are_fine() -> None:
    assert polygon_problem([(0.1, 0.1), (0.9, 0.1), (0.9, 0.9), (0.5, 0.4), (0.1, 0.9)]) is None


def test_a_detector_gone_wild_stays_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """300 overlapping boxes a frame, every frame somewhere else: the crowd goes to the greedy
    matcher, never to the O(n^3) solver, and the lost tracks are capped (memory, cost)."""
    from edge_agent.core.objects import assignment as amod
    from edge_agent.core.objects import tracker as tmod

    sizes: list[int] = []
    real = amod.optimal_match

    def spy(sim: np.ndarray, gate: float) -> list[tuple[int, int]]:
        sizes.append(min(sim.shape))
        return real(sim, gate)

    monkeypatch.setattr(amod, "optimal_match", spy)  # what assign() calls per group
    monkeypatch.setattr(tmod, "MAX_LOST", 100)
    rng = np.random.default_rng(3)
    tr = Tracker()
    xy = rng.uniform(0, 2000, (300, 2))
    tr.update(np.concatenate([xy, xy + 60], 1), np.full(300, 0.9))  # frame 1: 300 confirmed tracks
    tr.update([], [])  # all lost at once: only the newest MAX_LOST are kept
    assert sum(t.lost for t in tr.tracks) == 100 and len(tr.removed) == 200
    for _ in range(12):
        xy = rng.uniform(0, 200, (300, 2))
        tr.update(np.concatenate([xy, xy + 60], 1), rng.uniform(0.5, 1, 300))
    assert sizes and max(sizes) <= amod.MAX_OPTIMAL
    assert sum(t.lost for t in tr.tracks) <= 100


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1)), max_size=60),
    st.floats(0, 0.1),
    st.sampled_from([1, -1]),
)
def test_line_crossings_alternate_and_never_run_away(
    points: list[tuple[float, float]], margin: float, in_sign: int
) -> None:
    """Whatever a track does, its crossings alternate in/out: it can never count "in" twice without
    having gone "out" in between (no double counting by jitter, gaps or jumps)."""
    state = LineState()
    got = [
        d for p in points if (d := line_step(state, p, (0.5, 0.1), (0.5, 0.9), margin, in_sign)) is not None
    ]
    assert all(a != b for a, b in zip(got, got[1:]))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.booleans(), max_size=80), st.floats(0, 2), st.integers(1, 5))
def test_zone_events_alternate_and_dwell_is_at_least_the_minimum(
    inside: list[bool], min_dwell: float, exit_frames: int
) -> None:
    from edge_agent.core.objects.zones import ZoneState, zone_end, zone_step

    state = ZoneState()
    events = [
        e for i, flag in enumerate(inside) if (e := zone_step(state, flag, i / 10, min_dwell, exit_frames))
    ]
    end = zone_end(state)
    events += [end] if end else []
    kinds = [k for k, _ in events]
    assert kinds == ["entered", "left"] * (len(kinds) // 2)  # entered, left, entered, left ...
    assert all(d >= min_dwell - 1e-9 for k, d in events if k == "left")


def test_zones_and_lines_only_count_their_classes() -> None:
    line = LineConfig(name="gate", points=[(0.5, 0.0), (0.5, 1.0)], classes=["car"])
    zone = ZoneConfig(name="bay", polygon=[(0.2, 0.2), (0.8, 0.2), (0.8, 0.8), (0.2, 0.8)], classes=["car"])
    path: list[list[list[float] | None]] = [[box(100 + 20 * f, 475)] for f in range(40)]
    kinds = {e[1] for e in events_for(path, [zone], [line], label="car")}
    assert {"out", "zone_entered", "zone_left"} <= kinds  # in_side "right" of a downward line: screen left
    kinds = {e[1] for e in events_for(path, [zone], [line], label="person")}
    assert kinds == {"appeared", "ended"}


def test_the_documented_objects_config_parses_as_documented() -> None:
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[3] / "docs" / "objects.md").read_text()
    block = doc.split("```toml\n", 1)[1].split("```", 1)[0]
    cfg = parse_config(block, "docs/objects.md")
    assert cfg.output.mode == "objects" and cfg.tracker == TrackerConfig()  # the comments say "the defaults"
    assert [z.name for z in cfg.zones] == ["bay"] and cfg.lines[0].in_side == "left"


# ---- [tracker] low against [detector] conf_threshold (docs/objects.md) ------------------------
@pytest.mark.parametrize(
    ("mode", "conf", "low", "high", "says"),
    [
        ("objects", 0.25, 0.1, 0.3, "tracker.low = 0.1 acts from 0.25 only"),
        ("objects", 0.3, 0.1, 0.3, "tracker.low = 0.1 has no effect"),
        ("objects", 0.1, 0.1, 0.3, "tracker.low = 0.1 acts from 0.1 only"),  # the detector keeps > 0.1
        ("objects", 0.05, 0.1, 0.3, None),
        ("objects", 0.0, 0.0, 0.3, None),
        ("event", 0.25, 0.1, 0.3, None),  # no tracker outside objects mode
    ],
)
def test_config_check_says_when_tracker_low_is_cut_by_the_detector(
    mode: str, conf: float, low: float, high: float, says: str | None
) -> None:
    from edge_agent.core.config.scene import tracker_low_warning

    line = tracker_low_warning(mode, conf, low, high)
    if says is None:
        assert line is None
    else:
        assert line is not None and line.startswith(says) and f"conf_threshold = {conf:g}" in line


def test_config_check_prints_the_tracker_low_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from edge_agent.app.cli.main import main

    cfg = tmp_path / "agent.toml"
    det = '[detector]\nmodel = "/nowhere/det.onnx"\n'  # a missing model is a warning of its own
    cfg.write_text('[output]\nmode = "objects"\n' + det)
    assert main(["config", "check", str(cfg)]) == 0
    err = capsys.readouterr().err
    assert f"warning: {cfg}: tracker.low = 0.1 acts from 0.25 only" in err, err
    cfg.write_text('[output]\nmode = "objects"\n' + det + "conf_threshold = 0.05\n")
    assert main(["config", "check", str(cfg)]) == 0
    assert "tracker.low" not in capsys.readouterr().err
