"""Lost tracks (issue 36): a live track before a lost one in the first association, a live and a
lost track on one object merged into one, and a lost track re-found by a low-score detection, as
measured in tests/bench/bench_mot.py."""

from __future__ import annotations

from edge_agent.core.objects.tracker import Tracker, TrackerParams


def box(x: float, y: float = 100, w: float = 100, h: float = 100) -> list[float]:
    return [x, y, x + w, y + h]


def test_a_live_track_keeps_a_box_a_lost_track_overlaps_a_little_more() -> None:
    """Track 1 (lost since frame 2) overlaps the new box by IoU 0.5625, live track 2 by 0.515: the
    default weight (0.85: 0.478) gives it to the live one; without the weight the lost one takes it."""
    out = {}
    for weight in (TrackerParams().lost_weight, 1.0):
        tr = Tracker(TrackerParams(lost_weight=weight))
        assert [t.track_id for t in tr.update([box(0), box(60)], [0.9, 0.9])] == [1, 2]
        assert [t.track_id for t in tr.update([box(60)], [0.9])] == [2]
        out[weight] = [t.track_id for t in tr.update([box(28)], [0.9])]
        assert [t.track_id for t in tr.tracks] == [1, 2] and tr.removed == []
    assert out == {TrackerParams().lost_weight: [2], 1.0: [1]}


def walk_onto_a_lost_track(params: TrackerParams) -> tuple[Tracker, list[list[int]], list[int]]:
    """Track 1 seen on frames 1-3 at x 0, then lost; track 2 born at x 200 on frame 4 walks left
    20 px a frame until it stands where track 1 was. Returns the ids out and the ids removed."""
    tr = Tracker(params)
    ids = [[t.track_id for t in tr.update([box(0)], [0.9])] for _ in range(3)]
    removed: list[int] = []
    for x in range(200, -1, -20):
        ids.append([t.track_id for t in tr.update([box(x)], [0.9])])
        removed += [t.track_id for t in tr.removed]
    return tr, ids, removed


def test_a_live_and_a_lost_track_on_one_object_are_one_the_one_followed_shorter_goes() -> None:
    tr, ids, removed = walk_onto_a_lost_track(TrackerParams())
    assert ids[:3] == [[1], [1], [1]] and ids[4] == [2]  # track 2 confirmed on its second sighting
    # track 1 was followed over 2 frames, track 2 over more: track 1 is removed, reported once
    assert [t.track_id for t in tr.tracks] == [2] and ids[-1] == [2] and removed == [1]
    assert [t.track_id for t in tr.update([box(0)], [0.9])] == [2]


def test_without_the_duplicate_removal_both_tracks_stay() -> None:
    tr, _, removed = walk_onto_a_lost_track(TrackerParams(dup_iou=1.0))
    assert sorted(t.track_id for t in tr.tracks) == [1, 2] and removed == []


def test_two_tracks_once_seen_together_are_two_objects_however_they_overlap_later() -> None:
    """Tracks 1 and 2 are both seen on frame 1; track 1 is lost, track 2 walks onto where it
    waits (one person passing behind another): not a duplicate, both stay."""
    tr = Tracker()
    assert [t.track_id for t in tr.update([box(0), box(200)], [0.9, 0.9])] == [1, 2]
    removed: list[int] = []
    for x in range(180, -1, -20):
        assert [t.track_id for t in tr.update([box(x)], [0.9])] == [2]
        removed += [t.track_id for t in tr.removed]
    assert removed == [] and [(t.track_id, t.lost) for t in tr.tracks] == [(1, True), (2, False)]


def test_a_lost_track_is_re_found_by_a_low_score_detection() -> None:
    """A person missed on frame 4 comes back partly hidden (score 0.2: below high, so only the second
    association sees it): they keep id 1. ByteTrack leaves lost tracks out of that association, so
    the box went unreported (0.2 is below new_track too)."""
    tr = Tracker()
    ids = [[t.track_id for t in tr.update([box(0)], [0.9])] for _ in range(3)]
    ids.append([t.track_id for t in tr.update([], [])])
    assert tr.tracks[0].lost
    back = tr.update([box(2)], [0.2])
    assert ids == [[1], [1], [1], []]
    assert [(t.track_id, t.det_index, t.lost) for t in back] == [(1, 0, False)]
    assert tr.next_id == 2  # no new id handed out


def _lost_then_copied(frames: int) -> tuple[list[int], list[int]]:
    """Track 1 seen on ``frames`` frames at x 0, then lost; track 2 walks onto it over 11 frames
    (followed over 10). Returns the ids removed and the ids out on the next frame at x 0."""
    tr = Tracker()
    for _ in range(frames):
        tr.update([box(0)], [0.9])
    removed: list[int] = []
    for x in range(200, -1, -20):
        tr.update([box(x)], [0.9])
        removed += [t.track_id for t in tr.removed]
    return removed, [t.track_id for t in tr.update([box(0)], [0.9])]


def test_of_a_lost_track_and_its_copy_the_one_followed_longer_stays() -> None:
    """Followed over 8 frames, the lost one goes (the copy has 10); over 29, the copy goes and
    the lost one takes the object back; on a tie (10 and 10) the live copy goes."""
    assert _lost_then_copied(9) == ([1], [2])
    assert _lost_then_copied(30) == ([2], [1])
    assert _lost_then_copied(11) == ([2], [1])


def test_a_pair_once_seen_together_does_not_hide_another_objects_copy() -> None:
    """Tracks 1-3 on frames 1-3; 1 and 3 are then lost. A walker reaches x 0, where 1 waits (both
    once seen together: not copies), and a new track 4 walks onto 3: 3 is a copy's original."""
    tr = Tracker()
    for _ in range(3):
        tr.update([box(0), box(200), box(1000)], [0.9] * 3)
    removed: list[int] = []
    for k in range(11):
        tr.update([box(max(180 - 20 * k, 0)), box(1200 - 20 * k)], [0.9, 0.9])
        removed += [t.track_id for t in tr.removed]
    assert removed == [3] and 4 in [t.track_id for t in tr.tracks if not t.lost]
